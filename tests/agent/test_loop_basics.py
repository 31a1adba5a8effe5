"""The loop's basic contract: finishing, tool definitions, steps, groups, events, errors."""

from __future__ import annotations

import asyncio
import json

import pytest

from sp4rk.agent import Executor, ExitReason, HITLHandler, RecordingEvents, StepLimitResponse
from sp4rk.agent.events import EVENT_NAMES
from sp4rk.llm import ChatResponse, LLMError, Message, TokenUsage, ToolCall
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry, RunContext, ToolDescriptor, ToolResult, tool

from .helpers import FakeContext, RawTool, actions, echo_tools, run


def test_finish_ends_the_run_with_its_answer() -> None:
    cw = FakeContext()
    result, llm, _ = run([finish_response("42")], cw=cw)
    assert result.finished and result.output == "42"
    assert result.exit_reason is ExitReason.FINISHED and not result.paused
    assert len(result.steps) == 1 and result.steps[0].action is not None
    assert result.steps[0].action.name == "finish" and result.steps[0].observation == ""
    assert len(llm.requests) == 1
    assert cw.steps == []  # the finish step is not sent to the context manager


def test_request_offers_tools_then_result_reader_then_finish_last() -> None:
    tools = echo_tools()
    descriptors = [
        *tools.list(),
        ToolDescriptor("search", "dup", {"type": "object"}),  # duplicate name: first wins
        ToolDescriptor(
            "remote", "from a server", {"type": "object"}, source="srv", source_category="mcp"
        ),
    ]
    llm = ScriptedLLM([finish_response("done")])
    Executor(llm, tools, 5).run_sync(descriptors, FakeContext())
    names = [d.name for d in llm.requests[0].tools]
    assert names[-1] == "finish" and names.count("finish") == 1
    assert names[-2] == "tool_result_read"
    assert names.count("search") == 1
    by_name = {d.name: d for d in llm.requests[0].tools}
    assert by_name["search"].description == "Search for q."
    assert by_name["remote"].description == "[MCP] from a server"


def test_a_finish_tool_in_the_task_tools_is_not_added_twice() -> None:
    tools = echo_tools()
    descriptors = [*tools.list(), ToolDescriptor("finish", "mine", {"type": "object"})]
    llm = ScriptedLLM([finish_response("x")])
    Executor(llm, tools, 5).run_sync(descriptors, FakeContext())
    assert [d.name for d in llm.requests[0].tools].count("finish") == 1


def test_request_carries_output_limit_effort_and_purpose() -> None:
    llm = ScriptedLLM([finish_response("x")])
    executor = Executor(llm, echo_tools(), 5)
    executor.set_reasoning_effort("high")
    executor.run_sync([], FakeContext(limit=8192))
    request = llm.requests[0]
    assert request.max_tokens == 8192
    assert request.reasoning_effort == "high"
    assert request.call_purpose == "executor"


def test_tool_step_then_finish_records_the_observation() -> None:
    result, _, _ = run(
        [tool_calls_response(("read_file", {"path": "a.txt"})), finish_response("done")]
    )
    assert actions(result) == ["read_file", "finish"]
    assert result.steps[0].observation.startswith("contents of a.txt")


def test_calls_of_one_response_share_a_group_and_the_thought() -> None:
    calls: list[tuple[str, str]] = []
    result, _, _ = run(
        [
            tool_calls_response(
                ("search", {"q": "a"}),
                ("search", {"q": "b"}),
                ("read_file", {"path": "c"}),
                thought="three at once",
            ),
            tool_calls_response(("search", {"q": "single"})),
            finish_response("done"),
        ],
        tools=echo_tools(calls),
    )
    assert calls == [("search", "a"), ("search", "b"), ("read_file", "c"), ("search", "single")]
    first_three = result.steps[:3]
    assert {s.response_group for s in first_three} == {1}
    assert [s.thought for s in first_three] == ["three at once", "", ""]
    assert result.steps[3].response_group == 2  # every response gets its own group


def test_group_numbers_continue_across_runs_of_one_executor() -> None:
    script = [
        tool_calls_response(("search", {"q": "a"}), ("search", {"q": "b"})),
        tool_calls_response(("search", {"q": "c"}), ("search", {"q": "d"})),
        finish_response("x"),
    ]
    tools = echo_tools()
    executor = Executor(ScriptedLLM(script * 2), tools, 10)
    first = executor.run_sync(tools.list(), ContextWindow())
    second = executor.run_sync(tools.list(), ContextWindow())
    assert [s.response_group for s in first.steps] == [1, 1, 2, 2, 3]
    assert [s.response_group for s in second.steps] == [4, 4, 5, 5, 6]


