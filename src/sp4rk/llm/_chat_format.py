"""The Chat Completions wire format, shared by every server that speaks it.

OpenAI, compatible servers (vLLM, llama.cpp, OpenRouter, DeepSeek, ...) and the in-process
``local`` provider (llama-cpp-python answers in the same shape) all go through these
functions, so a message is converted one way whatever serves it. Nothing here imports an SDK:
responses and stream chunks are plain dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sp4rk.llm._schema import openai_parameters
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
    sends each assistant message's ``reasoning_content`` back (always, even ``""``): DeepSeek
    and similar servers require it, the official OpenAI API does not know it.
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
            if reasoning_field:
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


def parse_chat_completion(data: dict[str, Any], *, provider: str) -> ChatResponse:
    """A ``chat.completion`` object (as a dict) as a :class:`ChatResponse`.

    Tool arguments stay the raw JSON text the model produced; a call the server gave no id
    gets ``call_<its position>``. ``reasoning_content`` (or ``reasoning``, OpenRouter's name)
    becomes both the message's reasoning and the response's.

    Raises:
        ProviderAPIError: when the response has no choices.
    """
    choices = data.get("choices") or []
    if not choices:
        raise ProviderAPIError(f"{provider}: the response has no choices", status_code=None)
    choice = choices[0]
    msg = choice.get("message") or {}
    calls = [
        ToolCall(
            c.get("id") or f"call_{position}",
            (c.get("function") or {}).get("name") or "",
            (c.get("function") or {}).get("arguments") or "{}",
        )
        for position, c in enumerate(msg.get("tool_calls") or [])
    ]
    reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
    finish = choice.get("finish_reason") or ""
    stop = _FINISH_REASONS.get(finish, finish)
    if calls and stop == "end_turn":  # some servers say "stop" after a tool call
        stop = "tool_use"
    usage = data.get("usage") or {}
    return ChatResponse(
        model=data.get("model") or "",
        message=Message(
            "assistant",
            content=msg.get("content") or "",
            reasoning_content=reasoning if isinstance(reasoning, str) else "",
            tool_calls=calls,
        ),
        reasoning=reasoning if isinstance(reasoning, str) else "",
        usage=TokenUsage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0),
        stop_reason=stop,
    )


class ChatStreamAssembler:
    """Rebuilds a ``chat.completion`` from ``chat.completion.chunk`` objects.

    Text deltas go to ``on_text`` as they arrive. Tool calls are assembled in slots, one per
    call (id and name from its first delta, arguments concatenated), so the result parses
    exactly like a non-streamed completion. A delta goes to the slot of its ``index``; a new
    ``id`` at an occupied index opens a new slot (a server that numbers every call 0), and a
    delta without ``index`` (Gemini's compatible endpoint) opens one when it carries an id,
    else continues the latest call.

    Args:
        on_text: called with each text delta.
        provider: the label used in error messages.
    """

    def __init__(self, on_text: Callable[[str], None], *, provider: str) -> None:
        self._on_text = on_text
        self._provider = provider
        self._model = ""
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[dict[str, Any]] = []
        self._slot_of_index: dict[int, int] = {}
        self._finish = ""
        self._usage: dict[str, Any] = {}

    def feed(self, chunk: dict[str, Any]) -> None:
        """Take one chunk."""
        self._model = self._model or chunk.get("model") or ""
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if text := delta.get("content"):
                self._content.append(text)
                self._on_text(text)
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str):
                self._reasoning.append(reasoning)
            for call in delta.get("tool_calls") or []:
                self._add_call_delta(call)
            self._finish = choice.get("finish_reason") or self._finish

    def _add_call_delta(self, delta: dict[str, Any]) -> None:
        slot = self._slot_for(delta.get("index"), delta.get("id"))
        slot["id"] = slot.get("id") or delta.get("id")
        function = delta.get("function") or {}
        slot["name"] = slot.get("name") or function.get("name")
        if function.get("arguments"):
            slot["arguments"].append(function["arguments"])

    def _slot_for(self, index: int | None, call_id: str | None) -> dict[str, Any]:
        """The slot a tool-call delta belongs to, opened when the delta starts a new call."""
        if index is None:
            current = self._calls[-1] if self._calls else None
        else:
            position = self._slot_of_index.get(index)
            current = None if position is None else self._calls[position]
        if current is None or (call_id and current.get("id") and call_id != current["id"]):
            current = {"arguments": []}
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
                "id": c.get("id"),
                "type": "function",
                "function": {"name": c.get("name") or "", "arguments": "".join(c["arguments"])},
            }
            for c in self._calls
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
            "usage": self._usage,
        }
