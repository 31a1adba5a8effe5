"""Chat types round-trip through plain JSON; token counting; the scripted test doubles."""

from __future__ import annotations

import json

import pytest

from sp4rk.llm import (
    ChatRequest,
    ChatResponse,
    ContentBlock,
    ContextWindowExceededError,
    LLMError,
    Message,
    RateLimitError,
    ReasoningItem,
    SimpleTokenCounter,
    TokenCounter,
    TokenUsage,
    ToolCall,
    ToolDefinition,
)
from sp4rk.llm.testing import (
    FunctionLLM,
    ScriptedLLM,
    ScriptExhaustedError,
    finish_response,
    text_response,
    tool_calls_response,
)


def full_request() -> ChatRequest:
    return ChatRequest(
        model="gpt",
        messages=[
            Message("system", content="be brief"),
            Message(
                "user",
                content_blocks=[
                    ContentBlock("text", text="look"),
                    ContentBlock("image", image_b64="AAA=", media_type="image/png"),
                ],
            ),
            Message(
                "assistant",
                content="t",
                reasoning_content="r",
                tool_calls=[ToolCall("c1", "read", '{"p": 1}')],
                reasoning_items=[ReasoningItem("rs_1", "sum")],
            ),
            Message("tool", content="out", tool_call_id="c1"),
        ],
        tools=[ToolDefinition("read", "reads", {"type": "object"})],
        max_tokens=100,
        call_purpose="executor",
        temperature=0.2,
        top_k=5,
        reasoning_effort="high",
    )


def test_request_and_response_round_trip_through_json() -> None:
    request = full_request()
    data = json.loads(json.dumps(request.to_dict()))
    assert ChatRequest.from_dict(data) == request
    response = ChatResponse(
        model="m",
        message=Message("assistant", content="x"),
        reasoning="why",
        usage=TokenUsage(3, 4),
        stop_reason="end_turn",
    )
    assert ChatResponse.from_dict(json.loads(json.dumps(response.to_dict()))) == response
    assert response.usage.total_tokens == 7


def test_from_dict_ignores_unknown_keys_and_rejects_wrong_shapes() -> None:
    assert ToolCall.from_dict({"id": "a", "name": "b", "input": "{}", "future": 1}) == ToolCall(
        "a", "b", "{}"
    )
    with pytest.raises(TypeError):
        Message.from_dict({"role": "user", "tool_calls": "nope"})


def test_simple_token_counter() -> None:
    counter = SimpleTokenCounter()
    assert isinstance(counter, TokenCounter)
    assert counter.count("") == 0 and counter.count("abcd") == 1 and counter.count("abcde") == 2
    assert counter.count("é" * 4) == 2  # 8 bytes
    assert counter.count_messages([Message("user", content="abcd")]) == 1 + 1 + 4
    image = Message("user", content_blocks=[ContentBlock("image", image_b64="x", media_type="p")])
    assert counter.count_messages([image]) == 765 + 1 + 4


def test_error_hierarchy() -> None:
    err = RateLimitError("slow down", status_code=429, retryable=True)
    assert isinstance(err, LLMError) and err.status_code == 429 and err.retryable
    assert issubclass(ContextWindowExceededError, LLMError)
    assert LLMError("x").status_code is None


async def test_scripted_llm_replays_records_and_reports_leftovers() -> None:
    llm = ScriptedLLM(
        [
            tool_calls_response(("a", {"x": 1}), ("b", "{bad")),
            text_response("hi"),
            lambda req: finish_response(f"{len(req.messages)} messages"),
        ]
    )
    first = await llm.call(ChatRequest(messages=[Message("user", content="q")]))
    assert [c.id for c in first.message.tool_calls] == ["call_1_0", "call_1_1"]
    assert first.message.tool_calls[1].input == "{bad"
    with pytest.raises(AssertionError, match="2 unused"):
        llm.assert_complete()
    await llm.call(ChatRequest())
    third = await llm.call(ChatRequest(messages=[Message("user"), Message("user")]))
    assert json.loads(third.message.tool_calls[0].input) == {"answer": "2 messages"}
    llm.assert_complete()
    assert len(llm.requests) == 3
    with pytest.raises(ScriptExhaustedError, match="ran out of responses"):
        await llm.call(ChatRequest())


async def test_an_exhausted_script_names_what_the_model_was_told_last() -> None:
    rejected = "Finish rejected: You are finishing a non-trivial task without a checklist."
    request = ChatRequest(
        messages=[
            Message("user", content="the task"),
            Message("assistant", tool_calls=[ToolCall("c1", "finish", "{}")]),
            Message("tool", content=rejected, tool_call_id="c1"),
        ]
    )
    with pytest.raises(ScriptExhaustedError) as caught:
        await ScriptedLLM([]).call(request)
    text = str(caught.value)
    assert "(a tool result): 'Finish rejected: You are finishing" in text
    assert "set_checklist_gate_enabled(False)" in text
    with pytest.raises(ScriptExhaustedError) as caught:
        await ScriptedLLM([]).call(ChatRequest(messages=[Message("user", content="hello")]))
    assert "(a message): 'hello'" in str(caught.value)
    with pytest.raises(ScriptExhaustedError) as caught:
        await ScriptedLLM([]).call(ChatRequest())
    assert "told" not in str(caught.value)


async def test_scripted_exceptions_are_raised_in_turn() -> None:
    llm = ScriptedLLM([ContextWindowExceededError("too long"), text_response("ok")])
    with pytest.raises(ContextWindowExceededError):
        await llm.call(ChatRequest())
    assert (await llm.call(ChatRequest())).message.content == "ok"


async def test_recorded_requests_are_snapshots() -> None:
    llm = ScriptedLLM([text_response("a")])
    request = ChatRequest(messages=[Message("user", content="q")])
    await llm.call(request)
    request.messages.append(Message("user", content="later"))
    assert len(llm.requests[0].messages) == 1


async def test_function_llm_accepts_sync_and_async_functions() -> None:
    async def async_fn(req: ChatRequest) -> ChatResponse:
        return text_response("async")

    assert (
        await FunctionLLM(lambda r: text_response("sync")).call(ChatRequest())
    ).message.content == "sync"
    llm = FunctionLLM(async_fn)
    assert (await llm.call(ChatRequest(model="m"))).message.content == "async"
    assert llm.requests[0].model == "m"
