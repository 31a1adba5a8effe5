"""Streams cut short or failing midway: never returned as complete, always classified."""

from __future__ import annotations

from typing import Any

import pytest

from sp4rk.llm import errors
from sp4rk.llm._errors_map import ErrorInfo, classify, connection_error
from sp4rk.llm.types import ChatRequest, Message
from tests.llm.conftest import ProviderFactory
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import WIRES, Turn

REQUEST = ChatRequest(messages=[Message("user", "hi")])
#: How many events of each wire's stream of ``Turn(text="hello there")`` come before the one
#: that ends it: the opening event(s) and the first text deltas.
BEFORE_THE_END = {"chat": 3, "responses": 3, "anthropic": 4}


def _cut_stream(wire: str, *, dropped: bool) -> Reply:
    events = WIRES[wire][2](Turn(text="hello there")).events or []
    return Reply(events=events[: BEFORE_THE_END[wire]], dropped=dropped)


@pytest.mark.parametrize("dropped", [False, True], ids=["clean-eof", "connection-dropped"])
@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_stream_cut_short_is_a_retryable_connection_error(
    wire: str, dropped: bool, server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(WIRES[wire][0], _cut_stream(wire, dropped=dropped))
    deltas: list[str] = []
    with pytest.raises(errors.LLMConnectionError) as caught:
        await make_provider(wire).call_stream(REQUEST, deltas.append)
    assert caught.value.retryable is True
    assert caught.value.status_code is None
    assert "".join(deltas) != "hello there"  # only a part arrived


def _anthropic_events_then(error: dict[str, Any]) -> Reply:
    events = WIRES["anthropic"][2](Turn(text="hello there")).events or []
    return Reply(events=[*events[: BEFORE_THE_END["anthropic"]], ("error", error)])


@pytest.mark.parametrize(
    ("error", "expected", "retryable"),
    [
        (
            {"type": "overloaded_error", "message": "Overloaded"},
            errors.ProviderOverloadedError,
            True,
        ),
        (
            {"type": "rate_limit_error", "message": "Number of request tokens has exceeded"},
            errors.RateLimitError,
            True,
        ),
        (
            {"type": "invalid_request_error", "message": "prompt is too long"},
            errors.ContextWindowExceededError,
            False,
        ),
    ],
    ids=["overloaded", "rate-limit", "overflow"],
)
async def test_an_error_event_after_anthropic_text_is_classified(
    error: dict[str, Any],
    expected: type[errors.LLMError],
    retryable: bool,
    server: FakeServer,
    make_provider: ProviderFactory,
) -> None:
    server.queue(WIRES["anthropic"][0], _anthropic_events_then({"type": "error", "error": error}))
    deltas: list[str] = []
    with pytest.raises(errors.LLMError) as caught:
        await make_provider("anthropic").call_stream(REQUEST, deltas.append)
    assert type(caught.value) is expected
    assert caught.value.retryable is retryable
    assert deltas  # the text before the error was streamed


async def test_a_quota_error_event_in_a_responses_stream_is_not_retryable(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    event = {
        "type": "error",
        "sequence_number": 1,
        "code": "insufficient_quota",
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "param": None,
    }
    server.queue(WIRES["responses"][0], Reply(events=[("error", event)]))
    with pytest.raises(errors.QuotaExceededError) as caught:
        await make_provider("responses").call_stream(REQUEST, lambda _: None)
    assert caught.value.retryable is False
    assert caught.value.code == "insufficient_quota"


async def test_a_quota_error_chunk_in_a_chat_stream_is_not_retryable(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    error = {"message": "You exceeded your current quota.", "code": "insufficient_quota"}
    server.queue(WIRES["chat"][0], Reply(events=[(None, {"error": error})]))
    with pytest.raises(errors.QuotaExceededError):
        await make_provider("chat").call_stream(REQUEST, lambda _: None)


@pytest.mark.parametrize(
    ("code", "expected", "retryable"),
    [
        ("insufficient_quota", errors.QuotaExceededError, False),
        ("billing_hard_limit_reached", errors.QuotaExceededError, False),
        ("rate_limit_error", errors.RateLimitError, True),
        ("rate_limit_exceeded", errors.RateLimitError, True),
    ],
)
def test_stream_error_codes_of_quota_and_rate_limits(
    code: str, expected: type[errors.LLMError], retryable: bool
) -> None:
    error = classify(None, ErrorInfo(code=code, message="slow down"), provider="p")
    assert type(error) is expected
    assert error.retryable is retryable
    assert error.status_code is None


def test_a_connection_error_without_text_names_its_type() -> None:
    error = connection_error("p", ConnectionResetError(), ())
    assert str(error) == "p: connection failed: ConnectionResetError"
    assert error.retryable is True
