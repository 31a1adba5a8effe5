"""Pause, resume, live user messages and resume interjections."""

from __future__ import annotations

from typing import Any

import pytest

from sp4rk.agent import (
    CheckpointError,
    CircuitBreakerConfig,
    Executor,
    ExitReason,
    HITLHandler,
    ListTrajectoryStore,
    RecordingEvents,
    Step,
    StepLimitResponse,
    load_checkpoint,
    save_checkpoint,
)
from sp4rk.llm import ChatRequest, ChatResponse, ContextWindowExceededError, ToolCall
from sp4rk.llm.testing import (
    FunctionLLM,
    ScriptedLLM,
    finish_response,
    text_response,
    tool_calls_response,
)
from sp4rk.memory import ContextWindow
from sp4rk.tools import RunContext

from .helpers import InterjectingContext, echo_tools, run

FINISH_AT = 21  # responses before the first finish attempt
MAX_STEPS = 25


def deterministic_model(request: ChatRequest) -> ChatResponse:
    """Decides from the prompt alone, so an interrupted run can be replayed exactly."""
    done = sum(1 for m in request.messages if m.role == "assistant")
    if done >= FINISH_AT:
        return finish_response(f"finished after {done}")
    if done == 3:
        return text_response("I think I am done")  # nudged: there is work left
    if done % 5 == 4:  # every fifth response calls two tools at once
        response = tool_calls_response(
            ("search", {"q": f"a{done}"}), ("read_file", {"path": f"p{done}"}), thought=f"t{done}"
        )
    else:
        response = tool_calls_response(("search", {"q": f"q{done}"}), thought=f"t{done}")
    for i, call in enumerate(response.message.tool_calls):
        call.id = f"c{done}_{i}"
    return response


def guard(ctx: RunContext) -> str:
    return "the report is not written yet"


def run_to_end(pause_at: int | None) -> tuple[list[Step], list[list[dict[str, Any]]]]:
    """Run the task, pausing once at boundary ``pause_at`` and resuming on a new executor."""
    tools = echo_tools()
    llm = FunctionLLM(deterministic_model)
    checks = 0

    def pause(ctx: RunContext) -> bool:
        nonlocal checks
        checks += 1
        return checks == pause_at

    executor = Executor(llm, tools, MAX_STEPS, pause_checker=pause)
    executor.set_finish_guard(guard)
    result = executor.run_sync(tools.list(), ContextWindow(task="t"))
    assert result.paused is (pause_at is not None)
    if result.paused:
        assert result.exit_reason is ExitReason.PAUSED and not result.finished
        assert result.output == ""
        checkpoint = [Step.from_dict(s.to_dict()) for s in result.steps]  # through JSON types
        window = ContextWindow(task="t")
        window.seed_steps(checkpoint)
        resumed = Executor(llm, tools, MAX_STEPS, resume_steps=checkpoint)
        resumed.set_finish_guard(guard)
        result = resumed.run_sync(tools.list(), window)
    assert result.finished
    return result.steps, [[m.to_dict() for m in r.messages] for r in llm.requests]


def test_pause_then_resume_at_every_boundary_gives_the_same_trajectory() -> None:
    baseline, base_prompts = run_to_end(None)
    nudge_texts = [s.user_nudge for s in baseline if s.user_nudge]
    # the scenario exercises a text-reply nudge, the wrap-up nudge and a guard rejection
    assert any("`finish`" in n for n in nudge_texts)
    assert any(n.startswith("Only") for n in nudge_texts)
    assert any("not written yet" in s.observation for s in baseline)
    boundaries = len(base_prompts)
    for boundary in range(1, boundaries + 1):
        steps, prompts = run_to_end(boundary)
        assert [s.to_dict() for s in steps] == [s.to_dict() for s in baseline], boundary
        assert prompts == base_prompts, boundary


def test_pause_at_the_first_boundary_makes_no_call() -> None:
    tools = echo_tools()
    llm = ScriptedLLM([])
    result = Executor(llm, tools, 5, pause_checker=lambda ctx: True).run_sync(
        tools.list(), ContextWindow()
    )
    assert result.paused and result.steps == [] and llm.requests == []