def test_finish_in_the_middle_of_a_response_ends_it() -> None:
    calls: list[tuple[str, str]] = []
    result, _, _ = run(
        [
            tool_calls_response(
                ("read_file", {"path": "a"}),
                ("finish", {"answer": "A"}),
                ("search", {"q": "never"}),
            )
        ],
        tools=echo_tools(calls),
    )
    assert result.finished and result.output == "A"
    assert calls == [("read_file", "a")]


def test_empty_tool_output_becomes_no_output() -> None:
    result, _, _ = run([tool_calls_response(("empty", {"q": "x"})), finish_response("d")])
    assert result.steps[0].observation == "(no output)"


def test_unknown_tool_is_an_error_observation_and_the_run_goes_on() -> None:
    result, _, _ = run([tool_calls_response(("ghost_tool", {})), finish_response("d")])
    step = result.steps[0]
    assert step.is_error and step.observation.startswith("tool not found: ghost_tool")
    assert "search" in step.observation  # lists what is available
    assert result.finished


def test_malformed_json_arguments_are_a_parse_error_observation() -> None:
    result, _, _ = run([tool_calls_response(("search", '{"q": ')), finish_response("d")])
    step = result.steps[0]
    assert step.is_error and step.observation.startswith("failed to parse input: invalid JSON")
    assert result.finished


async def _boom(ctx: RunContext, input: str) -> ToolResult:
    raise RuntimeError("disk on fire")


async def _wrong_type(ctx: RunContext, input: str) -> ToolResult:
    return "not a ToolResult"  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (_boom, "RuntimeError: disk on fire"),
        (_wrong_type, "returned a str instead of a ToolResult"),
    ],
)
def test_tool_failures_become_error_observations(fn: object, expected: str) -> None:
    tools = Registry([RawTool("flaky", fn)])  # type: ignore[arg-type]
    result, _, _ = run([tool_calls_response(("flaky", {})), finish_response("d")], tools=tools)
    assert result.steps[0].is_error and expected in result.steps[0].observation
    assert result.finished


def test_an_exception_from_the_tool_executor_itself_becomes_an_observation() -> None:
    class BrokenExecutor(Registry):
        async def execute(self, ctx: RunContext, name: str, input: str) -> ToolResult:
            raise OSError("registry backend down")

    tools = BrokenExecutor(echo_tools().get(n) for n in ["search"])  # type: ignore[misc]
    result, _, _ = run(
        [tool_calls_response(("search", {"q": "x"})), finish_response("d")], tools=tools
    )
    assert result.steps[0].observation == "OSError: registry backend down"
    assert result.finished


def test_llm_errors_propagate_and_keep_the_steps_so_far() -> None:
    tools = echo_tools()
    llm = ScriptedLLM([tool_calls_response(("search", {"q": "a"})), LLMError("provider down")])
    executor = Executor(llm, tools, 10)
    with pytest.raises(LLMError, match="provider down"):
        executor.run_sync(tools.list(), ContextWindow())
    assert [s.tool_name for s in executor.last_steps] == ["search"]


def test_step_budget_with_the_default_handler_stops_unfinished() -> None:
    script = [tool_calls_response(("search", {"q": str(i)})) for i in range(5)]
    result, llm, _ = run(script, max_steps=3)
    assert len(llm.requests) == 3
    assert not result.finished and result.exit_reason is ExitReason.STEP_LIMIT
    assert "step budget" in result.output


class LimitAnswers(HITLHandler):
    def __init__(self, *answers: StepLimitResponse) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[int, int, str]] = []

    async def on_step_limit(
        self, ctx: RunContext, current_step: int, max_steps: int, reason: str
    ) -> StepLimitResponse:
        self.calls.append((current_step, max_steps, reason))
        return self.answers.pop(0)


def test_step_limit_is_asked_at_the_boundary() -> None:
    hitl = LimitAnswers(StepLimitResponse.DENY)
    script = [tool_calls_response(("search", {"q": str(i)})) for i in range(5)]
    run(script, max_steps=2, hitl=hitl)
    assert hitl.calls == [(3, 2, "")]


def test_allow_once_grants_one_step_with_a_wrap_up_nudge() -> None:
    hitl = LimitAnswers(StepLimitResponse.ALLOW_ONCE, StepLimitResponse.DENY)
    script = [tool_calls_response(("search", {"q": str(i)})) for i in range(5)]
    result, llm, _ = run(script, max_steps=2, hitl=hitl)
    assert len(hitl.calls) == 2 and len(llm.requests) == 3
    assert any("exactly one more step" in s.user_nudge for s in result.steps)


def test_allow_more_grants_max_steps_more() -> None:
    hitl = LimitAnswers(StepLimitResponse.ALLOW_MORE, StepLimitResponse.DENY)
    script = [tool_calls_response(("search", {"q": str(i)})) for i in range(9)]
    result, llm, _ = run(script, max_steps=3, hitl=hitl)
    assert [c[0] for c in hitl.calls] == [4, 7]
    assert len(llm.requests) == 6
    assert any("granted 3 more steps" in s.user_nudge for s in result.steps)


