"""Scripted batches: task files whose models replay replies and whose tools write files."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from sp4rk.batch import ModelFactory
from sp4rk.cli.batch import batch_model
from tests.cli.helpers import call, finish, reply

#: Fields that differ between two executions of the same batch (ids, wall-clock time).
VOLATILE = ("run_id", "seconds")


def factory(base: Path) -> ModelFactory:
    """The command's model factory (picklable: Ray workers import it)."""
    return functools.partial(batch_model, base=str(base))


def script_for(i: int, steps: int = 2) -> list[dict[str, Any]]:
    """Write ``out.txt`` (and ``step-K.txt`` for more steps), then finish."""
    replies = [
        {
            **reply(
                call("write_file", path="out.txt", content=f"task {i}\n"),
                content=f"writing the answer of task {i}",
            ),
            "usage": {"input_tokens": 100 + i, "output_tokens": 10},
        }
    ]
    for k in range(2, steps):
        replies.append(reply(call("write_file", path=f"step-{k}.txt", content=f"{i}/{k}\n")))
    # A second finish: the checklist gate refuses the first one of a longer run.
    replies += [{**finish(f"done {i}"), "usage": {"input_tokens": 150, "output_tokens": 5}}] * 2
    return replies


def write_batch(
    root: Path,
    n: int,
    *,
    steps: int = 2,
    slow: dict[int, str] | None = None,
) -> Path:
    """A task file of ``n`` tasks under ``root``, each with a workspace and a script.

    ``slow`` maps a task number to a shell command it runs first (to be killed in).
    """
    (root / "scripts").mkdir(parents=True, exist_ok=True)
    seed = root / "seed"
    seed.mkdir(exist_ok=True)
    (seed / "README.md").write_text("the starting workspace\n", encoding="utf-8")
    lines = []
    for i in range(n):
        replies = script_for(i, steps)
        if slow and i in slow:
            replies.insert(0, reply(call("bash_exec", command=slow[i], timeout=120)))
        (root / "scripts" / f"t{i}.json").write_text(json.dumps(replies), encoding="utf-8")
        lines.append(
            json.dumps(
                {
                    "id": f"t{i}",
                    "task": f"write the answer of task {i}",
                    "workspace": "seed",
                    "model": f"scripted:scripts/t{i}.json",
                }
            )
        )
    tasks = root / "tasks.jsonl"
    tasks.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tasks


def result_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def stable(lines: list[dict[str, Any]]) -> set[str]:
    """The result lines without what differs between executions, order aside."""
    return {
        json.dumps({k: v for k, v in line.items() if k not in VOLATILE}, sort_keys=True)
        for line in lines
    }


def expected_line(i: int, *, steps: int = 2) -> dict[str, Any]:
    """The result of ``script_for(i, steps)``: from 4 steps on, the first finish is refused."""
    refused = steps >= 4
    return {
        "id": f"t{i}",
        "exit_reason": "finished",
        "finished": True,
        "output": f"done {i}",
        "steps": steps + refused,
        "input_tokens": 100 + i + 150 * (1 + refused),
        "output_tokens": 15 + 5 * refused,
        "cost_usd": 0.0,
    }


def kill_leftovers(folder: Path) -> None:
    """Kill what a killed process's shell call left running in ``folder`` (its ``sleep``)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if Path(os.readlink(entry / "cwd")) == folder.resolve():
                os.kill(int(entry.name), signal.SIGKILL)


def wait_for_file(root: Path, pattern: str, timeout: float = 120.0) -> Path:
    """Poll until another process created a file matching ``pattern`` under ``root``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(root.glob(pattern))
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {pattern} under {root}")
