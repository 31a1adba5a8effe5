"""Malformed answers, named one by one, for every provider, JSON and streamed.

Each wrong shape is an ``LLMError`` whose message says "malformed answer" and where; token
counts of any shape come out as sane integers; text is repaired when it is read, so a lone
surrogate from a model cannot break the next request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sp4rk.llm.errors import LLMError
from sp4rk.llm.types import ChatRequest, Message
from tests.llm.conftest import ProviderFactory
from tests.llm.fakeserver import FakeServer, Reply
from tests.llm.faults import DELETE, REQUEST, TURN, frame, mutated, raw, sse, valid_body
from tests.llm.wire import WIRES, Turn

#: Where each part of an answer lives in each wire format's JSON body.
FIELDS: dict[str, dict[str, tuple[Any, ...]]] = {
    "the output list": {"chat": ("choices",), "responses": ("output",), "anthropic": ("content",)},
    "an output item": {
        "chat": ("choices", 0),
        "responses": ("output", 1),
        "anthropic": ("content", 1),
    },
    "the text": {
        "chat": ("choices", 0, "message", "content"),
        "responses": ("output", 1, "content", 0, "text"),
        "anthropic": ("content", 1, "text"),
    },
    "the tool calls": {
        "chat": ("choices", 0, "message", "tool_calls"),
        "responses": ("output", 2),
        "anthropic": ("content", 2),
    },
    "a tool-call name": {
        "chat": ("choices", 0, "message", "tool_calls", 0, "function", "name"),
        "responses": ("output", 2, "name"),
        "anthropic": ("content", 2, "name"),
    },
    "the reasoning": {
        "chat": ("choices", 0, "message", "reasoning_content"),
        "responses": ("output", 0, "summary"),
        "anthropic": ("content", 0, "thinking"),
    },
    "the model": {"chat": ("model",), "responses": ("model",), "anthropic": ("model",)},
}
WRONG = {"a number": 5, "a list": ["x"], "an object": {"a": 1}, "true": True}


def _json_cases() -> list[Any]:
    return [
        pytest.param(wire, field, bad, id=f"{wire}-{field}-{label}")
        for field, where in FIELDS.items()
        for wire in WIRES
        for label, bad in WRONG.items()
        # an object without a known type is an item of a kind sp4rk skips, not an error
        if not (wire != "chat" and bad == {"a": 1} and field != "the model")
        if not (bad == ["x"] and field in ("the output list", "the reasoning"))
    ]


@pytest.mark.parametrize(("wire", "field", "bad"), _json_cases())
async def test_a_field_of_the_wrong_type_is_a_malformed_answer(
    wire: str, field: str, bad: Any, server: FakeServer, make_provider: ProviderFactory
) -> None:
    path = FIELDS[field][wire]
    server.queue(WIRES[wire][0], Reply(body=mutated(valid_body(wire), path, bad)))
    with pytest.raises(LLMError) as caught:
        await make_provider(wire).call(REQUEST)
    message = str(caught.value)
    assert "malformed answer" in message or "did not answer a message" in message, message
    if "malformed" in message:
        assert str(path[-1]) in message or f"[{path[-1]}]" in message, message


ARGUMENTS = {
    "chat": ("choices", 0, "message", "tool_calls", 0, "function", "arguments"),
    "responses": ("output", 2, "arguments"),
    "anthropic": ("content", 2, "input"),
}


@pytest.mark.parametrize("bad", [{"path": "a"}, 5, ["path"], True], ids=repr)
@pytest.mark.parametrize("wire", list(WIRES))
async def test_tool_call_arguments_of_the_wrong_type_are_refused(
    wire: str, bad: Any, server: FakeServer, make_provider: ProviderFactory
) -> None:
    if wire == "anthropic" and isinstance(bad, dict):
        bad = "path=a"  # Anthropic's input is an object: a string is what is wrong there
    server.queue(WIRES[wire][0], Reply(body=mutated(valid_body(wire), ARGUMENTS[wire], bad)))
    with pytest.raises(LLMError, match=r"malformed answer: .*(arguments|input) is "):
        await make_provider(wire).call(REQUEST)


BODIES = {
    "null": b"null",
    "a list": b"[]",
    "a string": b'"hello"',
    "broken JSON": b'{"id": "x", "choices": [',
    "empty": b"",
    "NaN": b'{"model": NaN}',
    "nested 100000 deep": b"[" * 100_000 + b"]" * 100_000,
    "a 5000-digit number": b'{"n": ' + b"7" * 5000 + b"}",
}


@pytest.mark.parametrize("body", list(BODIES))
@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_body_that_is_not_an_answer_is_a_malformed_answer(
    wire: str, body: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(WIRES[wire][0], raw(BODIES[body]))
    with pytest.raises(LLMError, match="malformed answer: the body"):
        await make_provider(wire).call(REQUEST)


def _stream_with(wire: str, bad_event: str) -> Reply:
    events = WIRES[wire][2](TURN).events or []
    frames = [frame(data, event) for event, data in events]
    return sse(frames[0], bad_event, *frames[1:])


STREAM_FAULTS = {
    "broken JSON": frame("{broken"),
    "null": frame("null"),
    "a list": frame("[1, 2]"),
    "too deep": frame("[" * 5000 + "]" * 5000),
}


@pytest.mark.parametrize("fault", list(STREAM_FAULTS))
@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_broken_stream_event_is_a_malformed_answer(
    wire: str, fault: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(WIRES[wire][0], _stream_with(wire, STREAM_FAULTS[fault]))
    with pytest.raises(LLMError, match="malformed answer: stream event"):
        await make_provider(wire).call_stream(REQUEST, lambda _: None)


#: A wrong delta inside a well-formed event, per wire.
WRONG_DELTAS = {
    "chat": {"choices": [{"index": 0, "delta": {"content": 5}}]},
    "responses": {"type": "response.output_text.delta", "delta": ["x"]},
    "anthropic": {"type": "content_block_delta", "index": "0", "delta": {}},
}


@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_wrong_field_inside_a_stream_event_is_a_malformed_answer(
    wire: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    server.queue(WIRES[wire][0], _stream_with(wire, frame(WRONG_DELTAS[wire])))
    with pytest.raises(LLMError, match=r"malformed answer: .*(content|delta|index) is"):
        await make_provider(wire).call_stream(REQUEST, lambda _: None)


TOKENS = [
    (None, 0),
    ("12", 0),
    (-5, 0),
    (True, 0),
    ([3], 0),
    (2.7, 2),
    (10**30, 1_000_000_000),
    (1e308, 1_000_000_000),
]
USAGE = {
    "chat": [("usage", "prompt_tokens"), ("usage", "completion_tokens")],
    "responses": [("usage", "input_tokens"), ("usage", "output_tokens")],
    "anthropic": [("usage", "input_tokens"), ("usage", "output_tokens")],
}


@pytest.mark.parametrize(("value", "expected"), TOKENS, ids=[repr(v) for v, _ in TOKENS])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("wire", list(WIRES))
async def test_token_counts_of_any_shape_come_out_as_sane_ints(
    wire: str,
    stream: bool,
    value: Any,
    expected: int,
    server: FakeServer,
    make_provider: ProviderFactory,
) -> None:
    server.queue(WIRES[wire][0], _with_usage(wire, stream, value))
    provider = make_provider(wire)
    if stream:
        response = await provider.call_stream(REQUEST, lambda _: None)
    else:
        response = await provider.call(REQUEST)
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens) == (expected, expected)
    assert type(usage.total_tokens) is int


def _with_usage(wire: str, stream: bool, value: Any) -> Reply:
    if not stream:
        body = valid_body(wire)
        for path in USAGE[wire]:
            body = mutated(body, path, value)
        return Reply(body=body)
    events = list(WIRES[wire][2](TURN).events or [])
    for position, (event, data) in enumerate(events):
        if not isinstance(data, dict):
            continue
        if wire == "chat" and data.get("usage"):
            data = mutated(data, ("usage", "prompt_tokens"), value)
            data = mutated(data, ("usage", "completion_tokens"), value)
        elif wire == "responses" and event == "response.completed":
            data = mutated(data, ("response", "usage", "input_tokens"), value)
            data = mutated(data, ("response", "usage", "output_tokens"), value)
        elif wire == "anthropic" and event == "message_start":
            data = mutated(data, ("message", "usage", "input_tokens"), value)
            data = mutated(data, ("message", "usage", "output_tokens"), value)
        elif wire == "anthropic" and event == "message_delta":
            data = mutated(data, ("usage", "output_tokens"), value)
        events[position] = (event, data)
    return Reply(events=events)


def test_a_usage_that_is_not_an_object_counts_nothing() -> None:
    from sp4rk.llm._shape import Reader

    for usage in (None, 5, "x", [1, 2], {"input_tokens": float("inf")}, {"input_tokens": -1}):
        assert Reader("p").tokens(usage, "input_tokens") == 0
    assert Reader("p").tokens({"a": 10**9, "b": 10**9}, "a", "b") == 1_000_000_000


SURROGATE = "half \ud83d of a pair"


def _surrogate_turn() -> Turn:
    arguments = json.dumps({"path": SURROGATE})  # "\\ud83d": a lone surrogate once decoded
    return Turn(
        text=SURROGATE,
        calls=[("call_\ud800", "read_\udfff", arguments)],
        reasoning=[("rs_1", SURROGATE, "sig")],
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("wire", list(WIRES))
async def test_lone_surrogates_are_repaired_when_read_and_the_next_request_goes_out(
    wire: str, stream: bool, server: FakeServer, make_provider: ProviderFactory
) -> None:
    path, as_json, as_stream = WIRES[wire]
    server.queue(path, (as_stream if stream else as_json)(_surrogate_turn()))
    server.queue(path, as_json(Turn(text="fine")))
    provider = make_provider(wire)
    if stream:
        first = await provider.call_stream(REQUEST, lambda _: None)
    else:
        first = await provider.call(REQUEST)
    message = first.message
    texts = [message.content, first.reasoning, *(c.name for c in message.tool_calls)]
    texts += [c.input for c in message.tool_calls] + [c.id for c in message.tool_calls]
    for text in texts:
        text.encode("utf-8")  # no lone surrogate survived
    assert "\ufffd" in message.content
    follow_up = ChatRequest(
        messages=[*REQUEST.messages, message, Message("tool", "ok", tool_call_id="call_1")]
    )
    second = await provider.call(follow_up)
    assert second.message.content == "fine"


@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_request_holding_lone_surrogates_is_sent_repaired(
    wire: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    path, as_json, _ = WIRES[wire]
    server.queue(path, as_json(Turn(text="ok")))
    request = ChatRequest(
        messages=[
            Message("system", "sys \udc00"),
            Message("user", "broken \ud800 text"),
            Message(
                "assistant",
                "a \udfff",
                reasoning_content="r \ud800",
                tool_calls=[],
            ),
            Message("user", "again \ud801"),
        ]
    )
    await make_provider(wire).call(request)
    sent = json.dumps(server.bodies(path)[0], ensure_ascii=False)
    assert "\ufffd" in sent
    assert "broken" in sent
    assert "\\ud800" not in sent


@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_deeply_nested_tool_input_does_not_break_the_next_request(
    wire: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    path, as_json, _ = WIRES[wire]
    server.queue(path, as_json(Turn(text="ok")))
    deep = "[" * 100_000 + "]" * 100_000
    request = ChatRequest(
        messages=[
            Message("user", "go"),
            Message("assistant", "", tool_calls=[_call(deep)]),
            Message("tool", "done", tool_call_id="call_1"),
        ]
    )
    await make_provider(wire).call(request)
    assert len(server.bodies(path)) == 1


def _call(arguments: str) -> Any:
    from sp4rk.llm.types import ToolCall

    return ToolCall("call_1", "read_file", arguments)


def test_deleting_a_field_is_what_the_table_means_by_missing() -> None:
    body = {"a": {"b": 1}}
    assert mutated(body, ("a", "b"), DELETE) == {"a": {}}
    assert body == {"a": {"b": 1}}
