"""Every error fixture maps to the right exception, through each SDK, with the right retries."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from sp4rk.llm import errors
from sp4rk.llm._errors_map import classify, parse_error_body
from sp4rk.llm.types import ChatRequest, Message
from tests.llm.conftest import ProviderFactory
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import WIRES, Turn

FIXTURES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "fixtures" / "errors.json").read_text()
)
REQUEST = ChatRequest(messages=[Message("user", "hi")])


def _error_class(name: str) -> type[errors.LLMError]:
    cls = getattr(errors, name)
    assert issubclass(cls, errors.LLMError)
    return cls


@pytest.mark.parametrize("case", FIXTURES, ids=[c["name"] for c in FIXTURES])
def test_classifier_maps_fixture(case: dict[str, Any]) -> None:
    error = classify(case["status"], parse_error_body(case["body"]), provider="p")
    assert type(error) is _error_class(case["expect"])
    assert error.retryable is case["retryable"]
    assert error.status_code == case["status"]


@pytest.mark.parametrize("wire", list(WIRES))
@pytest.mark.parametrize("case", FIXTURES, ids=[c["name"] for c in FIXTURES])
async def test_sdk_error_maps_and_retries_only_transient_failures(
    case: dict[str, Any], wire: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    path, encode, _ = WIRES[wire]
    attempts = 3 if case["retryable"] else 1
    error = Reply(case["status"], case["body"], headers=case.get("headers", {}))
    # A success is queued after the errors: a retry the policy forbids would reach it.
    server.queue(path, *[error] * attempts, encode(Turn(text="ok")))
    provider = make_provider(wire, max_retries=2)

    with pytest.raises(errors.LLMError) as caught:
        await provider.call(REQUEST)

    assert type(caught.value) is _error_class(case["expect"])
    assert caught.value.retryable is case["retryable"]
    assert caught.value.status_code == case["status"]
    assert len(server.received) == attempts
    assert server.pending() == 1


@pytest.mark.parametrize("wire", list(WIRES))
async def test_transient_failure_is_retried_then_succeeds(
    wire: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    path, encode, _ = WIRES[wire]
    busy = next(c for c in FIXTURES if c["name"] == "openai-rate-limit-transient")
    server.queue(path, Reply(429, busy["body"], busy["headers"]), encode(Turn(text="ok")))
    response = await make_provider(wire, max_retries=1).call(REQUEST)
    assert response.message.content == "ok"
    assert len(server.received) == 2


async def test_overflow_inside_a_chat_stream(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    overflow = {
        "message": "maximum context length is 4096 tokens",
        "code": "context_length_exceeded",
    }
    server.queue("/v1/chat/completions", Reply(events=[(None, {"error": overflow})]))
    with pytest.raises(errors.ContextWindowExceededError) as caught:
        await make_provider("chat").call_stream(REQUEST, lambda _: None)
    assert caught.value.status_code is None


async def test_error_event_inside_an_anthropic_stream(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    event = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.queue("/v1/messages", Reply(events=[("error", event)]))
    with pytest.raises(errors.ProviderOverloadedError) as caught:
        await make_provider("anthropic").call_stream(REQUEST, lambda _: None)
    assert caught.value.retryable is True


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (
            {
                "type": "response.failed",
                "sequence_number": 1,
                "response": {
                    "id": "resp_1",
                    "status": "failed",
                    "output": [],
                    "error": {"code": "server_error", "message": "The model failed."},
                },
            },
            errors.ProviderAPIError,
        ),
        (
            {
                "type": "error",
                "sequence_number": 1,
                "code": "context_length_exceeded",
                "message": "Your input exceeds the context window of this model.",
                "param": None,
            },
            errors.ContextWindowExceededError,
        ),
    ],
    ids=["response-failed", "error-event"],
)
async def test_failure_inside_a_responses_stream(
    event: dict[str, Any],
    expected: type[errors.LLMError],
    server: FakeServer,
    make_provider: ProviderFactory,
) -> None:
    server.queue("/v1/responses", Reply(events=[(event["type"], event)]))
    with pytest.raises(expected):
        await make_provider("responses").call_stream(REQUEST, lambda _: None)


@pytest.mark.parametrize("wire", list(WIRES))
async def test_unreachable_server_is_a_retryable_connection_error(wire: str) -> None:
    from sp4rk.llm import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider

    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    cls = {
        "chat": OpenAIChatProvider,
        "responses": OpenAIResponsesProvider,
        "anthropic": AnthropicProvider,
    }[wire]
    async with cls("m", api_key="k", base_url=url, max_retries=0) as provider:
        with pytest.raises(errors.LLMConnectionError) as caught:
            await provider.call(REQUEST)
    assert caught.value.retryable is True
    assert caught.value.status_code is None
    assert f"connection failed to http://127.0.0.1:{port}" in str(caught.value)
    assert "is the server running" in str(caught.value)


async def test_a_connection_error_names_the_url_without_its_credentials() -> None:
    from sp4rk.llm import OpenAIChatProvider

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://user:hunter22@127.0.0.1:{port}/v1?key=sk-querysecret0123456789"
    async with OpenAIChatProvider("m", api_key="k", base_url=url, max_retries=0) as provider:
        with pytest.raises(errors.LLMConnectionError) as caught:
            await provider.call(REQUEST)
    text = str(caught.value)
    assert f"to http://127.0.0.1:{port}/v1" in text
    assert "hunter22" not in text and "querysecret" not in text and "user:" not in text
