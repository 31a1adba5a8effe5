"""The kill -9 battery: the real ``sp4rk`` command killed at hundreds of points, then resumed.

Scripted runs whose tools append a unique token to ``effects.log`` (``bash_exec`` and
``write_file``) are started, and each is killed with SIGKILL at one point: before or after
each durable write of the runs store (boundary commit, response, call start, call step, run
end), after a tool's effect but before the executor hears of it, while the model "thinks",
and at random moments. Each killed run is then resumed to its end with ``sp4rk resume``, and
the battery counts:

- lost completed steps: steps the store held as committed or as a completed call when the
  process died, missing (or changed) in the final trajectory;
- mutating calls run twice: tokens appended more than once;
- invalid prompts after resume: requests of the resumed run that ``validate_history``
  rejects, and final trajectories that do not render to a valid history;
- unaccounted effects: tokens appended whose call is not in the final trajectory;
- unfinished resumes: resumed runs that did not finish.

Runs are forked from this process after the imports, so hundreds of kill points take a few
seconds of start-up instead of minutes. Run it alone (``python tests/cli/kill9_battery.py``)
or through ``tests/cli/test_kill9.py``; it prints the counts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sp4rk.cli import main
from sp4rk.cli.scripted import ScriptModel
from sp4rk.llm import ChatRequest, ChatResponse
from sp4rk.memory import ContextWindow, validate_history
from sp4rk.memory.validate import InvalidHistoryError
from sp4rk.store import SQLiteRunStore
from sp4rk.tools import Registry

TASK = "append the tokens"


def bash(token: str) -> dict[str, Any]:
    command = f"echo {token} >> effects.log && echo appended {token}"
    return {"name": "bash_exec", "arguments": {"command": command}}


def read() -> dict[str, Any]:
    return {"name": "read_file", "arguments": {"path": "effects.log"}}


def write(token: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": f"{token}.txt", "content": token}}


def edit(old: str, new: str) -> dict[str, Any]:
    arguments = {"path": "notes.txt", "old_string": old, "new_string": new}
    return {"name": "edit_file", "arguments": arguments}


def finish() -> dict[str, Any]:
    return {"tool_calls": [{"name": "finish", "arguments": {"answer": "all appended"}}]}


#: The checklist gate refuses the first finish of a run without a checklist. A finish cut
#: short by a crash is answered "not executed" and must be given again, and a refusal whose
#: response was cut is not remembered (the state is saved at boundaries): a third finish
#: covers both, as a real model would simply finish again.
FINISHES = [finish(), finish(), finish()]

SCENARIOS: dict[str, list[dict[str, Any]]] = {
    # One call per response, a text reply in between (it is nudged), then the finish.
    "serial": [
        {"content": "First the log.", "tool_calls": [bash("s1")]},
        {"tool_calls": [bash("s2")]},
        {"content": "Check it.", "tool_calls": [read()]},
        {"tool_calls": [bash("s3")]},
        {"content": "Thinking aloud without a call."},
        {"tool_calls": [bash("s4")]},
        {"tool_calls": [write("w1")]},
        {"tool_calls": [bash("s5")]},
        {"tool_calls": [bash("s6")]},
        *FINISHES,
    ],
    # Several calls per response (a crash may cut a response in the middle), file writes.
    "batched": [
        {"tool_calls": [bash("b1"), bash("b2"), bash("b3")]},
        {"tool_calls": [write("w1"), bash("b4")]},
        {"tool_calls": [bash("b5"), bash("b6"), write("w2")]},
        {"tool_calls": [bash("b7"), bash("b8"), bash("b9")]},
        *FINISHES,
    ],
    # Edits checked by a verify command after each response that changed a file.
    "edits": [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "notes.txt", "content": "v1\n"}},
                bash("e1"),
            ]
        },
        {"content": "Edit it.", "tool_calls": [edit("v1", "v2"), bash("e2")]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [bash("e3"), edit("v2", "v3")]},
        *FINISHES,
    ],
}
#: Extra options of each scenario's run.
OPTIONS = {"edits": ["--verify", "grep -q v notes.txt"]}

# --- kill points inside the child -------------------------------------------------------


def _arm(kill_at: int) -> None:
    """Make this (child) process SIGKILL itself at its ``kill_at``-th point."""
    count = 0

    def point() -> None:
        nonlocal count
        count += 1
        if count == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def around(owner: Any, name: str, *, before: bool, after: bool) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if before:
                point()
            result = original(*args, **kwargs)
            if after:
                point()
            return result

        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            if before:
                point()
            result = await original(*args, **kwargs)
            if after:
                point()
            return result

        import inspect

        setattr(owner, name, async_wrapper if inspect.iscoroutinefunction(original) else wrapper)

    for name in (
        "commit_boundary",
        "record_response",
        "record_call_start",
        "record_call_step",
        "end_run",
    ):
        around(SQLiteRunStore, name, before=True, after=True)
    around(Registry, "execute", before=False, after=True)  # effect done, not yet recorded
    around(ScriptModel, "call", before=True, after=False)  # the model is thinking


def _validate_prompts(invalid_log: Path) -> None:
    """Record every request of this (resumed) run whose history is invalid."""
    original = ScriptModel.call

    async def call(self: ScriptModel, request: ChatRequest) -> ChatResponse:
        try:
            validate_history(request.messages)
        except InvalidHistoryError as exc:
            with invalid_log.open("a") as f:
                f.write(json.dumps(str(exc)) + "\n")
        return await original(self, request)

    ScriptModel.call = call  # type: ignore[method-assign]


def _child(argv: list[str], workspace: Path, setup: Callable[[], None]) -> int:
    """Fork; the child runs ``sp4rk argv`` and exits; returns the child's wait status."""
    pid = os.fork()
    if pid == 0:
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.chdir(workspace)
            setup()
            code = main(argv)
        except BaseException:
            code = 99
        os._exit(code)
    return pid


