"""Static typing of the public API: checked by mypy (``make typecheck``), also run by pytest."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, assert_type

from sp4rk.agent import (
    Budget,
    CompositeEvents,
    ContextManager,
    Events,
    Executor,
    ExecutorResult,
    HITLToolDecision,
    ModelCallEnd,
    SubAgentTask,
    ToolCallEnd,
    ToolErrorType,
)
from sp4rk.llm import TokenUsage
from sp4rk.llm.testing import ScriptedLLM, finish_response
from sp4rk.memory import ContextWindow
from sp4rk.otel import OpenTelemetryEvents
from sp4rk.tools import FunctionTool, Registry, RunContext, ToolResult, tool


@tool
def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


@tool(name="greet")
async def greet(ctx: RunContext, name: str) -> str:
    """Greet someone."""
    return f"hi {name}"


def test_decorated_tools_keep_their_signatures() -> None:
    assert isinstance(add, FunctionTool)
    assert_type(add(1, 2), int)
    pending = greet(RunContext(), "x")
    checked = assert_type(pending, Coroutine[Any, Any, str])
    checked.close()


def _wrong_calls_are_type_errors() -> None:  # checked by mypy, never run
    add("1")  # type: ignore[arg-type]
    greet("no context", "x").close()  # type: ignore[arg-type]


async def test_run_and_run_sync_return_executor_results() -> None:
    registry = Registry([add])
    executor = Executor(ScriptedLLM([finish_response("x")]), registry, 5)
    result = await executor.run(registry.list(), ContextWindow())
    assert_type(result, ExecutorResult)
    assert_type(await add.execute(RunContext(), '{"a": 1}'), ToolResult)


def test_run_sync_returns_an_executor_result() -> None:
    registry = Registry([add])
    executor = Executor(ScriptedLLM([finish_response("x")]), registry, 5)
    assert_type(executor.run_sync(registry.list(), ContextWindow()), ExecutorResult)


def test_a_budgeted_run_reports_usage_and_a_cost_that_may_be_unknown() -> None:
    registry = Registry([add])
    llm = ScriptedLLM([finish_response("x")], model="gpt-4o-mini")
    executor = Executor(llm, registry, 5, budget=Budget.from_limits(max_cost_usd=1.0))
    result = executor.run_sync(registry.list(), ContextWindow())
    assert_type(result.usage, TokenUsage)
    assert_type(result.cost_usd, float | None)
    assert result.cost_usd == 0.0  # the scripted reply reports no tokens


class TokenMeter(Events):
    """A sink typed against sp4rk's own callbacks."""

    def __init__(self) -> None:
        self.tokens = 0

    def model_call_end(self, step_num: int, call: ModelCallEnd) -> None:
        if call.response is not None:
            self.tokens += call.response.usage.total_tokens

    def tool_call_end(self, step_num: int, call_idx: int, call: ToolCallEnd) -> None:
        assert_type(call.error_type, ToolErrorType | None)


def test_sinks_compose_with_tracing() -> None:
    meter = TokenMeter()
    events = CompositeEvents(meter, OpenTelemetryEvents())
    result = Executor(
        ScriptedLLM([finish_response("ok")]), Registry([]), 2, events=events
    ).run_sync([], ContextWindow())
    assert result.finished and meter.tokens == 0


def test_the_newcomer_names_are_typed() -> None:
    registry = Registry([add])
    executor = Executor(ScriptedLLM([finish_response("x")]), registry, 5)
    assert_type(executor.run_sync(registry.list(), ContextWindow()).model_responses, int)
    assert_type(HITLToolDecision.no_opinion(), HITLToolDecision)
    assert_type(HITLToolDecision.modify({"a": 2}), HITLToolDecision)
    task = SubAgentTask("s", executor, ContextWindow(), registry.list(), "add")
    assert_type(task.window, ContextManager)


def _old_names_still_type_check(executor: Executor, window: ContextWindow) -> None:
    SubAgentTask("s", executor, cm=window)  # deprecated: warns at run time, never run here