def test_allow_always_lifts_the_limit() -> None:
    hitl = LimitAnswers(StepLimitResponse.ALLOW_ALWAYS)
    script = [tool_calls_response(("search", {"q": str(i)})) for i in range(5)]
    result, _, _ = run([*script, finish_response("done")], max_steps=2, hitl=hitl)
    assert len(hitl.calls) == 1 and result.finished


def test_a_raising_step_limit_handler_propagates() -> None:
    class Raising(HITLHandler):
        async def on_step_limit(self, *args: object) -> StepLimitResponse:
            raise KeyError("ui gone")

    with pytest.raises(KeyError, match="ui gone"):
        run([tool_calls_response(("search", {"q": "a"}))] * 3, max_steps=1, hitl=Raising())


def test_reference_event_order_for_a_read_then_finish() -> None:
    _, _, events = run(
        [
            tool_calls_response(("read_file", {"path": "a"}), thought="look"),
            finish_response("done", thought="done now"),
        ]
    )
    reference = EVENT_NAMES[:13]
    order = [
        n
        for n in events.names()
        if n in reference and n not in ("assistant_chunk", "assistant_done")
    ]
    assert order == [
        "step_start",
        "thought",
        "tool_call",
        "tool_result",
        "step_complete",
        "context_fill",
        "step_start",
        "thought",
        "finishing",
        "tool_result",
        "step_complete",
    ]
    assert events.of("step_start") == [(1,), (2,)]
    assert events.of("tool_call")[0] == (1, 0, "read_file", '{"path": "a"}', "core")
    assert events.of("finishing")[0] == (2, "done")


def test_sp4rks_own_events_bracket_the_run_the_model_calls_and_the_tools() -> None:
    result, _, events = run(
        [
            tool_calls_response(("read_file", {"path": "a"}), thought="look"),
            finish_response("done"),
        ]
    )
    order = [n for n in events.names() if n not in ("assistant_chunk", "assistant_done")]
    assert order == [
        "run_start",
        "step_start",
        "model_call_start",
        "usage_update",  # the call is counted as soon as its answer arrives
        "model_call_end",
        "thought",
        "tool_call",
        "tool_execute_start",
        "tool_execute_end",
        "tool_result",
        "tool_call_end",
        "step_complete",
        "context_fill",
        "step_start",
        "model_call_start",
        "usage_update",
        "model_call_end",
        "finishing",
        "tool_result",
        "tool_call_end",
        "step_complete",
        "run_end",
    ]
    (start,) = events.of("run_start")[0]
    assert (start.first_step, start.max_steps, start.resumed) == (1, 10, False)
    assert start.redact("key sk-abcdefghijklmnopqrstuvwx") == "key sk-[REDACTED]"
    step, call = events.of("model_call_end")[0]
    assert step == 1 and call.attempts == 1 and call.error is None
    assert call.response.message.tool_calls[0].name == "read_file"
    assert call.request.messages[-1].content == "do the task"
    read, finish = [args[2] for args in events.of("tool_call_end")]
    assert (read.tool, read.arguments, read.is_error, read.error_type) == (
        "read_file",
        '{"path": "a"}',
        False,
        None,
    )
    assert read.call_id and read.observation.startswith("contents of a")
    assert (finish.tool, finish.observation) == ("finish", "done")
    assert events.of("run_end") == [(result, None)]


def test_run_end_reports_the_exception_a_run_raises() -> None:
    events = RecordingEvents()
    with pytest.raises(LLMError):
        run([LLMError("provider down")], events=events)
    (_, call), ((result, error),) = events.of("model_call_end")[0], events.of("run_end")
    assert isinstance(call.error, LLMError) and call.response is None
    assert result is None and error is call.error


def test_thought_event_fires_only_with_content_or_reasoning() -> None:
    silent = tool_calls_response(("search", {"q": "a"}))
    reasoning = ChatResponse(
        message=Message("assistant", tool_calls=[ToolCall("c1", "search", '{"q": "b"}')]),
        reasoning="thinking hard",
        stop_reason="tool_use",
    )
    _, _, events = run([silent, reasoning, finish_response("x")])
    assert events.of("thought") == [(2, "", "thinking hard")]


def test_an_event_handler_that_raises_does_not_stop_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from sp4rk.agent import Events

    class Broken(Events):
        def tool_call(self, *args: object) -> None:
            raise ValueError("display crashed")

    tools = echo_tools()
    llm = ScriptedLLM([tool_calls_response(("search", {"q": "a"})), finish_response("x")])
    result = Executor(llm, tools, 5, events=Broken()).run_sync(tools.list(), ContextWindow())
    assert result.finished
    assert "display crashed" in caplog.text


