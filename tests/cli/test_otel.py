"""``--otel`` through the real command: traces exported next to the live view, a one-line
hint when tracing is off, and a bad exporter refused before the run starts."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sp4rk.store import SQLiteRunStore
from tests.cli.helpers import SP4RK, Sp4rk, call, command_env, done, events, reply, write_script

pytest.importorskip("opentelemetry.sdk")
REPLIES = [reply(call("glob", pattern="*")), *done("traced")]


def run_traced(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``sp4rk run --otel`` in a subprocess (the SDK's providers are process-global)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = write_script(tmp_path / "script.json", REPLIES)
    return subprocess.run(
        [
            *SP4RK,
            "run",
            "look around",
            "-w",
            str(workspace),
            "--model",
            f"scripted:{script}",
            "--store",
            str(tmp_path / "runs.db"),
            "--otel",
        ],
        env=command_env(**env),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def spans(stdout: str) -> list[dict[str, Any]]:
    """The spans the console exporter printed (JSON objects, one after another)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (start := stdout.find("{", at)) >= 0:
        value, at = decoder.raw_decode(stdout, start)
        if isinstance(value, dict) and "context" in value:
            found.append(value)
    return found


def test_otel_exports_the_run_and_the_live_view_goes_on(tmp_path: Path) -> None:
    out = run_traced(tmp_path, OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none")
    assert out.returncode == 0, out.stdout + out.stderr
    names = {s["name"] for s in spans(out.stdout)}
    assert {"invoke_agent sp4rk", "chat scripted", "execute_tool glob"} <= names
    (run,) = [s for s in spans(out.stdout) if s["name"] == "invoke_agent sp4rk"]
    (stored,) = SQLiteRunStore(tmp_path / "runs.db").list_runs()
    assert run["attributes"]["gen_ai.conversation.id"] == stored.id  # trace -> sp4rk show ID
    assert "exporting traces and metrics" in out.stderr
    assert "→ glob" in out.stderr and "finished (finished)" in out.stderr  # the view, unchanged


def test_an_exporter_nothing_provides_is_refused_before_the_run(tmp_path: Path) -> None:
    out = run_traced(tmp_path, OTEL_TRACES_EXPORTER="nonesuch")
    assert out.returncode == 1
    assert out.stderr.startswith("sp4rk: error: --otel:") and "nonesuch" in out.stderr
    assert SQLiteRunStore(tmp_path / "runs.db").list_runs() == []


def test_otel_disabled_by_the_environment_says_so_in_one_line(
    sp4rk: Sp4rk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert sp4rk.run(REPLIES, "--otel", "--json") == 0
    warnings = [e["text"] for e in events(sp4rk.out) if e["event"] == "warning"]
    assert warnings == ["--otel: not tracing: OTEL_SDK_DISABLED is true"]
    assert sp4rk.result()["output"] == "traced"


def test_otel_without_the_sdk_says_what_to_install(
    sp4rk: Sp4rk, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sp4rk.otel import environment

    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name.startswith("opentelemetry.sdk") else real(name, *args)

    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    fake = SimpleNamespace(util=SimpleNamespace(find_spec=find_spec))
    monkeypatch.setattr(environment, "importlib", fake)
    assert sp4rk.run(REPLIES, "--otel") == 0
    (line,) = [ln for ln in sp4rk.err.splitlines() if "--otel" in ln]
    assert "not tracing: the OpenTelemetry SDK is not installed" in line
    assert "pip install" in line and "opentelemetry-sdk" in line


def test_the_console_exporter_and_json_are_refused_together(
    sp4rk: Sp4rk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    assert sp4rk.run(REPLIES, "--otel", "--json") == 2
    errors = [e["message"] for e in events(sp4rk.out) if e["event"] == "error"]
    assert len(errors) == 1 and "pick one" in errors[0]
