"""OpenAIResponsesProvider through the official SDK against a local Responses API server."""

from __future__ import annotations

import pytest

from sp4rk.llm.errors import ProviderAPIError
from sp4rk.llm.types import ChatRequest, Message, ReasoningItem, ToolCall
from tests.llm.conftest import ProviderFactory
from tests.llm.conversation import full_request
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.wire import Turn, responses_json, responses_sse

PATH = "/v1/responses"


async def test_request_maps_every_field(server: FakeServer, make_provider: ProviderFactory) -> None:
    server.queue(PATH, responses_json(Turn(text="ok")))
    await make_provider("responses").call(full_request())
    body = server.bodies(PATH)[0]
    assert body["instructions"] == "You are terse.\nPlan: step 1"
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Look at this"},
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,AAAA",
                    "detail": "auto",
                },
            ],
        },
        # the Anthropic thinking item of the same message is not sent
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "summary one"}],
        },
        {"role": "assistant", "content": "Reading."},
        {
            "type": "function_call",
            "call_id": "call:1",
            "name": "read_file",
            "arguments": '{"path": "a.txt"}',
        },
        {"type": "function_call_output", "call_id": "call:1", "output": "(no output)"},
        {"role": "user", "content": "continue"},
    ]
    assert body["max_output_tokens"] == 4000
    assert (body["temperature"], body["top_p"]) == (0.2, 0.9)
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert "store" not in body  # not sent to servers other than OpenAI
    assert "top_k" not in body
    assert "presence_penalty" not in body
    [tool] = body["tools"]
    assert tool["type"] == "function"
    assert tool["name"] == "read_file"
    assert tool["strict"] is True
    assert tool["parameters"]["required"] == ["path"]


async def test_reasoning_items_round_trip_with_encrypted_content(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    provider = make_provider("responses", store=False)
    first = Turn(
        reasoning=[("rs_A", "thinking about files", "enc-A")],
        calls=[("call_1", "read_file", '{"path": "a"}')],
    )
    server.queue(PATH, responses_json(first), responses_json(Turn(text="done")))
    user = Message("user", "go")
    response = await provider.call(ChatRequest(messages=[user]))
    assert response.message.reasoning_items == [ReasoningItem("rs_A", "thinking about files")]
    assert response.reasoning == response.message.reasoning_content == "thinking about files"

    history = [
        user,
        response.message,
        Message("tool", "contents", tool_call_id="call_1"),
    ]
    history[1].reasoning_items.append(ReasoningItem("rs_unknown", "from another process"))
    await provider.call(ChatRequest(messages=history))
    body = server.bodies(PATH)[1]
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    reasoning = [item for item in body["input"] if item.get("type") == "reasoning"]
    assert reasoning == [
        {
            "type": "reasoning",
            "id": "rs_A",
            "summary": [{"type": "summary_text", "text": "thinking about files"}],
            "encrypted_content": "enc-A",
        }
    ]


async def test_cut_at_the_output_limit_is_max_tokens_even_with_calls(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    turn = Turn(calls=[("c1", "read_file", '{"pa')], stop="max_tokens")
    server.queue(PATH, responses_json(turn))
    response = await make_provider("responses").call(ChatRequest(messages=[Message("user", "x")]))
    assert response.stop_reason == "max_tokens"
    assert response.message.tool_calls[0].input == '{"pa'


async def test_response_maps_calls_usage_and_stop(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    turn = Turn(text="Reading.", calls=[("call_7", "read_file", '{"path":"x"}')], usage=(50, 7))
    server.queue(PATH, responses_json(turn))
    response = await make_provider("responses").call(ChatRequest(messages=[Message("user", "x")]))
    assert response.message.content == "Reading."
    assert [(c.id, c.name, c.input) for c in response.message.tool_calls] == [
        ("call_7", "read_file", '{"path":"x"}')
    ]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (50, 7)
    assert response.stop_reason == "tool_use"


async def test_stream_fires_text_deltas_and_returns_the_final_response(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    turn = Turn(text="Streaming works", calls=[("call_1", "read_file", '{"path": "a"}')])
    server.queue(PATH, responses_json(turn), responses_sse(turn))
    provider = make_provider("responses")
    whole = await provider.call(ChatRequest(messages=[Message("user", "x")]))
    deltas: list[str] = []
    streamed = await provider.call_stream(
        ChatRequest(messages=[Message("user", "x")]), deltas.append
    )
    assert "".join(deltas) == "Streaming works"
    assert len(deltas) > 1
    assert streamed.to_dict() == whole.to_dict()
    assert server.bodies(PATH)[1]["stream"] is True


async def test_missing_responses_endpoint_says_so(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, Reply(404, {"detail": "Not Found"}))
    provider = make_provider("responses")
    with pytest.raises(ProviderAPIError, match="Responses API") as caught:
        await provider.call(ChatRequest(messages=[Message("user", "x")]))
    assert caught.value.status_code == 404


async def test_a_call_without_arguments_is_sent_with_an_empty_object(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(PATH, responses_json(Turn(text="ok")))
    history = [
        Message("user", "go"),
        Message("assistant", tool_calls=[ToolCall("c1", "list_files", "")]),
        Message("tool", "a.txt", tool_call_id="c1"),
    ]
    await make_provider("responses").call(ChatRequest(messages=history))
    [call] = [i for i in server.bodies(PATH)[0]["input"] if i.get("type") == "function_call"]
    assert call["arguments"] == "{}"