def _wait(pid: int, kill_after: float | None = None) -> int:
    if kill_after is not None:
        deadline = time.monotonic() + kill_after
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            time.sleep(0.005)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return status


# --- one kill point -----------------------------------------------------------------------


def _durable(store_path: Path, run_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What the store holds now: committed steps, and steps of completed calls."""
    db = sqlite3.connect(store_path)
    try:
        committed = [
            json.loads(d)
            for (d,) in db.execute(
                "SELECT data FROM steps WHERE run_id = ? ORDER BY seq", (run_id,)
            )
        ]
        recorded = [
            json.loads(d)
            for (d,) in db.execute(
                "SELECT recorded FROM tool_calls WHERE run_id = ? AND recorded IS NOT NULL",
                (run_id,),
            )
        ]
    finally:
        db.close()
    return committed, recorded


def one_point(
    root: Path, scenario: str, *, kill_at: int | None = None, kill_after: float | None = None
) -> dict[str, int] | None:
    """Kill a run at one point and resume it; the counts, or ``None`` if it was never killed."""
    workspace = root / "ws"
    workspace.mkdir(parents=True)
    store = root / "runs.db"
    script = root / "script.json"
    script.write_text(json.dumps(SCENARIOS[scenario]))
    argv = [
        "run",
        TASK,
        "-w",
        str(workspace),
        "--model",
        f"scripted:{script}",
        "--approve",
        "auto",
        "--store",
        str(store),
        *OPTIONS.get(scenario, []),
    ]
    setup = (lambda: _arm(kill_at)) if kill_at is not None else (lambda: None)
    status = _wait(_child(argv, workspace, setup), kill_after)
    if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
        return None  # the run ended before the kill point
    counts = dict.fromkeys(("lost", "twice", "invalid", "unaccounted", "unfinished"), 0)
    if not store.exists():
        return counts  # killed before the store existed: nothing to lose
    with SQLiteRunStore(store) as opened:
        runs = opened.list_runs()
    if not runs:
        return counts  # killed before the run was created
    run_id = runs[0].id
    committed, recorded = _durable(store, run_id)

    invalid_log = root / "invalid.log"
    resume = [
        "resume",
        run_id,
        "--approve",
        "auto",
        "--store",
        str(store),
        *OPTIONS.get(scenario, []),
    ]
    status = _wait(_child(resume, workspace, lambda: _validate_prompts(invalid_log)))
    with SQLiteRunStore(store) as opened:
        final = opened.steps(run_id)
        record = opened.get_run(run_id)
    final_dicts = [s.to_dict() for s in final]
    # Exit 2 is "already finished": the kill came after the run was marked finished.
    exited = os.WIFEXITED(status) and os.WEXITSTATUS(status) in (0, 2)
    counts["unfinished"] = int(not exited or record.status != "finished")
    counts["lost"] = sum(1 for a, b in zip(committed, final_dicts, strict=False) if a != b)
    counts["lost"] += max(0, len(committed) - len(final_dicts))
    counts["lost"] += sum(1 for step in recorded if step not in final_dicts)
    counts["invalid"] = len(invalid_log.read_text().splitlines()) if invalid_log.exists() else 0
    window = ContextWindow()
    window.seed_steps(final)
    try:
        validate_history(window.build_prompt())
    except InvalidHistoryError:
        counts["invalid"] += 1
    log = workspace / "effects.log"
    effects = log.read_text().split() if log.exists() else []
    counts["twice"] = len(effects) - len(set(effects))
    called = " ".join(s.action.input for s in final if s.action is not None)
    counts["unaccounted"] = sum(1 for token in set(effects) if token not in called)
    return counts


def battery(random_kills: int, *, workers: int = 2, seed: int = 13) -> dict[str, int]:
    """Every deterministic kill point of every scenario, plus ``random_kills`` timed ones.

    The points are shared among ``workers`` forked processes (every ``workers``-th point).
    """
    keys = ("kill_points", "lost", "twice", "invalid", "unaccounted", "unfinished")
    totals = dict.fromkeys(keys, 0)
    with tempfile.TemporaryDirectory(prefix="sp4rk-kill9-") as tmp:
        pids = []
        for worker in range(workers):
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    part = _share(Path(tmp) / f"w{worker}", worker, workers, random_kills, seed)
                    (Path(tmp) / f"w{worker}.json").write_text(json.dumps(part))
                except BaseException:
                    code = 1
                os._exit(code)
            pids.append(pid)
        for worker, pid in enumerate(pids):
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError(f"battery worker {worker} failed")
            part = json.loads((Path(tmp) / f"w{worker}.json").read_text())
            for key in keys:
                totals[key] += part[key]
    return totals


def _share(root: Path, worker: int, workers: int, random_kills: int, seed: int) -> dict[str, int]:
    """One worker's points: kill points ``worker + 1``, ``worker + 1 + workers``, ..."""
    totals = dict.fromkeys(
        ("kill_points", "lost", "twice", "invalid", "unaccounted", "unfinished"), 0
    )
    n = 0

    def add(counts: dict[str, int] | None) -> bool:
        if counts is None:
            return False
        totals["kill_points"] += 1
        for key, value in counts.items():
            totals[key] += value
        return True

    for scenario in SCENARIOS:
        kill_at = worker + 1
        while True:
            n += 1
            if not add(one_point(root / str(n), scenario, kill_at=kill_at)):
                break
            kill_at += workers
    rng = random.Random(seed + worker)
    for _ in range(worker, random_kills, workers):
        n += 1
        scenario = rng.choice(sorted(SCENARIOS))
        add(one_point(root / str(n), scenario, kill_after=rng.uniform(0.05, 0.6)))
    return totals


def report(totals: dict[str, int]) -> str:
    return (
        f"kill -9 battery: {totals['kill_points']} kill points · "
        f"lost completed steps {totals['lost']} · mutating calls run twice {totals['twice']} · "
        f"invalid prompts after resume {totals['invalid']} · "
        f"unaccounted effects {totals['unaccounted']} · unfinished resumes {totals['unfinished']}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-kills", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    options = parser.parse_args()
    result = battery(options.random_kills, workers=options.workers)
    print(json.dumps(result) if options.json else report(result))
    sys.exit(0)
