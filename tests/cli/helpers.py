"""Shared helpers for driving the real ``sp4rk`` command: scripts, workspaces, JSON output."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

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
