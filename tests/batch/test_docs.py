"""docs/batch.md's example runs as written: the command, its report and results, the snippet."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.batch.helpers import result_lines, stable
from tests.cli.helpers import SP4RK, command_env

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "batch.md"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A folder holding ``examples/batch`` as the repository does."""
    shutil.copytree(ROOT / "examples" / "batch", tmp_path / "examples" / "batch")
    return tmp_path


def section(title: str) -> str:
    return DOC.read_text(encoding="utf-8").split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced blocks of ``text``: ``(language, body)``."""
    found, language, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if language is None:
                words = line[3:].split()
                language, body = (words[0] if words else ""), []
            else:
                found.append((language, "\n".join(body)))
                language = None
        elif language is not None:
            body.append(line)
    return found


def test_the_example_command_prints_the_documented_report_and_results(checkout: Path) -> None:
    text = section("Try it without a key")
    (command,) = [
        line for line in text.splitlines() if line.startswith("sp4rk batch") and "--ray" not in line
    ]
    run = subprocess.run(
        [*SP4RK, *shlex.split(command)[1:]],
        cwd=checkout,
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    plain = [body for language, body in blocks(text) if language == "text"]
    progress, report, documented = plain[0], plain[1], plain[2]
    assert progress.splitlines()[0] == run.stderr.splitlines()[0]
    assert len(progress.splitlines()) == len(run.stderr.splitlines())  # (in any order)
    for line in report.splitlines():
        if "throughput" in line or "CPU per step" in line:
            continue  # timings differ from run to run
        assert line in run.stdout.splitlines()
    shown = [json.loads(line) for line in documented.splitlines()]
    assert stable(shown) <= stable(result_lines(checkout / "results.jsonl"))

    again = subprocess.run(
        [*SP4RK, *shlex.split(command)[1:]],
        cwd=checkout,
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "batch (local): 0 done now, 6 done before, 0 left, of 6 tasks" in again.stdout
    assert (checkout / "examples" / "batch" / "project" / "greeting.txt").exists() is False


def test_the_python_snippet_runs(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (code,) = [body for language, body in blocks(section("From Python")) if language == "python"]
    monkeypatch.chdir(checkout)
    namespace: dict[str, object] = {"__name__": "batch_docs_example"}
    exec(compile(code, str(DOC), "exec"), namespace)
    assert len(result_lines(checkout / "results.jsonl")) == 6
