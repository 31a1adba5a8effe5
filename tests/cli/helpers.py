"""Shared helpers for driving the real ``sp4rk`` command: scripts, workspaces, JSON output."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from sp4rk.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def reply(*calls: dict[str, Any], content: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"content": content} if content else {}
    if calls:
        out["tool_calls"] = list(calls)
    return out


def finish(answer: str = "done") -> dict[str, Any]:
    return reply(call("finish", answer=answer))


def done(answer: str = "done") -> list[dict[str, Any]]:
    """Two finishes: the checklist gate may refuse the first one of a longer run."""
    return [finish(answer), finish(answer)]


def write_script(path: Path, replies: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(replies), encoding="utf-8")
    return path


def events(stdout: str) -> list[dict[str, Any]]:
    """The JSON lines of a ``--json`` run."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def command_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess running this worktree's sp4rk."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SP4RK_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


SP4RK = [sys.executable, "-m", "sp4rk"]


class Sp4rk:
    """Runs ``sp4rk`` in this process against one workspace and one store."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir()
        self.store = tmp_path / "state" / "runs.db"
        self.tmp = tmp_path
        self.capsys = capsys
        self.out = self.err = ""

    def __call__(self, *args: str) -> int:
        self.capsys.readouterr()
        code = main([*args, "--store", str(self.store)])
        self.out, self.err = self.capsys.readouterr()
        return code

    def run(self, replies: list[dict[str, Any]], *args: str, task: str = "do it") -> int:
        script = write_script(self.tmp / "script.json", replies)
        return self("run", task, "-w", str(self.workspace), "--model", f"scripted:{script}", *args)

    def result(self) -> dict[str, Any]:
        last = events(self.out)[-1]
        assert last["event"] == "result", self.out + self.err
        return last

    def shown(self, run_id: str) -> dict[str, Any]:
        assert self("show", run_id, "--json") == 0
        data: dict[str, Any] = json.loads(self.out)
        return data
