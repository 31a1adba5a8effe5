"""``configure_from_environment``: exporters from the standard ``OTEL_*`` variables."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sp4rk.otel import configure_from_environment

SRC = Path(__file__).resolve().parents[2] / "src"
#: A process that sets tracing up from its environment, runs a scripted agent, and exits.
SCRIPT = """
from sp4rk.agent import Executor
from sp4rk.llm.testing import ScriptedLLM, finish_response
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry
from sp4rk.otel import configure_from_environment

events = configure_from_environment(agent_name="cli")
print("capture", events.capture_content, flush=True)
Executor(ScriptedLLM([finish_response("ok")]), Registry([]), 3, events=events).run_sync(
    [], ContextWindow(task="t")
)
"""


def run_configured(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    base["PYTHONPATH"] = os.pathsep.join([str(SRC), base.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_console_export_of_a_run_flushed_at_exit() -> None:
    out = run_configured(
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="none",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
    )
    assert out.startswith("capture True")
    spans = json.loads("[" + out.split("\n", 1)[1].replace("}\n{", "},{") + "]")
    names = {span["name"]: span for span in spans}
    assert set(names) == {"invoke_agent cli", "chat", "execute_tool finish"}
    assert names["invoke_agent cli"]["resource"]["attributes"]["service.name"] == "sp4rk"
    assert names["execute_tool finish"]["attributes"]["gen_ai.tool.call.result"] == "ok"


def test_the_service_name_comes_from_the_environment() -> None:
    out = run_configured(
        OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none", OTEL_SERVICE_NAME="night"
    )
    assert out.startswith("capture False")
    assert '"service.name": "night"' in out


def test_disabled_sdk_means_no_sink(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert configure_from_environment() is None


def test_without_the_sdk_it_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "opentelemetry.sdk" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with caplog.at_level(logging.WARNING, logger="sp4rk.otel"):
        assert configure_from_environment() is None
    assert "pip install opentelemetry-sdk opentelemetry-exporter-otlp" in caplog.text


def test_a_missing_otlp_exporter_names_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [])
    with pytest.raises(ImportError, match="pip install opentelemetry-exporter-otlp-proto-grpc"):
        configure_from_environment()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OTEL_TRACES_EXPORTER", "bogus", "OTEL_TRACES_EXPORTER names 'bogus'"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "'http/json' is not supported"),
    ],
)
def test_a_bad_variable_is_refused_with_what_to_use(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=message):
        configure_from_environment()