def test_tokens_used_is_the_response_usage_shared_by_its_steps() -> None:
    usage = TokenUsage(input_tokens=100, output_tokens=20)
    result, _, _ = run(
        [
            tool_calls_response(("search", {"q": "a"}), ("search", {"q": "b"}), usage=usage),
            finish_response("x"),
        ]
    )
    assert [s.tokens_used for s in result.steps[:2]] == [120, 120]


def test_provider_usage_calibrates_the_context() -> None:
    cw = FakeContext()
    usage = TokenUsage(input_tokens=1234, output_tokens=5)
    run([tool_calls_response(("search", {"q": "a"}), usage=usage), finish_response("x")], cw=cw)
    assert cw.corrections == [1234]


def test_run_sync_refuses_inside_a_running_loop() -> None:
    tools = echo_tools()
    executor = Executor(ScriptedLLM([finish_response("x")]), tools, 5)

    async def inside() -> None:
        executor.run_sync(tools.list(), ContextWindow())

    with pytest.raises(RuntimeError, match=r"await executor\.run"):
        asyncio.run(inside())


async def test_a_second_concurrent_run_is_refused() -> None:
    gate, entered = asyncio.Event(), asyncio.Event()

    async def slow_model(request: object) -> ChatResponse:
        entered.set()
        await gate.wait()
        return finish_response("x")

    from sp4rk.llm.testing import FunctionLLM

    tools = echo_tools()
    executor = Executor(FunctionLLM(slow_model), tools, 5)
    first = asyncio.create_task(executor.run(tools.list(), ContextWindow()))
    await entered.wait()
    with pytest.raises(RuntimeError, match="already running"):
        await executor.run(tools.list(), ContextWindow())
    gate.set()
    assert (await first).finished


async def test_cancelling_the_run_propagates_and_keeps_completed_steps() -> None:
    started = asyncio.Event()

    @tool
    async def hang(q: str) -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    tools = echo_tools()
    tools.register(hang)
    llm = ScriptedLLM(
        [
            tool_calls_response(("search", {"q": "a"}), ("hang", {"q": "b"})),
        ]
    )
    executor = Executor(llm, tools, 5)
    task = asyncio.create_task(executor.run(tools.list(), ContextWindow()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [s.tool_name for s in executor.last_steps] == ["search"]


def test_constructor_validates_its_arguments() -> None:
    with pytest.raises(TypeError, match="llm"):
        Executor(object(), echo_tools(), 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ToolExecutor"):
        Executor(ScriptedLLM([]), object(), 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_steps"):
        Executor(ScriptedLLM([]), echo_tools(), 0)


def test_trajectory_store_is_synced_every_step_and_at_the_end() -> None:
    from sp4rk.agent import ListTrajectoryStore, Step

    seen: list[int] = []

    class Spy(ListTrajectoryStore):
        def sync(self, steps: object) -> None:
            super().sync(steps)  # type: ignore[arg-type]
            seen.append(len(self.steps()))

    store = Spy()
    result, _, _ = run(
        [tool_calls_response(("search", {"q": "a"})), finish_response("x")],
        ctx=RunContext(trajectory_store=store),
    )
    assert seen[:2] == [0, 1]
    assert seen[-1] == len(result.steps) == 2
    assert all(isinstance(s, Step) for s in store.steps())


def test_tool_call_arguments_reach_the_tool_raw() -> None:
    seen: list[str] = []

    async def capture(ctx: RunContext, input: str) -> ToolResult:
        seen.append(input)
        return ToolResult("captured " + "." * 60)

    tools = Registry([RawTool("capture", capture)])
    raw = '{ "b": 1,  "a": "x\\u00e9" }'
    run([tool_calls_response(("capture", raw)), finish_response("x")], tools=tools)
    assert seen == [raw]
    assert json.loads(seen[0]) == {"b": 1, "a": "xé"}


def test_passing_the_registry_to_run_says_to_pass_its_descriptors() -> None:
    registry = echo_tools()
    executor = Executor(ScriptedLLM([finish_response("x")]), registry, 5)
    with pytest.raises(TypeError, match=r"pass registry\.list\(\)"):
        executor.run_sync(registry, ContextWindow())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="list of ToolDescriptor"):
        executor.run_sync(42, ContextWindow())  # type: ignore[arg-type]


def test_model_responses_count_what_max_steps_limits() -> None:
    reply = tool_calls_response(("search", {"q": "a"}), ("search", {"q": "b"}))
    result, _, _ = run([reply, finish_response("done")])
    assert len(result.steps) == 3  # two calls and the finish: trajectory entries
    assert result.model_responses == 2
    limited, _, _ = run(
        [tool_calls_response(("search", {"q": str(i)})) for i in range(3)], max_steps=2
    )
    assert limited.exit_reason is ExitReason.STEP_LIMIT and limited.model_responses == 2
