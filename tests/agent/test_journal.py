"""The run journal: boundaries, responses and call starts reach it in order; a crash mid-response
can be closed without re-running a call and with a valid history."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from sp4rk.agent import Executor, RunState, Step
from sp4rk.agent.journal import interrupted_steps
from sp4rk.llm import ChatResponse, ToolCall
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow, validate_history
from sp4rk.tools import Registry, tool


class Journal:
    """What a durable store keeps; after ``dead`` is set (a kill -9), nothing more arrives."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []
        self.committed: list[Step] = []
        self.recorded: list[Step] = []
        self.state: RunState | None = None
        self.dead = False

    def on_boundary(self, new_steps: Sequence[Step], state: RunState) -> None:
        if self.dead:
            return
        self.committed.extend(new_steps)
        self.recorded = []
        self.state = RunState.from_dict(state.to_dict())  # what a store would persist
        self.log.append(("boundary", len(new_steps)))

    def on_response(self, step: int, response: ChatResponse) -> None:
        if not self.dead:
            self.log.append(("response", step))
            self.response = response

    def on_call_start(self, step: int, call: ToolCall) -> None:
        if not self.dead:
            self.log.append(("start", call.id))

    def on_call_step(self, step: int, recorded: Step) -> None:
        assert recorded.action is not None
        if not self.dead:
            self.recorded.append(recorded)
            self.log.append(("step", recorded.action.id))


def appending_tools(
    effects: list[str], crash_on: str = "", journal: Journal | None = None
) -> Registry:
    @tool
    async def append(line: str) -> str:
        """Append a line to the log file."""
        effects.append(line)
        if line == crash_on:
            assert journal is not None
            journal.dead = True  # the process dies mid-call, after the call's effect
            raise asyncio.CancelledError
        return f"appended {line}"

    return Registry([append])


def calls(*lines: str) -> ChatResponse:
    response = tool_calls_response(*[("append", {"line": x}) for x in lines])
    for i, call in enumerate(response.message.tool_calls):
        call.id = f"call-{lines[0]}-{i}"
    return response


def test_the_journal_sees_boundaries_responses_and_calls_in_order() -> None:
    journal = Journal()
    tools = appending_tools([])
    executor = Executor(ScriptedLLM([calls("a", "b"), finish_response("done")]), tools, 5)
    executor.set_journal(journal)
    result = executor.run_sync(tools.list(), ContextWindow())
    assert journal.log == [
        ("boundary", 0),
        ("response", 1),
        ("start", "call-a-0"),
        ("step", "call-a-0"),
        ("start", "call-a-1"),
        ("step", "call-a-1"),
        ("boundary", 2),
        ("response", 2),
        ("boundary", 1),  # the run's end: the finish step
    ]
    assert [s.to_dict() for s in journal.committed] == [s.to_dict() for s in result.steps]
    assert journal.state is not None and journal.state.iteration == 1


def test_a_crash_mid_response_never_repeats_a_call_and_keeps_the_history_valid() -> None:
    effects: list[str] = []
    journal = Journal()
    tools = appending_tools(effects, crash_on="b", journal=journal)
    first = Executor(ScriptedLLM([calls("x"), calls("a", "b", "c")]), tools, 10)
    first.set_journal(journal)
    with pytest.raises(asyncio.CancelledError):
        first.run_sync(tools.list(), ContextWindow())
    assert effects == ["x", "a", "b"]

    # What a store rebuilds: committed steps, then the cut response closed honestly.
    started = [c for kind, c in journal.log if kind == "start"]
    assert journal.state is not None
    group = journal.state.response_groups + 1
    closing = interrupted_steps(journal.response, group, journal.recorded, started)
    steps = [*journal.committed, *closing]
    assert [s.observation.split(":")[0] for s in closing] == [
        "appended a",
        "Interrupted",
        "Not executed",
    ]
    state = journal.state
    state.iteration += 1  # the cut response used an iteration
    state.response_groups += 1

    window = ContextWindow()
    window.seed_steps(steps)
    validate_history(window.build_prompt())
    llm = ScriptedLLM([finish_response("done")])
    resumed = Executor(llm, tools, 10, resume_steps=steps, resume_state=state)
    result = resumed.run_sync(tools.list(), window)
    assert result.finished and effects == ["x", "a", "b"]  # nothing ran twice
    validate_history(llm.requests[0].messages)
