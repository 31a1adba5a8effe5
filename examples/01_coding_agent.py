"""A coding agent fixes a failing test: scripted model, real tools, a temporary workspace.

Run it with ``make demo`` (or ``python examples/01_coding_agent.py``). Nothing reaches the
network: the model is a ``ScriptedLLM`` replaying what a real model would do, and every tool
call runs for real against files in a temporary directory. Along the way the run shows:

- the built-in tools (glob, read_file, edit_file, bash_exec) confined to the workspace;
- a human approving the edit and the shell command (the HITL handler stands in for a prompt);
- read-only calls of one response running concurrently;
- the checklist gate, with feedback when two items are checked at once;
- verify-on-edit running the tests after the edit;
- a pause after three steps, a checkpoint on disk, and a resume with a fresh executor.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from sp4rk.agent import (
    Events,
    Executor,
    ExecutorResult,
    HITLHandler,
    HITLToolDecision,
    command_verify_runner,
    load_checkpoint,
    save_checkpoint,
)
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry, RunContext
from sp4rk.tools.builtins import register_builtins

SYSTEM = "You are a careful coding agent. Keep a checklist and verify your changes."
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}
TASK = "The tests in this repository fail. Find the bug in calc.py and fix it."

CALC = textwrap.dedent(
    """\
    def add(a, b):
        return a - b


    def mul(a, b):
        return a * b
    """
)
TESTS = textwrap.dedent(
    """\
    import unittest

    from calc import add, mul


    class CalcTest(unittest.TestCase):
        def test_add(self):
            self.assertEqual(add(2, 3), 5)

        def test_mul(self):
            self.assertEqual(mul(2, 3), 6)
    """
)


def checklist(*done: bool) -> tuple[str, dict[str, str]]:
    items = ["find the bug", "fix calc.add", "run the tests"]
    lines = [f"- [{'x' if d else ' '}] {item}" for item, d in zip(items, done, strict=True)]
    return ("update_checklist", {"todo_list": "\n".join(lines)})


# What a real model would answer at each step (thoughts included).
SCRIPT = [
    tool_calls_response(checklist(False, False, False), thought="Plan first."),
    tool_calls_response(
        ("glob", {"pattern": "*.py"}),
        ("read_file", {"path": "calc.py"}),
        thought="Look at the code and the tests together.",
    ),
    tool_calls_response(
        ("bash_exec", {"command": f"{sys.executable} -m unittest -q"}),
        thought="Confirm the failure.",
    ),
    tool_calls_response(checklist(True, False, False), thought="add() subtracts."),
    tool_calls_response(
        ("edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}),
        thought="Fix the operator.",
    ),
    tool_calls_response(checklist(True, True, True), thought="Tests pass after the edit."),
    finish_response("Fixed calc.add: it subtracted instead of adding. All tests pass."),
]


class Printer(Events):
    """Shows the run as it happens (an example may print; the library never does)."""

    def step_start(self, step_num: int) -> None:
        print(f"\n── step {step_num}")

    def thought(self, step_num: int, content: str, reasoning: str) -> None:
        if content:
            print(f"   thinks: {content}")

    def tool_call(self, step_num: int, call_idx: int, tool_name: str, args: str, src: str) -> None:
        print(f"   calls:  {tool_name} {args}")

    def tool_result(self, step_num: int, idx: int, length: int, preview: str, err: bool) -> None:
        first = preview.strip().splitlines()[0] if preview.strip() else "(no output)"
        print(f"   {'error' if err else 'result'}: {first[:90]}")
        for line in preview.splitlines():
            if line.startswith("[verify_on_edit]"):
                print(f"   {line}")

    def executor_diagnostic(self, step_num: int, event: str, details: dict[str, Any]) -> None:
        print(f"   · {event} {details}")


class ApproveChanges(HITLHandler):
    """Stands in for a human at a prompt: approves edits and commands, which need one."""

    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        if tool_name in ("bash_exec", "edit_file", "write_file"):
            print(f"   human:  approved {tool_name}")
            return HITLToolDecision(allow=True)
        return None


def build_executor(llm: ScriptedLLM, registry: Registry, workspace: Path, **kw: Any) -> Executor:
    executor = Executor(
        llm, registry, 20, events=Printer(), hitl=ApproveChanges(), parallel_tool_calls=True, **kw
    )
    # No .pyc files: an edit within the same second could otherwise run stale bytecode.
    env = {**os.environ, **NO_BYTECODE}
    executor.set_verify_on_edit(
        command_verify_runner(
            [sys.executable, "-m", "unittest", "-q"], cwd=workspace, timeout=60, env=env
        )
    )
    return executor


async def main() -> ExecutorResult:
    with tempfile.TemporaryDirectory(prefix="sp4rk-demo-") as tmp:
        workspace = Path(tmp)
        (workspace / "calc.py").write_text(CALC)
        (workspace / "test_calc.py").write_text(TESTS)
        registry = Registry()
        register_builtins(registry, workspace, shell_env=NO_BYTECODE)
        ctx = RunContext(workspace=workspace)
        llm = ScriptedLLM(SCRIPT)

        boundaries = 0

        def pause_after_three(ctx: RunContext) -> bool:
            nonlocal boundaries
            boundaries += 1
            return boundaries == 4

        print(f"workspace: {workspace}\ntask: {TASK}")
        first = build_executor(llm, registry, workspace, pause_checker=pause_after_three)
        window = ContextWindow(system_prompt=SYSTEM, task=TASK)
        result = await first.run(registry.list(), window, ctx)
        assert result.paused, result

        checkpoint = workspace / ".sp4rk-checkpoint.json"
        save_checkpoint(checkpoint, result)  # the steps and the run's state
        print(
            f"\n⏸  paused after {result.model_responses} model responses "
            f"({len(result.steps)} trajectory entries); checkpoint saved to {checkpoint.name}"
        )

        steps = load_checkpoint(checkpoint)  # a list of steps that carries the state
        window = ContextWindow(system_prompt=SYSTEM, task=TASK)
        window.seed_steps(steps)
        second = build_executor(llm, registry, workspace, resume_steps=steps)
        print("▶  resumed with a fresh executor")
        result = await second.run(registry.list(), window, ctx)
        llm.assert_complete()

        print("\n══ trajectory")
        for i, step in enumerate(result.steps, 1):
            what = step.action.name if step.action else "(nudge)"
            note = step.user_nudge.splitlines()[0][:60] if step.user_nudge else ""
            print(f"{i:>3}. group {step.response_group:<2} {what:<17} {note}")
        print(f"\nfinished={result.finished} exit={result.exit_reason.value}")
        print(f"answer: {result.output.splitlines()[0]}")
        print("calc.py now reads:\n" + textwrap.indent((workspace / "calc.py").read_text(), "   "))
        return result


if __name__ == "__main__":
    outcome = asyncio.run(main())
    raise SystemExit(0 if outcome.finished else 1)
