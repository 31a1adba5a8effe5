"""``timeout`` bounds a whole call; a long ``Retry-After`` fails fast instead of stalling."""

from __future__ import annotations

from typing import Any

import pytest

from sp4rk.llm import errors
from sp4rk.llm.base import DEFAULT_TIMEOUT
from sp4rk.llm.types import ChatRequest, Message
from tests.llm.conftest import ProviderFactory
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import WIRES, Turn

REQUEST = ChatRequest(messages=[Message("user", "hi")])
DEADLINE = 0.3


def _opening(wire: str) -> list[tuple[str | None, Any]]:
    return (WIRES[wire][2](Turn(text="hello")).events or [])[:2]


STALLS = {
    "a JSON body trickling a byte at a time": (Reply(stall="trickle"), False),
    "a stream trickling a byte at a time": (Reply(stall="trickle"), True),
    "a stream of keep-alive comments": (None, True),
    "no answer at all": (Reply(stall="silent"), False),
    "headers trickling a byte at a time": (Reply(stall="slow-headers"), True),
}


@pytest.mark.parametrize("stall", list(STALLS))
@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_server_that_never_finishes_ends_at_the_deadline(
    wire: str, stall: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    reply, stream = STALLS[stall]
    if reply is None:
        reply = Reply(stall="keepalive", events=_opening(wire))
    server.queue(WIRES[wire][0], reply)
    provider = make_provider(wire, timeout=DEADLINE)
    call = provider.call_stream(REQUEST, lambda _: None) if stream else provider.call(REQUEST)
    with pytest.raises(errors.LLMConnectionError) as caught:
        await call
    assert "deadline of 0.3 s" in str(caught.value)
    assert caught.value.retryable is True


@pytest.mark.parametrize("wire", list(WIRES))
async def test_the_deadline_covers_the_sdk_retries_and_their_waits(
    wire: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    failing = Reply(500, {"error": {"message": "boom", "type": "api_error"}})
    server.queue(WIRES[wire][0], *[failing] * 20)
    provider = make_provider(wire, timeout=DEADLINE, max_retries=20)
    with pytest.raises(errors.LLMConnectionError, match="deadline"):
        await provider.call(REQUEST)
    assert 1 <= len(server.received) < 20  # the backoff alone outlasts the deadline


@pytest.mark.parametrize(
    ("status", "expected"),
    [(429, errors.RateLimitError), (503, errors.ProviderOverloadedError)],
)
@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_long_retry_after_fails_at_once_and_says_how_long_to_wait(
    wire: str,
    status: int,
    expected: type[errors.LLMError],
    server: FakeServer,
    make_provider: ProviderFactory,
) -> None:
    body = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    server.queue(WIRES[wire][0], *[Reply(status, body, headers={"Retry-After": "50"})] * 3)
    provider = make_provider(wire, max_retries=2)
    with pytest.raises(expected) as caught:
        await provider.call(REQUEST)
    assert caught.value.retryable is True
    assert caught.value.retry_after == 50
    assert "retry after 50 s" in str(caught.value)
    assert len(server.received) == 1  # no retry that would sleep 50 s


@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_retry_after_past_the_deadline_fails_at_once(
    wire: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    body = {"error": {"message": "busy", "type": "overloaded_error"}}
    server.queue(WIRES[wire][0], Reply(529, body, headers={"retry-after": "5"}))
    provider = make_provider(wire, max_retries=2, timeout=2)
    with pytest.raises(errors.ProviderAPIError) as caught:
        await provider.call(REQUEST)
    assert caught.value.retry_after == 5
    assert len(server.received) == 1


@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_short_retry_after_is_honoured(
    wire: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    path, as_json, _ = WIRES[wire]
    busy = Reply(429, {"error": {"message": "slow down"}}, headers={"retry-after-ms": "20"})
    server.queue(path, busy, as_json(Turn(text="done")))
    response = await make_provider(wire, max_retries=2).call(REQUEST)
    assert response.message.content == "done"
    assert len(server.received) == 2


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), "10", True])
def test_a_timeout_must_be_a_positive_number_of_seconds(
    timeout: Any, make_provider: ProviderFactory
) -> None:
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        make_provider("chat", timeout=timeout)


def test_without_a_timeout_a_call_gets_the_default_deadline(
    make_provider: ProviderFactory,
) -> None:
    assert make_provider("anthropic").timeout == DEFAULT_TIMEOUT  # type: ignore[attr-defined]
    assert make_provider("chat", timeout=12).timeout == 12  # type: ignore[attr-defined]


async def test_a_client_passed_in_gets_the_deadline_too(server: FakeServer) -> None:
    import openai

    from sp4rk.llm import OpenAIChatProvider

    server.queue(WIRES["chat"][0], Reply(stall="trickle"))
    async with openai.AsyncOpenAI(
        api_key="k" * 8, base_url=server.url + "/v1", max_retries=0
    ) as client:
        provider = OpenAIChatProvider("test-model", client=client, timeout=DEADLINE)
        with pytest.raises(errors.LLMConnectionError, match="deadline"):
            await provider.call(REQUEST)