def test_pause_leaves_the_live_message_queue_alone() -> None:
    queue = ["use approach B"]
    checks: list[int] = []

    def pause(ctx: RunContext) -> bool:
        checks.append(1)
        return len(checks) == 2

    result, _, _ = run(
        [tool_calls_response(("search", {"q": "a"}))],
        pause_checker=pause,
        user_message_source=lambda ctx: "" if len(checks) < 2 else queue.pop(),
    )
    assert result.paused and queue == ["use approach B"]
    assert [s.tool_name for s in result.steps] == ["search"]


def test_resumed_steps_count_against_the_budget_and_numbering_continues() -> None:
    seed = [  # an older checkpoint without response groups: two model steps, one boundary nudge
        Step(action=ToolCall("a", "search", '{"q": "0"}'), observation="r0"),
        Step(user_nudge="a live message"),
        Step(thought="x", user_nudge="again"),
    ]
    events = RecordingEvents()
    tools = echo_tools()
    store = ListTrajectoryStore()
    llm = ScriptedLLM([tool_calls_response(("search", {"q": str(i)})) for i in range(10)])
    executor = Executor(llm, tools, 5, resume_steps=seed, events=events)
    window = ContextWindow()
    window.seed_steps(seed)
    result = executor.run_sync(tools.list(), window, RunContext(trajectory_store=store))
    assert events.of("step_start")[0] == (3,)
    assert len(llm.requests) == 3  # 5 - 2 resumed iterations
    assert result.steps[:3] == seed and store.steps() == result.steps


def test_live_message_becomes_the_last_user_message_of_that_request() -> None:
    polls = iter(["", "  use approach B  ", "\u200b \n", ""])
    result, llm, events = run(
        [
            tool_calls_response(("search", {"q": "a"})),
            tool_calls_response(("search", {"q": "b"})),
            finish_response("x"),
        ],
        user_message_source=lambda ctx: next(polls, ""),
    )
    live = [s for s in result.steps if s.user_nudge == "  use approach B  "]
    assert len(live) == 1 and live[0].action is None
    assert llm.requests[1].messages[-1].content.strip() == "use approach B"
    assert all("approach B" not in m.content for m in llm.requests[0].messages)
    assert events.diagnostics("live_user_message") == [{"length": 18}]
    assert sum(1 for s in result.steps if s.action is None) == 1  # invisible message ignored


async def test_async_pause_checker_and_message_source_are_awaited() -> None:
    async def source(ctx: RunContext) -> str:
        return "hello"

    async def pause(ctx: RunContext) -> bool:
        return False

    tools = echo_tools()
    executor = Executor(
        ScriptedLLM([finish_response("x")]),
        tools,
        5,
        pause_checker=pause,
        user_message_source=source,
    )
    result = await executor.run(tools.list(), ContextWindow())
    assert result.steps[0].user_nudge == "hello"


def test_a_raising_pause_checker_propagates_after_saving_the_trajectory() -> None:
    store = ListTrajectoryStore()
    checks: list[int] = []

    def pause(ctx: RunContext) -> bool:
        checks.append(1)
        if len(checks) == 2:
            raise OSError("flag file unreadable")
        return False

    tools = echo_tools()
    llm = ScriptedLLM([tool_calls_response(("search", {"q": "a"}))])
    executor = Executor(llm, tools, 5, pause_checker=pause)
    with pytest.raises(OSError, match="flag file"):
        executor.run_sync(tools.list(), ContextWindow(), RunContext(trajectory_store=store))
    assert [s.tool_name for s in store.steps()] == ["search"]
    assert [s.tool_name for s in executor.last_steps] == ["search"]


def test_interjection_survives_a_reactive_compaction_retry_and_is_consumed_once() -> None:
    cw = InterjectingContext(interjection="resume: focus on tests")
    llm_script: list[Any] = [
        ContextWindowExceededError("context_length_exceeded"),
        tool_calls_response(("search", {"q": "a"})),
        finish_response("x"),
    ]
    result, llm, events = run(llm_script, cw=cw)
    assert cw.consumed == 1 and cw.compactions == 1
    assert llm.requests[0].messages[-1].content == "resume: focus on tests"
    assert llm.requests[1].messages[-1].content == "resume: focus on tests"  # retried prompt
    assert all(m.content != "resume: focus on tests" for m in llm.requests[2].messages)
    assert events.of("step_start")[:2] == [(1,), (2,)]  # the retry stayed inside step 1
    assert events.diagnostics("reactive_compaction_api_error")[0]["attempt"] == 1
    assert result.finished


