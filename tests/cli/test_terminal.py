"""The real ``sp4rk`` command in a pseudo-terminal: approve, deny, edit, the step limit and
breaker questions, Ctrl-C (pause, then stop at once), typed messages, and resume."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import SP4RK, call, command_env, done, reply, write_script
from tests.cli.pty_terminal import Terminal

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs a POSIX pseudo-terminal")


class Session:
    """A workspace, a store and a script, and ``sp4rk`` started on a terminal for them."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir()
        self.store = tmp_path / "runs.db"
        self.env = command_env()

    def start(self, replies: list[dict[str, Any]], *args: str) -> Terminal:
        script = write_script(self.tmp / "script.json", replies)
        argv = [
            *SP4RK,
            "run",
            "the task",
            "-w",
            str(self.workspace),
            "--model",
            f"scripted:{script}",
            "--store",
            str(self.store),
            *args,
        ]
        return Terminal(argv, self.env, str(self.tmp))

    def resume(self, *args: str) -> Terminal:
        argv = [*SP4RK, "resume", "last", "--store", str(self.store), *args]
        return Terminal(argv, self.env, str(self.tmp))

    def shown(self) -> dict[str, Any]:
        out = subprocess.run(
            [*SP4RK, "show", "last", "--json", "--store", str(self.store)],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    def fifo(self, name: str = "gate") -> Path:
        """A named pipe in the workspace: ``cat`` on it blocks until the test writes."""
        path = self.workspace / f"{name}.fifo"
        os.mkfifo(path)
        return path


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Session(tmp_path)


WRITE = reply(call("write_file", path="notes.txt", content="hello"), content="Writing notes.")


def test_approving_a_call_at_the_prompt_runs_it(session: Session) -> None:
    term = session.start([WRITE, *done()])
    term.expect(r"write_file needs your approval: .*confirmation")
    term.expect(r"\[y\] approve  \[n\] deny  \[e\] edit")
    term.send("y\r")
    term.expect(r"write_file approved \(you\)")
    assert term.wait() == 0
    assert (session.workspace / "notes.txt").read_text() == "hello"


def test_denying_a_call_tells_the_model_why(session: Session) -> None:
    term = session.start([WRITE, *done()])
    term.expect(r"\[y\] approve")
    term.send("n\r")
    term.expect(r"reason for the model")
    term.send("not in this repository\r")
    assert term.wait() == 0
    assert not (session.workspace / "notes.txt").exists()
    observation = session.shown()["steps"][0]["observation"]
    assert "not in this repository" in observation


def test_editing_the_arguments_runs_the_edited_call(session: Session) -> None:
    term = session.start([WRITE, *done()])
    term.expect(r"\[e\] edit the arguments")
    term.send("e\r")
    term.expect(r"new arguments as one line of JSON")
    term.send("not json\r")
    term.expect(r"not JSON")
    term.send('{"path": "other.txt", "content": "edited"}\r')
    term.expect(r"approved with edits")
    assert term.wait() == 0
    assert (session.workspace / "other.txt").read_text() == "edited"
    assert not (session.workspace / "notes.txt").exists()


def test_the_step_limit_and_a_breaker_ask_whether_to_go_on(session: Session) -> None:
    same = reply(call("glob", pattern="*.nothing"))
    replies = [
        reply(call("glob", pattern="*.a")),
        reply(call("glob", pattern="*.b")),
        reply(call("glob", pattern="*.c")),
        *[same] * 6,
        *done(),
    ]
    term = session.start(replies, "--max-steps", "2")
    term.expect(r"step budget of 2 steps is used up")
    term.expect(r"\[m\] allow 2 more steps")
    term.send("m\r")
    term.expect(r"step 3/4")
    term.expect(r"step budget of 4 steps is used up")
    term.send("a\r")
    term.expect(r"step 5/∞")
    term.expect(r"the repeat breaker stopped the run")
    term.send("s\r")
    assert term.wait() == 4
    assert session.shown()["run"]["exit_reason"] == "repeat_abort"


def test_ctrl_c_pauses_at_the_next_boundary_and_resume_finishes(session: Session) -> None:
    gate = session.fifo()
    replies = [
        reply(call("bash_exec", command=f"cat {gate.name}")),
        reply(call("glob", pattern="*.fifo")),
        *done("all done"),
    ]
    term = session.start(replies)
    term.expect(r"→ bash_exec")
    term.send("\x03")
    term.expect(r"pausing at the next step boundary")
    with gate.open("w") as f:  # the command finishes; the run pauses before the next step
        f.write("released\n")
    term.expect(r"paused \(paused\)")
    term.expect(r"resume it with: sp4rk resume")
    assert term.wait() == 3
    steps = session.shown()["steps"]
    assert [s["action"]["name"] for s in steps] == ["bash_exec"]
    assert "released" in steps[0]["observation"]

    term = session.resume()
    term.expect(r"resuming")
    assert term.wait() == 0
    shown = session.shown()
    assert shown["run"]["status"] == "finished" and shown["run"]["output"] == "all done"
    assert [s["action"]["name"] for s in shown["steps"]][:2] == ["bash_exec", "glob"]


def test_a_second_ctrl_c_stops_at_once_and_the_cut_call_is_never_rerun(session: Session) -> None:
    gate = session.fifo()
    started = session.fifo("started")
    marker = session.workspace / "ran.txt"
    command = f"echo ran >> {marker.name}; echo started > {started.name}; cat {gate.name}"
    replies = [reply(call("bash_exec", command=command)), *done("finished anyway")]
    term = session.start(replies)
    term.expect(r"→ bash_exec")
    assert started.read_text() == "started\n"  # blocks until the command has had its effect
    term.send("\x03")
    term.expect(r"pausing at the next step boundary")
    term.send("\x03")
    term.expect(r"paused \(cancelled\)")
    assert term.wait() == 3
    assert marker.read_text() == "ran\n"
    assert session.shown()["in_flight"][0]["observation"].startswith("Interrupted")

    term = session.resume()
    assert term.wait() == 0
    steps = session.shown()["steps"]
    assert steps[0]["action"]["name"] == "bash_exec"
    assert steps[0]["observation"].startswith("Interrupted")  # outcome unknown, not re-run
    assert marker.read_text() == "ran\n"


def test_a_typed_line_is_delivered_to_the_model_at_the_next_boundary(session: Session) -> None:
    gate = session.fifo()
    replies = [reply(call("bash_exec", command=f"cat {gate.name}")), *done()]
    term = session.start(replies)
    term.expect(r"type a line to message the model")
    term.expect(r"→ bash_exec")
    term.send("please also check the docs\r")
    term.expect(r"queued for the next step: please also check the docs")
    with gate.open("w") as f:
        f.write("go\n")
    term.expect(r"delivered to the model: please also check the docs")
    assert term.wait() == 0
    users = [s["user_nudge"] for s in session.shown()["steps"] if s["nudge_kind"] == "user"]
    assert users == ["please also check the docs"]


def test_a_budget_limit_asks_in_its_own_unit_and_shows_the_spend(session: Session) -> None:
    globs = [reply(call("glob", pattern=f"*.{n}")) for n in "abc"]
    term = session.start([*globs, *done()], "--max-tool-calls", "1")
    term.expect(r"budget: 1 tool calls")
    term.expect(r"the tool-call budget is used up \(1 of 1\); spent so far: .*1 tool calls")
    term.expect(r"\[o\] allow one more tool call  \[m\] allow 1 more tool call  ")
    term.expect(r"\[a\] no tool-call limit for this run  \[s\] stop")
    term.send("o\r")
    term.expect(r"the tool-call budget: allow_once")
    term.expect(r"the tool-call budget is used up \(2 of 2\)")
    term.send("a\r")
    assert term.wait() == 0
    shown = session.shown()
    assert shown["run"]["status"] == "finished"
    assert shown["spent"]["granted"] == {"max_tool_calls": 1.0}
    assert shown["spent"]["lifted"] == ["max_tool_calls"]
