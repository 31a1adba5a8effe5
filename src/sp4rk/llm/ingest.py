"""A model's response, checked once where it enters: right types, valid text, sane numbers.

Any ``LLMCaller`` may hand back something odd — a custom caller, a test double, a provider fed
a hostile server. Text with a lone surrogate would crash the *next* request when it is
encoded; a token count that is a string, negative or infinite would crash the accounting. This
module repairs what can be repaired and reports the rest as an ``LLMError`` that says what
was wrong, so nothing else in the loop has to be defensive about it.
"""

from __future__ import annotations

import json
from typing import Any

from sp4rk._internal.text import valid_text
from sp4rk.llm._shape import token_count
from sp4rk.llm.errors import LLMError
from sp4rk.llm.types import ChatResponse, Message, ReasoningItem, TokenUsage, ToolCall


class MalformedResponseError(LLMError):
    """The model's response does not have the shape of a ``ChatResponse``."""


def checked_response(response: object) -> ChatResponse:
    """``response`` with valid text and sane token counts.

    Raises:
        MalformedResponseError: when it is not a ``ChatResponse`` or a part of it has a type
            that cannot be repaired.
    """
    if not isinstance(response, ChatResponse):
        raise MalformedResponseError(
            f"the LLM caller returned {type(response).__name__}, expected a ChatResponse"
        )
    message = response.message
    if not isinstance(message, Message):
        raise MalformedResponseError(
            f"response.message is {type(message).__name__}, expected a Message"
        )
    message.content = _text(message.content, "message.content")
    message.reasoning_content = _text(message.reasoning_content, "message.reasoning_content")
    if not isinstance(message.tool_calls, list):
        raise MalformedResponseError("message.tool_calls must be a list")
    message.tool_calls = [_call(c, i) for i, c in enumerate(message.tool_calls)]
    if not isinstance(message.reasoning_items, list) or not all(
        isinstance(r, ReasoningItem) for r in message.reasoning_items
    ):
        raise MalformedResponseError("message.reasoning_items must be a list of ReasoningItem")
    response.reasoning = _text(response.reasoning, "reasoning")
    response.stop_reason = _text(response.stop_reason, "stop_reason")
    response.model = _text(response.model, "model")
    usage = response.usage if isinstance(response.usage, TokenUsage) else TokenUsage()
    response.usage = TokenUsage(
        token_count(usage.input_tokens),
        token_count(usage.output_tokens),
        cached_input_tokens=token_count(usage.cached_input_tokens),
        cache_write_tokens=token_count(usage.cache_write_tokens),
    )
    return response


def _text(value: object, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedResponseError(f"{where} is {type(value).__name__}, expected text")
    return valid_text(value)


def _call(call: object, index: int) -> ToolCall:
    if not isinstance(call, ToolCall):
        raise MalformedResponseError(f"tool call {index} is {type(call).__name__}, not a ToolCall")
    raw: Any = call.input
    if isinstance(raw, dict | list):  # a caller that parsed the arguments already
        raw = json.dumps(raw, ensure_ascii=False)
    call.input = _text(raw, f"tool call {index} input")
    call.name = _text(call.name, f"tool call {index} name")
    call.id = _text(call.id, f"tool call {index} id")
    return call
