"""The Chat Completions wire format, shared by every server that speaks it.

OpenAI, compatible servers (vLLM, llama.cpp, OpenRouter, DeepSeek, ...) and the in-process
``local`` provider (llama-cpp-python answers in the same shape) all go through these
functions, so a message is converted one way whatever serves it. Nothing here imports an SDK:
responses and stream chunks are plain dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sp4rk.llm._schema import openai_parameters
from sp4rk.llm._shape import Reader
from sp4rk.llm.base import content_blocks, system_parts
from sp4rk.llm.errors import LLMConnectionError, ProviderAPIError
from sp4rk.llm.types import (
    ChatResponse,
    Message,
    TokenUsage,
    ToolCall,
    ToolDefinition,
)

_FINISH_REASONS = {
    "stop": "end_turn",
    "": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


def chat_messages(messages: Sequence[Message], *, reasoning_field: bool) -> list[dict[str, Any]]:
    """Messages in Chat Completions form.

    All system messages are hoisted into one leading system message. ``reasoning_field``
    sends each assistant message's non-empty ``reasoning_content`` back: DeepSeek and similar
    servers require it, the official OpenAI API does not know it, and some compatible
    servers reject the field, so an empty one is never sent.
    """
    system = "\n".join(system_parts(messages))
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.input or "{}"},
                    }
                    for c in m.tool_calls
                ]
            if reasoning_field and m.reasoning_content:
                item["reasoning_content"] = m.reasoning_content
            out.append(item)
        elif m.role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": m.tool_call_id,
                    "content": m.content or "(no output)",
                }
            )
        else:  # user, and any unknown role
            out.append({"role": "user", "content": _user_content(m)})
    return out


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    blocks = content_blocks(message)
    if blocks is None:
        return message.content
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if block.type == "text":
            parts.append({"type": "text", "text": block.text})
        elif block.type == "image":
            url = f"data:{block.media_type};base64,{block.image_b64}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def chat_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Function tools with OpenAI-sanitised parameter schemas (no ``strict``)."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": openai_parameters(t.input_schema),
            },
        }
        for t in tools
    ]


def parse_chat_completion(data: Any, *, provider: str) -> ChatResponse:
    """A ``chat.completion`` object (decoded JSON) as a :class:`ChatResponse`.

    Tool arguments stay the raw JSON text the model produced; a call the server gave no id
    gets ``call_<its position>``. ``reasoning_content`` (or ``reasoning``, OpenRouter's name)
    becomes both the message's reasoning and the response's. ``content`` may also be a list of
    text parts (some compatible servers send one). Text is repaired as it is read.

    Raises:
        ProviderAPIError: when the response has no choices.
        LLMError: a field has the wrong type (tool-call arguments that are not a string, for
            one), or a choice without its message.
    """
    read = Reader(provider)
    body = read.object(data, "the body")
    choices = read.items(body, "choices", "body")
    if not choices:
        raise ProviderAPIError(f"{provider}: the response has no choices", status_code=None)
    choice_where, choice = choices[0]
    msg = read.child(choice, "message", choice_where, required=True)
    where = f"{choice_where}.message"
    calls = [
        ToolCall(
            read.text(call, "id", call_where) or f"call_{position}",
            read.text(function, "name", f"{call_where}.function"),
            read.text(function, "arguments", f"{call_where}.function") or "{}",
        )
        for position, (call_where, call) in enumerate(read.items(msg, "tool_calls", where))
        for function in [read.child(call, "function", call_where, required=True)]
    ]
    reasoning = _reasoning(read, msg, where)
    stop = _stop_reason(read.text(choice, "finish_reason", choice_where), calls)
    usage = body.get("usage")
    return ChatResponse(
        model=read.text(body, "model", "body"),
        message=Message(
            "assistant",
            content=_content(read, msg, where),
            reasoning_content=reasoning,
            tool_calls=calls,
        ),
        reasoning=reasoning,
        usage=TokenUsage(
            read.tokens(usage, "prompt_tokens"),
            read.tokens(usage, "completion_tokens"),
            cached_input_tokens=read.tokens(
                usage.get("prompt_tokens_details") if isinstance(usage, dict) else None,
                "cached_tokens",
            ),
        ),
        stop_reason=stop,
    )


def _content(read: Reader, message: dict[str, Any], where: str) -> str:
    """A message's text: a string, or the text of a list of parts."""
    if isinstance(message.get("content"), list):
        return "".join(
            read.text(part, "text", part_where)
            for part_where, part in read.items(message, "content", where)
        )
    return read.text(message, "content", where)


def _reasoning(read: Reader, message: dict[str, Any], where: str) -> str:
    """``reasoning_content``, else ``reasoning`` (OpenRouter's name for it)."""
    return read.text(message, "reasoning_content", where) or read.text(message, "reasoning", where)


def _stop_reason(finish: str, calls: Sequence[ToolCall]) -> str:
    stop = _FINISH_REASONS.get(finish, finish)
    if calls and stop == "end_turn":  # some servers say "stop" after a tool call
        stop = "tool_use"
    return stop


class ChatStreamAssembler:
    """Rebuilds a ``chat.completion`` from ``chat.completion.chunk`` objects.

    Text deltas go to ``on_text`` as they arrive. Tool calls are assembled in slots, one per
    call (id and name from its first delta, arguments concatenated), so the result parses
    exactly like a non-streamed completion. A delta goes to the slot of its ``index``; a new
    ``id`` at an occupied index opens a new slot (a server that numbers every call 0), and a
    delta without ``index`` (Gemini's compatible endpoint) opens one when it carries an id,
    else continues the latest call. Every field is type-checked as it arrives.

    Args:
        on_text: called with each text delta.
        provider: the label used in error messages.
    """

    def __init__(self, on_text: Callable[[str], None], *, provider: str) -> None:
        self._on_text = on_text
        self._read = Reader(provider)
        self._provider = provider
        self._model = ""
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[_CallSlot] = []
        self._slot_of_index: dict[int, int] = {}
        self._finish = ""
        self._usage: Any = None
        self._chunks = 0

    def feed(self, chunk: Any) -> None:
        """Take one chunk (decoded JSON).

        Raises:
            LLMError: the chunk is not a well-formed ``chat.completion.chunk``.
        """
        read = self._read
        self._chunks += 1
        where = f"chunk {self._chunks}"
        chunk = read.object(chunk, where)
        self._model = self._model or read.text(chunk, "model", where)
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice_where, choice in read.items(chunk, "choices", where):
            if choice.get("index", 0) != 0:
                continue
            delta_where = f"{choice_where}.delta"
            delta = read.child(choice, "delta", choice_where)
            if text := _content(read, delta, delta_where):
                self._content.append(text)
                self._on_text(text)
            self._reasoning.append(_reasoning(read, delta, delta_where))
            for call_where, call in read.items(delta, "tool_calls", delta_where):
                self._add_call_delta(call, call_where)
            self._finish = read.text(choice, "finish_reason", choice_where) or self._finish

    def _add_call_delta(self, delta: dict[str, Any], where: str) -> None:
        read = self._read
        call_id = read.text(delta, "id", where)
        slot = self._slot_for(read.index(delta, "index", where), call_id)
        slot.id = slot.id or call_id
        function = read.child(delta, "function", where)
        slot.name = slot.name or read.text(function, "name", f"{where}.function")
        slot.arguments.append(read.text(function, "arguments", f"{where}.function"))

    def _slot_for(self, index: int | None, call_id: str) -> _CallSlot:
        """The slot a tool-call delta belongs to, opened when the delta starts a new call."""
        if index is None:
            current = self._calls[-1] if self._calls else None
        else:
            position = self._slot_of_index.get(index)
            current = None if position is None else self._calls[position]
        if current is None or (call_id and current.id and call_id != current.id):
            current = _CallSlot()
            self._calls.append(current)
            if index is not None:
                self._slot_of_index[index] = len(self._calls) - 1
        return current

    def completion(self) -> dict[str, Any]:
        """The assembled completion, in the non-streamed response shape.

        Raises:
            LLMConnectionError: (retryable) the stream ended before a chunk gave the
                ``finish_reason``: the connection was cut, and the text so far is partial.
        """
        if not self._finish:
            raise LLMConnectionError(
                f"{self._provider}: the stream ended before its final chunk (no finish_reason)",
                retryable=True,
            )
        calls = [
            {
                "id": slot.id,
                "type": "function",
                "function": {"name": slot.name, "arguments": "".join(slot.arguments)},
            }
            for slot in self._calls
        ]
        message = {
            "role": "assistant",
            "content": "".join(self._content),
            "reasoning_content": "".join(self._reasoning),
            "tool_calls": calls,
        }
        return {
            "model": self._model,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish}],
            "usage": self._usage if isinstance(self._usage, dict) else {},
        }


@dataclass(slots=True)
class _CallSlot:
    """A tool call being assembled from its deltas."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
