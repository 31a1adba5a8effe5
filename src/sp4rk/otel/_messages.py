"""Chat messages in the GenAI conventions' JSON shape, for content capture.

Every string is masked before it is serialised: masking JSON text afterwards would miss a
credential that serialisation escaped. Images are named by their media type, never exported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from sp4rk.llm.types import ChatResponse, Message

Redact = Callable[[str], str]

#: sp4rk's stop reasons in the conventions' words; others pass through unchanged.
FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_call", "max_tokens": "length"}


def finish_reason(stop_reason: str) -> str:
    """The conventions' finish reason for a provider's stop reason."""
    return FINISH_REASONS.get(stop_reason, stop_reason)


class PromptEncoder:
    """A run's prompts as ``gen_ai.system_instructions`` and ``gen_ai.input.messages``.

    Every request repeats the history, so each message is masked and serialised once per
    run and its JSON reused while the context manager keeps the same message (the memo holds
    it, so its id stays its own; a message whose content was replaced is encoded afresh).
    Past ``max_chars`` of JSON the memo starts over, which bounds its memory.
    """

    def __init__(self, redact: Redact, max_chars: int = 32_000_000) -> None:
        self._redact = redact
        self._max_chars = max_chars
        self._memo: dict[int, tuple[Message, str, str]] = {}
        self._chars = 0

    def attributes(self, messages: Sequence[Message]) -> dict[str, str]:
        """The two attributes of one request (no system instructions when it has none)."""
        system = [self._encode(m) for m in messages if m.role == "system"]
        rest = [self._encode(m) for m in messages if m.role != "system"]
        out = {"gen_ai.input.messages": "[" + ", ".join(rest) + "]"}
        if system:  # a system message is encoded as its parts, the list's brackets dropped
            out["gen_ai.system_instructions"] = "[" + ", ".join(s for s in system if s) + "]"
        return out

    def _encode(self, m: Message) -> str:
        hit = self._memo.get(id(m))
        if hit is not None and hit[0] is m and hit[1] is m.content:
            return hit[2]
        if m.role == "system":
            text = _dumps(_parts(m, self._redact))[1:-1]
        else:
            text = _dumps(_message(m, self._redact))
        if self._chars + len(text) > self._max_chars:
            self._memo.clear()
            self._chars = 0
        self._memo[id(m)] = (m, m.content, text)
        self._chars += len(text)
        return text


def output_messages(response: ChatResponse, redact: Redact) -> str:
    """``gen_ai.output.messages`` of a response, reasoning included."""
    message = _message(response.message, redact)
    if response.reasoning and not response.message.reasoning_content:
        message["parts"].insert(0, {"type": "reasoning", "content": redact(response.reasoning)})
    message["finish_reason"] = finish_reason(response.stop_reason)
    return _dumps([message])


def _message(m: Message, redact: Redact) -> dict[str, Any]:
    return {"role": m.role, "parts": _parts(m, redact)}


def _parts(m: Message, redact: Redact) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if m.reasoning_content:
        parts.append({"type": "reasoning", "content": redact(m.reasoning_content)})
    if m.role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": m.tool_call_id, "response": redact(m.content)}
        )
    elif m.content:
        parts.append({"type": "text", "content": redact(m.content)})
    for block in m.content_blocks:
        if block.type == "text":
            parts.append({"type": "text", "content": redact(block.text)})
        else:
            parts.append({"type": block.type, "mime_type": block.media_type})
    parts.extend(
        {"type": "tool_call", "id": c.id, "name": c.name, "arguments": redact(c.input)}
        for c in m.tool_calls
    )
    return parts


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)
