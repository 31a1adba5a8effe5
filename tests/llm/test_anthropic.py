"""AnthropicProvider through the official SDK against a local Messages API server."""

from __future__ import annotations

import anthropic
import pytest

from sp4rk.llm import AnthropicProvider
from sp4rk.llm.errors import ProviderOverloadedError
from sp4rk.llm.types import ChatRequest, Message, ReasoningItem
from tests.llm.conftest import API_KEY, ProviderFactory
from tests.llm.conversation import full_request
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import Turn, anthropic_json, anthropic_sse

PATH = "/v1/messages"


async def test_request_maps_every_field(server: FakeServer, make_provider: ProviderFactory) -> None:
    server.queue(PATH, anthropic_json(Turn(text="ok")))
    await make_provider("anthropic").call(full_request())
    received = server.received[0]
    body = received.body
    auth = received.headers.get("x-api-key") or received.headers.get("authorization", "")
    assert auth.removeprefix("Bearer ") == API_KEY
    assert body["model"] == "test-model"
    assert body["max_tokens"] == 4000
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Plan: step 1"},
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look at this"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "read_file",
                    "input": {"path": "a.txt"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_1",
                    "content": "(no output)",
                    "is_error": False,
                },
                {"type": "text", "text": "continue"},
            ],
        },
    ]
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.2, 0.9, 40)
    assert "presence_penalty" not in body
    assert "thinking" not in body
    assert body["output_config"] == {"effort": "high"}
    assert body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "File path."}},
                "required": ["path"],
                "additionalProperties": False,
            },
        }
    ]


async def test_thinking_on_sends_budget_drops_sampling_and_returns_thinking_blocks(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, anthropic_json(Turn(text="ok")))
    await make_provider("anthropic").call(full_request(reasoning_effort="On"))
    body = server.bodies(PATH)[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert not {"temperature", "top_p", "top_k"} & set(body)
    assistant = body["messages"][1]["content"]
    # the thinking block goes back first, with its signature; the OpenAI item does not
    assert assistant[0] == {"type": "thinking", "thinking": "thought one", "signature": "sig-1"}
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use"]


async def test_single_system_part_is_a_string_and_default_max_tokens(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, anthropic_json(Turn(text="ok")))
    request = ChatRequest(messages=[Message("system", "Be brief."), Message("user", "hi")])
    await make_provider("anthropic").call(request)
    body = server.bodies(PATH)[0]
    assert body["system"] == "Be brief."
    assert body["max_tokens"] == 8192
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


TURN = Turn(
    text="Reading now.",
    calls=[("toolu_1", "read_file", '{"path": "a b.txt"}')],
    reasoning=[("", "Let me think.", "sig-xyz")],
    usage=(1200, 34),
)


async def test_response_keeps_thinking_as_reasoning_and_round_trips_it(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    body = anthropic_json(TURN).body
    body["content"].insert(1, {"type": "redacted_thinking", "data": "opaque"})
    body["usage"].update(cache_creation_input_tokens=100, cache_read_input_tokens=50)
    server.queue(PATH, Reply(body=body), anthropic_json(Turn(text="done")))
    provider = make_provider("anthropic")
    response = await provider.call(ChatRequest(messages=[Message("user", "go")]))
    assert response.reasoning == "Let me think."
    assert response.message.reasoning_content == ""
    assert response.message.reasoning_items == [
        ReasoningItem("thinking:sig-xyz", "Let me think."),
        ReasoningItem("redacted_thinking:opaque", ""),
    ]
    assert response.message.tool_calls[0].input == '{"path": "a b.txt"}'
    assert (response.usage.input_tokens, response.usage.output_tokens) == (1350, 34)
    assert response.stop_reason == "tool_use"

    history = [
        Message("user", "go"),
        response.message,
        Message("tool", "text", tool_call_id="toolu_1"),
    ]
    await provider.call(ChatRequest(messages=history, reasoning_effort="On", max_tokens=4096))
    sent = server.bodies(PATH)[1]["messages"][1]["content"]
    assert sent[:2] == [
        {"type": "thinking", "thinking": "Let me think.", "signature": "sig-xyz"},
        {"type": "redacted_thinking", "data": "opaque"},
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("stop_sequence", "end_turn"), ("max_tokens", "max_tokens"), ("refusal", "refusal")],
)
async def test_stop_reasons(
    raw: str, expected: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, anthropic_json(Turn(text="x", stop=raw)))
    response = await make_provider("anthropic").call(ChatRequest(messages=[Message("user", "x")]))
    assert response.stop_reason == expected


async def test_stream_keeps_raw_tool_input_and_matches_the_plain_call(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, anthropic_json(TURN), anthropic_sse(TURN))
    provider = make_provider("anthropic")
    whole = await provider.call(ChatRequest(messages=[Message("user", "go")]))
    deltas: list[str] = []
    streamed = await provider.call_stream(
        ChatRequest(messages=[Message("user", "go")]), deltas.append
    )
    assert deltas == ["Read", "ing ", "now."]
    assert streamed.to_dict() == whole.to_dict()
    assert server.bodies(PATH)[1]["stream"] is True


async def test_stream_truncated_tool_input_stays_raw(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    turn = Turn(calls=[("toolu_1", "read_file", '{"path": "a')], stop="max_tokens")
    server.queue(PATH, anthropic_sse(turn))
    response = await make_provider("anthropic").call_stream(
        ChatRequest(messages=[Message("user", "go")]), lambda _: None
    )
    assert response.stop_reason == "max_tokens"
    assert response.message.tool_calls[0].input == '{"path": "a'


async def test_error_body_with_status_200_is_an_error(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.queue(PATH, Reply(200, body))
    with pytest.raises(ProviderOverloadedError):
        await make_provider("anthropic").call(ChatRequest(messages=[Message("user", "x")]))


async def test_base_url_with_v1_suffix_is_accepted(server: FakeServer) -> None:
    server.queue(PATH, anthropic_json(Turn(text="ok")))
    async with AnthropicProvider(
        "m", api_key=API_KEY, base_url=server.url + "/v1/", max_retries=0
    ) as provider:
        response = await provider.call(ChatRequest(messages=[Message("user", "x")]))
    assert response.message.content == "ok"
    assert server.received[0].path == PATH


def test_unknown_role_is_refused() -> None:
    provider = AnthropicProvider("m", client=anthropic.AsyncAnthropic(api_key="k"))
    bad = Message("user", "x")
    bad.role = "robot"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="robot"):
        provider.request_params(ChatRequest(messages=[bad]))
