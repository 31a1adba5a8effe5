"""Encode one abstract model turn in each real wire format, as a JSON body or an SSE stream.

The same :class:`Turn` becomes a Chat Completions, Responses or Anthropic Messages answer, so a
scripted multi-step task can be served identically in all three formats. Streams split text
and tool arguments into several deltas (arguments cut mid-token) to exercise the assemblers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.llm.fakeserver import Reply

MODEL = "test-model"


@dataclass
class Turn:
    text: str = ""
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (id, name, raw args)
    reasoning: list[tuple[str, str, str]] = field(default_factory=list)  # (id, summary, secret)
    stop: str = ""  # "" = derived: tool_use when there are calls, else end_turn
    usage: tuple[int, int] = (100, 10)

    @property
    def stop_reason(self) -> str:
        return self.stop or ("tool_use" if self.calls else "end_turn")


def _pieces(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


# --- Chat Completions --------------------------------------------------------------------

_CHAT_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def chat_json(turn: Turn) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in turn.calls
        ]
    if turn.reasoning:
        message["reasoning_content"] = "\n".join(s for _, s, _ in turn.reasoning)
    return Reply(
        body={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL,
            "choices": [
                {"index": 0, "message": message, "finish_reason": _CHAT_FINISH[turn.stop_reason]}
            ],
            "usage": {
                "prompt_tokens": turn.usage[0],
                "completion_tokens": turn.usage[1],
                "total_tokens": sum(turn.usage),
            },
        }
    )


def chat_sse(turn: Turn) -> Reply:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
    reasoning = "\n".join(s for _, s, _ in turn.reasoning)
    events += [(None, chunk({"reasoning_content": p})) for p in _pieces(reasoning)]
    events += [(None, chunk({"content": piece})) for piece in _pieces(turn.text)]
    for index, (call_id, name, args) in enumerate(turn.calls):
        first = {"index": index, "id": call_id, "type": "function"}
        first["function"] = {"name": name, "arguments": ""}
        events.append((None, chunk({"tool_calls": [first]})))
        for piece in _pieces(args, 3):
            delta = {"index": index, "function": {"arguments": piece}}
            events.append((None, chunk({"tool_calls": [delta]})))
    events.append((None, chunk({}, _CHAT_FINISH[turn.stop_reason])))
    usage = {
        "prompt_tokens": turn.usage[0],
        "completion_tokens": turn.usage[1],
        "total_tokens": sum(turn.usage),
    }
    events.append((None, {**chunk({}), "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return Reply(events=events)


# --- Responses ---------------------------------------------------------------------------


def response_object(turn: Turn) -> dict[str, Any]:
    output: list[dict[str, Any]] = [
        {
            "type": "reasoning",
            "id": rid,
            "summary": [{"type": "summary_text", "text": summary}] if summary else [],
            "encrypted_content": secret or None,
        }
        for rid, summary, secret in turn.reasoning
    ]
    if turn.text:
        output.append(
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    output += [
        {
            "type": "function_call",
            "id": f"fc_{i}",
            "call_id": i,
            "name": n,
            "arguments": a,
            "status": "completed",
        }
        for i, n, a in turn.calls
    ]
    cut = turn.stop_reason == "max_tokens"
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": MODEL,
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": turn.usage[0],
            "output_tokens": turn.usage[1],
            "total_tokens": sum(turn.usage),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def responses_json(turn: Turn) -> Reply:
    return Reply(body=response_object(turn))


def responses_sse(turn: Turn) -> Reply:
    final = response_object(turn)
    started = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str | None, Any]] = [
        (
            "response.created",
            {"type": "response.created", "response": started, "sequence_number": 0},
        )
    ]
    for n, piece in enumerate(_pieces(turn.text), 1):
        delta = {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": piece,
            "sequence_number": n,
            "logprobs": [],
        }
        events.append(("response.output_text.delta", delta))
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    events.append((kind, {"type": kind, "response": final, "sequence_number": 99}))
    return Reply(events=events)


# --- Anthropic Messages -------------------------------------------------------------------


def _anthropic_blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": summary, "signature": secret}
        for _, summary, secret in turn.reasoning
    ]
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    blocks += [
        {"type": "tool_use", "id": i, "name": n, "input": _parsed(a)} for i, n, a in turn.calls
    ]
    return blocks


def _parsed(arguments: str) -> Any:
    """The JSON input of a tool_use block (``{}`` for scripted truncated arguments)."""
    try:
        return json.loads(arguments)
    except ValueError:
        return {}


def anthropic_json(turn: Turn) -> Reply:
    return Reply(
        body={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": _anthropic_blocks(turn),
            "stop_reason": turn.stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": turn.usage[0], "output_tokens": turn.usage[1]},
        }
    )


def anthropic_sse(turn: Turn) -> Reply:
    start: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": turn.usage[0], "output_tokens": 1},
    }
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    raw = {i: a for i, _, a in turn.calls}
    for index, block in enumerate(_anthropic_blocks(turn)):
        opening = dict(block)
        deltas: list[dict[str, Any]] = []
        if block["type"] == "text":
            opening["text"] = ""
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        elif block["type"] == "thinking":
            opening.update(thinking="", signature="")
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "tool_use":
            opening["input"] = {}
            pieces = _pieces(raw[block["id"]], 3)
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": turn.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": turn.usage[1]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return Reply(events=events)


# --- one table for parametrised tests ------------------------------------------------------

#: wire name -> (path, JSON encoder, SSE encoder)
WIRES = {
    "chat": ("/v1/chat/completions", chat_json, chat_sse),
    "responses": ("/v1/responses", responses_json, responses_sse),
    "anthropic": ("/v1/messages", anthropic_json, anthropic_sse),
}
