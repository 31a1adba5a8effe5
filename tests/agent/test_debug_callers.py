"""Debug callers: JSONL dumps, usage logs, usage totals; transparent and stackable."""

from __future__ import annotations

import inspect
import io
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from sp4rk.agent import (
    DumpCaller,
    Executor,
    LLMCaller,
    LoggingLLMCaller,
    RecordingEvents,
    StreamingLLMCaller,
    UsageTrackingCaller,
    supports_streaming,
)
from sp4rk.llm import ChatRequest, ChatResponse, LLMError, Message, TokenUsage
from sp4rk.llm.testing import (
    ScriptedLLM,
    ScriptedStreamingLLM,
    finish_response,
    text_response,
    tool_calls_response,
)
from sp4rk.memory import ContextWindow

from .helpers import echo_tools


def request() -> ChatRequest:
    return ChatRequest(model="m1", messages=[Message("user", content="hi")])


async def test_dump_writes_a_request_and_a_response_line() -> None:
    out = io.StringIO()
    response = ChatResponse(
        model="m1",
        message=Message("assistant", content="hello"),
        usage=TokenUsage(3, 2),
        stop_reason="end_turn",
    )
    caller = DumpCaller(ScriptedLLM([response]), out)
    got = await caller.call(request())
    assert got.message.content == "hello"
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["direction"] == "request" and "error" not in first
    assert first["data"]["messages"][0]["content"] == "hi"
    assert second["direction"] == "response" and second["data"]["usage"]["input_tokens"] == 3
    assert first["ts"].endswith("+00:00")
    assert ChatRequest.from_dict(first["data"]) == request()


async def test_dump_records_the_error_and_reraises() -> None:
    out = io.StringIO()
    caller = DumpCaller(ScriptedLLM([LLMError("provider timeout")]), out)
    with pytest.raises(LLMError):
        await caller.call(request())
    last = json.loads(out.getvalue().splitlines()[-1])
    assert last["error"] == "provider timeout" and last["data"] is None


async def test_dump_without_writer_is_a_pass_through_and_write_errors_are_swallowed() -> None:
    assert (
        await DumpCaller(ScriptedLLM([text_response("x")]), None).call(request())
    ).message.content == "x"

    class Broken(io.StringIO):
        def write(self, s: str) -> int:
            raise OSError("disk full")

    got = await DumpCaller(ScriptedLLM([text_response("y")]), Broken()).call(request())
    assert got.message.content == "y"


async def test_logging_caller_logs_usage_at_debug_and_failures_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("test.llm")
    caplog.set_level(logging.DEBUG, logger="test.llm")
    ok = ChatResponse(usage=TokenUsage(7, 3), stop_reason="end_turn")
    caller = LoggingLLMCaller(ScriptedLLM([ok, LLMError("boom")]), "anthropic", logger)
    await caller.call(request())
    with pytest.raises(LLMError):
        await caller.call(request())
    levels = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert any(
        lv == logging.DEBUG and "input_tokens=7" in msg and "total_tokens=10" in msg
        for lv, msg in levels
    )
    assert any(lv == logging.WARNING and "boom" in msg for lv, msg in levels)


def debug_stack(inner: LLMCaller, out: io.StringIO) -> UsageTrackingCaller:
    return UsageTrackingCaller(DumpCaller(LoggingLLMCaller(inner, "p", None), out))


async def test_decorators_stack_and_forward_streaming() -> None:
    out = io.StringIO()
    tracked = debug_stack(ScriptedStreamingLLM([text_response("one two")]), out)
    # A real method, found by static lookup: what isinstance on Python 3.12+ relies on.
    assert callable(inspect.getattr_static(tracked, "call_stream"))
    assert supports_streaming(tracked) and isinstance(tracked, StreamingLLMCaller)
    assert (
        isinstance(tracked, UsageTrackingCaller) and type(tracked).__name__ == "UsageTrackingCaller"
    )
    deltas: list[str] = []
    got = await tracked.call_stream(request(), deltas.append)
    assert deltas == ["one", " two"] and got.message.content == "one two"
    assert len(out.getvalue().splitlines()) == 2
    assert tracked.total() == TokenUsage(0, 0) and list(tracked.totals()) == ["m1"]


def test_a_stack_around_a_plain_caller_does_not_look_streaming() -> None:
    plain = debug_stack(ScriptedLLM([]), io.StringIO())
    assert not supports_streaming(plain) and not isinstance(plain, StreamingLLMCaller)
    assert not hasattr(plain, "call_stream")
    assert isinstance(plain, UsageTrackingCaller)


def test_the_executor_streams_through_a_stack_of_debug_callers() -> None:
    tools = echo_tools()
    events = RecordingEvents()
    out = io.StringIO()
    inner = ScriptedStreamingLLM(
        [tool_calls_response(("search", {"q": "a"}), thought="let me look"), finish_response("ok")]
    )
    Executor(debug_stack(inner, out), tools, 5, events=events).run_sync(
        tools.list(), ContextWindow()
    )
    assert [a[0] for a in events.of("assistant_chunk")] == ["let", " me", " look"]
    assert len(out.getvalue().splitlines()) == 4  # both calls went through the dump


async def test_a_decorator_subclass_keeps_its_own_behaviour_when_streaming() -> None:
    seen: list[str] = []

    class Counting(UsageTrackingCaller):
        async def _around(self, request: ChatRequest, send: Callable[[], Any]) -> ChatResponse:
            seen.append(request.model)
            return await super()._around(request, send)

    counting = Counting(ScriptedStreamingLLM([text_response("a b")]))
    assert isinstance(counting, Counting) and supports_streaming(counting)
    deltas: list[str] = []
    await counting.call_stream(request(), deltas.append)
    assert seen == ["m1"] and deltas == ["a", " b"] and list(counting.totals()) == ["m1"]


async def test_usage_tracking_sums_per_model() -> None:
    responses = [
        ChatResponse(model="a", usage=TokenUsage(10, 1)),
        ChatResponse(model="b", usage=TokenUsage(5, 5)),
        ChatResponse(model="a", usage=TokenUsage(1, 1)),
    ]
    caller = UsageTrackingCaller(ScriptedLLM(responses))
    for _ in responses:
        await caller.call(request())
    assert caller.totals() == {"a": TokenUsage(11, 2), "b": TokenUsage(5, 5)}
    assert caller.total() == TokenUsage(16, 7)
