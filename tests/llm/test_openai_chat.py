"""OpenAIChatProvider through the official SDK against a local Chat Completions server."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import pytest

from sp4rk.llm import OpenAIChatProvider
from sp4rk.llm.errors import (
    ContextWindowExceededError,
    LLMError,
    ProviderAPIError,
    RateLimitError,
)
from sp4rk.llm.types import ChatRequest, Message
from tests.llm.conftest import API_KEY, ProviderFactory
from tests.llm.conversation import READ_SCHEMA, full_request
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import Turn, chat_json, chat_sse

PATH = "/v1/chat/completions"
TURN = Turn(
    text="Let me read it.",
    calls=[("call_9", "read_file", '{"path":  "b.txt"}'), ("call_10", "read_file", "{}")],
    reasoning=[("", "because", "")],
    usage=(321, 12),
)


async def test_request_maps_every_field(server: FakeServer, make_provider: ProviderFactory) -> None:
    server.queue(PATH, chat_json(Turn(text="ok")))
    await make_provider("chat").call(full_request())
    body = server.bodies(PATH)[0]
    assert body["model"] == "test-model"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse.\nPlan: step 1"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look at this"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call:1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                }
            ],
            "reasoning_content": "I should read",
        },
        {"role": "tool", "tool_call_id": "call:1", "content": "(no output)"},
        {"role": "user", "content": "continue"},
    ]
    parameters = {k: v for k, v in READ_SCHEMA.items() if k != "$schema"}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": parameters,
            },
        }
    ]
    assert body["max_completion_tokens"] == 4000
    assert (body["temperature"], body["top_p"], body["presence_penalty"]) == (0.2, 0.9, 0.1)
    assert body["top_k"] == 40  # compatible servers only
    assert body["reasoning_effort"] == "high"
    assert "stream" not in body
    assert server.received[0].headers["authorization"] == f"Bearer {API_KEY}"


async def test_unset_options_are_not_sent(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, chat_json(Turn(text="ok")))
    await make_provider("chat").call(ChatRequest(messages=[Message("user", "hi")]))
    body = server.bodies(PATH)[0]
    assert set(body) == {"model", "messages"}


async def test_request_model_overrides_provider_model(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, chat_json(Turn(text="ok")))
    await make_provider("chat").call(ChatRequest(model="other", messages=[Message("user", "x")]))
    assert server.bodies(PATH)[0]["model"] == "other"


async def test_response_maps_raw_arguments_reasoning_usage_and_stop(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, chat_json(TURN))
    response = await make_provider("chat").call(full_request())
    assert response.message.content == "Let me read it."
    assert [(c.id, c.name, c.input) for c in response.message.tool_calls] == [
        ("call_9", "read_file", '{"path":  "b.txt"}'),
        ("call_10", "read_file", "{}"),
    ]
    assert response.reasoning == response.message.reasoning_content == "because"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (321, 12)
    assert response.stop_reason == "tool_use"
    assert response.model == "test-model"


@pytest.mark.parametrize(
    ("stop", "calls", "expected"),
    [
        ("end_turn", [], "end_turn"),
        ("max_tokens", [], "max_tokens"),
        ("max_tokens", [("c", "read_file", '{"pa')], "max_tokens"),
    ],
)
async def test_finish_reasons(
    stop: str,
    calls: list[tuple[str, str, str]],
    expected: str,
    server: FakeServer,
    make_provider: ProviderFactory,
) -> None:
    server.queue(PATH, chat_json(Turn(text="x", calls=calls, stop=stop)))
    response = await make_provider("chat").call(ChatRequest(messages=[Message("user", "hi")]))
    assert response.stop_reason == expected


async def test_stream_fires_text_deltas_and_assembles_tool_calls(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, chat_json(TURN), chat_sse(TURN))
    provider = make_provider("chat")
    whole = await provider.call(full_request())
    deltas: list[str] = []
    streamed = await provider.call_stream(full_request(), deltas.append)

    assert deltas == ["Let ", "me r", "ead ", "it."]
    assert streamed.to_dict() == whole.to_dict()
    body = server.bodies(PATH)[1]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("model", "effort", "expected_top", "expected_extra"),
    [
        ("deepseek-reasoner", "high", {}, {"thinking": {"type": "high"}}),
        ("Qwen/Qwen3-8B", "On", {}, {"enable_thinking": True}),
        ("glm-5.2", "none", {}, {"thinking": {"type": "disabled"}}),
        ("z-ai/glm-5.2", "max", {"reasoning_effort": "max"}, {"thinking": {"type": "enabled"}}),
        ("glm-4.6", "On", {}, {"thinking": {"type": "On"}}),
        ("llama-3", "low", {"reasoning_effort": "low"}, {}),
    ],
)
async def test_reasoning_effort_goes_where_the_model_family_expects_it(
    model: str,
    effort: str,
    expected_top: dict[str, Any],
    expected_extra: dict[str, Any],
    server: FakeServer,
    make_provider: ProviderFactory,
) -> None:
    server.queue(PATH, chat_json(Turn(text="ok")))
    request = ChatRequest(model=model, messages=[Message("user", "hi")], reasoning_effort=effort)
    await make_provider("chat").call(request)
    body = server.bodies(PATH)[0]
    sent = {k: v for k, v in body.items() if k not in ("model", "messages")}
    assert sent == {**expected_top, **expected_extra}


class _ToLocalServer(httpx2.AsyncBaseTransport):
    """Sends requests addressed to api.openai.com to the fake server, over real HTTP."""

    def __init__(self, server: FakeServer) -> None:
        self._port = int(server.url.rsplit(":", 1)[1])
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self._port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_official_openai_gets_no_compatible_server_extras(server: FakeServer) -> None:
    client = openai.AsyncOpenAI(
        api_key=API_KEY,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(transport=_ToLocalServer(server)),
    )
    server.queue(PATH, chat_json(Turn(text="ok")))
    async with client:
        provider = OpenAIChatProvider("gpt-4o", client=client)
        assert provider.is_official
        await provider.call(full_request())
        await provider.aclose()  # a passed-in client stays open
        assert not client.is_closed()
    body = server.bodies(PATH)[0]
    assert "top_k" not in body
    assert "reasoning_content" not in body["messages"][2]
    assert body["reasoning_effort"] == "high"


def test_client_and_connection_options_are_exclusive() -> None:
    client = openai.AsyncOpenAI(api_key="k")
    with pytest.raises(ValueError, match="base_url"):
        OpenAIChatProvider("m", client=client, base_url="http://x")


def test_missing_model_is_a_clear_error() -> None:
    provider = OpenAIChatProvider(api_key="k", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="no model"):
        provider.request_params(ChatRequest(messages=[Message("user", "x")]))


def _chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    data = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return None, {**data, "choices": [choice]}


def _call_delta(arguments: str, **fields: Any) -> dict[str, Any]:
    """A tool-call delta; ``fields`` may hold ``index``, ``id`` and ``name``."""
    delta: dict[str, Any] = {"function": {"arguments": arguments}}
    if "name" in fields:
        delta["function"]["name"] = fields.pop("name")
        delta["type"] = "function"
    return {"tool_calls": [{**delta, **fields}]}


async def _streamed_calls(
    server: FakeServer, make_provider: ProviderFactory, deltas: list[dict[str, Any]]
) -> list[tuple[str, str, str]]:
    events = [_chunk({"role": "assistant"}), *(_chunk(d) for d in deltas)]
    events += [_chunk({}, "tool_calls"), (None, "[DONE]")]
    server.queue(PATH, Reply(events=events))
    response = await make_provider("chat").call_stream(
        ChatRequest(messages=[Message("user", "hi")]), lambda _: None
    )
    assert response.stop_reason == "tool_use"
    return [(c.id, c.name, c.input) for c in response.message.tool_calls]


async def test_stream_assembles_interleaved_tool_call_deltas_by_index(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    calls = await _streamed_calls(
        server,
        make_provider,
        [
            _call_delta("", index=0, id="a", name="f"),
            _call_delta("", index=1, id="b", name="g"),
            _call_delta('{"x":', index=0),
            _call_delta('{"y":', index=1),
            _call_delta("1}", index=0),
            _call_delta("2}", index=1),
        ],
    )
    assert calls == [("a", "f", '{"x":1}'), ("b", "g", '{"y":2}')]


async def test_stream_without_indexes_opens_a_call_per_id(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    # Gemini's OpenAI-compatible endpoint sends no index; a delta without id continues.
    calls = await _streamed_calls(
        server,
        make_provider,
        [
            _call_delta('{"x":1}', id="a", name="f"),
            _call_delta('{"y":', id="b", name="g"),
            _call_delta("2}"),
        ],
    )
    assert calls == [("a", "f", '{"x":1}'), ("b", "g", '{"y":2}')]


async def test_stream_new_id_at_a_used_index_is_a_new_call(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    calls = await _streamed_calls(
        server,
        make_provider,
        [
            _call_delta('{"x":', index=0, id="a", name="f"),
            _call_delta("1}", index=0, id="a"),  # the same id repeated: the same call
            _call_delta('{"y":', index=0, id="b", name="g"),
            _call_delta("2}", index=0),
        ],
    )
    assert calls == [("a", "f", '{"x":1}'), ("b", "g", '{"y":2}')]


async def test_calls_without_ids_get_ids_by_position(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    body = chat_json(TURN).body
    for call in body["choices"][0]["message"]["tool_calls"]:
        del call["id"]
    server.queue(PATH, Reply(body=body))
    provider = make_provider("chat")
    response = await provider.call(ChatRequest(messages=[Message("user", "hi")]))
    assert [c.id for c in response.message.tool_calls] == ["call_0", "call_1"]
    streamed = await _streamed_calls(
        server, make_provider, [_call_delta("{}", index=0, name="f"), _call_delta("{}", index=1)]
    )
    assert [call_id for call_id, _, _ in streamed] == ["call_0", "call_1"]


@pytest.mark.parametrize(
    ("error", "expected", "status"),
    [
        (
            {"message": "This endpoint's maximum context length is 8192 tokens.", "code": 400},
            ContextWindowExceededError,
            400,
        ),
        (
            {"message": "Rate limit exceeded: free-models-per-min.", "code": 429},
            RateLimitError,
            429,
        ),
        ("upstream failed", ProviderAPIError, None),
    ],
    ids=["overflow", "rate-limit", "text"],
)
async def test_error_body_with_status_200_is_classified(
    error: Any,
    expected: type[LLMError],
    status: int | None,
    server: FakeServer,
    make_provider: ProviderFactory,
) -> None:
    server.queue(PATH, Reply(200, {"error": error, "user_id": "u1"}))
    with pytest.raises(LLMError) as caught:
        await make_provider("chat").call(ChatRequest(messages=[Message("user", "hi")]))
    assert type(caught.value) is expected
    assert caught.value.status_code == status
    assert "no choices" not in str(caught.value)


async def test_an_empty_reasoning_content_is_never_sent_to_a_compatible_server(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, chat_json(Turn(text="ok")))
    request = ChatRequest(
        messages=[
            Message("user", "hi"),
            Message("assistant", "thinking aloud", reasoning_content="why"),
            Message("user", "and?"),
            Message("assistant", "no reasoning here"),
            Message("user", "go on"),
        ]
    )
    await make_provider("chat").call(request)
    assistants = [m for m in server.bodies(PATH)[0]["messages"] if m["role"] == "assistant"]
    assert assistants[0]["reasoning_content"] == "why"
    assert "reasoning_content" not in assistants[1]