def test_third_overflow_in_one_step_raises() -> None:
    overflow = ContextWindowExceededError("too long")
    with pytest.raises(ContextWindowExceededError):
        run([overflow, overflow, overflow, finish_response("x")], cw=InterjectingContext())


def test_overflow_with_nothing_to_compact_raises_at_once() -> None:
    cw = InterjectingContext(compact_result=None)
    with pytest.raises(ContextWindowExceededError):
        run([ContextWindowExceededError("too long"), finish_response("x")], cw=cw)
    assert cw.compactions == 1


def test_checkpoint_round_trips_and_refuses_newer_versions(tmp_path: Any) -> None:
    result, _, _ = run(
        [
            tool_calls_response(("search", {"q": "a"}), ("read_file", {"path": "b"}), thought="t"),
            finish_response("x"),
        ]
    )
    path = tmp_path / "run.json"
    save_checkpoint(path, result.steps)
    assert load_checkpoint(path) == result.steps
    path.write_text('{"schema_version": 99, "steps": []}')
    with pytest.raises(CheckpointError, match="newer"):
        load_checkpoint(path)
    path.write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(path)
    path.write_text('{"schema_version": 1, "steps": [{"action": 5}]}')
    with pytest.raises(CheckpointError, match="malformed"):
        load_checkpoint(path)


class Reprieves(HITLHandler):
    """Answers by reason alone, so a fresh handler after a resume behaves the same."""

    async def on_step_limit(
        self, ctx: RunContext, current_step: int, max_steps: int, reason: str
    ) -> StepLimitResponse:
        return {
            "": StepLimitResponse.ALLOW_MORE,
            "repeat": StepLimitResponse.ALLOW_ALWAYS,
            "fruitless": StepLimitResponse.ALLOW_ONCE,
        }[reason]


BREAKERS = CircuitBreakerConfig(
    repeat_nudge_threshold=3,
    repeat_abort_threshold=5,
    fruitless_nudge_threshold=2,
    fruitless_abort_threshold=4,
    same_tool_repeat_nudge_threshold=0,
    same_tool_repeat_abort_threshold=0,
)


def breaker_model(request: ChatRequest) -> ChatResponse:
    """Repeats a call past the repeat abort, then finds nothing past the fruitless abort."""
    done = sum(1 for m in request.messages if m.role == "assistant")
    if done >= 18:
        return finish_response("done")
    if done <= 5:
        response = tool_calls_response(("search", {"q": "same"}))
    elif done <= 10:
        response = tool_calls_response(("empty", {"q": str(done)}))
    else:
        response = tool_calls_response(("search", {"q": str(done)}))
    response.message.tool_calls[0].id = f"c{done}"
    return response


def breaker_run(pause_at: int | None) -> tuple[list[Step], int]:
    tools = echo_tools()
    llm = FunctionLLM(breaker_model)
    checks = 0

    def pause(ctx: RunContext) -> bool:
        nonlocal checks
        checks += 1
        return checks == pause_at

    def build(**kw: Any) -> Executor:
        return Executor(llm, tools, 14, hitl=Reprieves(), circuit_breaker=BREAKERS, **kw)

    result = build(pause_checker=pause).run_sync(tools.list(), ContextWindow(task="t"))
    if result.paused:
        window = ContextWindow(task="t")
        window.seed_steps(result.steps)
        result = build(resume_steps=result.steps, resume_state=result.state).run_sync(
            tools.list(), window
        )
    assert result.finished
    return result.steps, len(llm.requests)


def test_resume_keeps_breaker_counts_reprieves_and_granted_budget() -> None:
    baseline, calls = breaker_run(None)
    nudge_texts = [s.user_nudge for s in baseline if s.user_nudge]
    assert any("switched off the repeat safeguard" in n for n in nudge_texts)
    assert any("fruitless safeguard tripped" in n for n in nudge_texts)
    assert any("granted 14 more steps" in n for n in nudge_texts)
    for boundary in range(1, calls + 1):
        steps, _ = breaker_run(boundary)
        assert [s.to_dict() for s in steps] == [s.to_dict() for s in baseline], boundary
