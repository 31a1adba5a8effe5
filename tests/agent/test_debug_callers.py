"""Debug callers: JSONL dumps, usage logs, usage totals; transparent and stackable."""

from __future__ import annotations

import io
import json
import logging

import pytest

from sp4rk.agent import DumpCaller, LoggingLLMCaller, StreamingLLMCaller, UsageTrackingCaller
from sp4rk.llm import ChatRequest, ChatResponse, LLMError, Message, TokenUsage
from sp4rk.llm.testing import ScriptedLLM, ScriptedStreamingLLM, text_response


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


async def test_decorators_stack_and_forward_streaming() -> None:
    out = io.StringIO()
    inner = ScriptedStreamingLLM([text_response("one two")])
    tracked = UsageTrackingCaller(DumpCaller(LoggingLLMCaller(inner, "p", None), out))
    assert isinstance(tracked, StreamingLLMCaller)
    deltas: list[str] = []
    got = await tracked.call_stream(request(), deltas.append)  # type: ignore[attr-defined]
    assert deltas == ["one", " two"] and got.message.content == "one two"
    assert len(out.getvalue().splitlines()) == 2
    assert not isinstance(UsageTrackingCaller(ScriptedLLM([])), StreamingLLMCaller)


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
