"""CompositeEvents: several sinks per run; a failing sink breaks neither the others nor the run."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sp4rk.agent import (
    CompositeEvents,
    Events,
    Executor,
    RecordingEvents,
    SubAgentTask,
    run_sub_agent,
)
from sp4rk.agent._loop.emit import EventProxy
from sp4rk.agent.events import EVENT_NAMES, check_events
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow

from .helpers import echo_tools, run

SCRIPT = [tool_calls_response(("search", {"q": "a"})), finish_response("done")]


class Broken(Events):
    def step_start(self, step_num: int) -> None:
        raise RuntimeError("display gone")

    def tool_call_end(self, step_num: int, call_idx: int, call: Any) -> None:
        raise RuntimeError("exporter gone")


def test_every_sink_gets_every_event_and_a_failing_one_breaks_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second, alone = RecordingEvents(), RecordingEvents(), RecordingEvents()
    with caplog.at_level(logging.ERROR, logger="sp4rk.agent"):
        result, _, _ = run(SCRIPT, events=CompositeEvents(first, Broken(), second))  # type: ignore[arg-type]
    run(SCRIPT, events=alone)
    assert result.finished and result.output == "done"
    for sink in (first, second):
        assert sink.names() == alone.names()
    assert "run_start" in alone.names() and "tool_call_end" in alone.names()
    failures = [r.getMessage() for r in caplog.records]
    assert len(failures) == 4  # two steps, two calls: each failure logged, none fatal
    assert all("raised in" in m for m in failures)


def test_only_the_callbacks_some_sink_overrides_are_fired() -> None:
    class Steps(Events):
        def step_start(self, step_num: int) -> None:
            pass

    composite = CompositeEvents(Steps(), Events())
    assert composite.listening == {"step_start"}
    proxy = EventProxy(composite, logging.getLogger("test"))
    assert proxy.listens("step_start") and not proxy.listens("tool_call_end")
    assert not any(EventProxy(Events(), logging.getLogger("test")).listens(n) for n in EVENT_NAMES)
    nested = CompositeEvents(composite, RecordingEvents())
    assert nested.listening == set(EVENT_NAMES)


async def test_sub_agent_events_reach_every_sink() -> None:
    first, second = RecordingEvents(), RecordingEvents()
    tools = echo_tools()
    task = SubAgentTask(
        "s1",
        Executor(ScriptedLLM([finish_response("ok")]), tools, 3),
        ContextWindow(),
        tools.list(),
        "do it",
        events=CompositeEvents(first, second),
    )
    await run_sub_agent(task)
    for sink in (first, second):
        assert sink.names() == ["sub_agent_launch", "sub_agent_complete"]


def test_a_sink_the_executor_could_not_call_is_refused_when_composed() -> None:
    class Async(Events):
        async def step_start(self, step_num: int) -> None:  # type: ignore[override]
            pass

    with pytest.raises(TypeError, match=r"Async.step_start must be a plain def"):
        CompositeEvents(RecordingEvents(), Async())
    with pytest.raises(TypeError, match=r"object has no step_start\(\)"):
        CompositeEvents(object())  # type: ignore[arg-type]


def test_a_duck_typed_sink_of_the_reference_callbacks_still_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Old:
        """The thirteen reference callbacks, without subclassing Events (sp4rk 0.1 style)."""

        def __init__(self) -> None:
            self.seen: list[str] = []

    for name in EVENT_NAMES[:13]:
        setattr(Old, name, lambda self, *args, _n=name: self.seen.append(_n))
    sink = Old()
    check_events(sink)
    with caplog.at_level(logging.ERROR, logger="sp4rk.agent"):
        result, _, _ = run(SCRIPT, events=sink)  # type: ignore[arg-type]
    assert result.finished and "tool_result" in sink.seen  # type: ignore[attr-defined]
    assert caplog.records == []  # the newer callbacks are skipped, not called and failed
