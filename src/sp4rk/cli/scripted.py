"""``--model scripted:FILE.json``: a model that replays replies from a file.

FILE is a JSON list of replies, each ``{"content": "...", "tool_calls": [{"name": "...",
"arguments": {...}}]}`` (either key optional; ``usage`` with ``input_tokens`` and
``output_tokens`` optional too). Reply *k* answers the conversation that holds *k - 1* model
turns, so a run resumed after a pause or a crash continues exactly where it stopped: a reply
whose calls were recorded is never replayed, and one the crash swallowed is given again.
Calls get the ids ``call_<k>_<i>`` unless the file names them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sp4rk._internal import safejson
from sp4rk.cli.errors import UsageProblem
from sp4rk.llm import ChatRequest, ChatResponse, LLMError, Message, TokenUsage, ToolCall

#: Largest script file read, in bytes.
MAX_SCRIPT_BYTES = 16 << 20
_REPLY_KEYS = {"content", "tool_calls", "usage"}
_CALL_KEYS = {"name", "arguments", "id"}


class ScriptModel:
    """Replays the replies in ``path`` (an ``LLMCaller`` that also streams).

    Raises:
        UsageProblem: the file cannot be read or is not a list of replies.
    """

    model = "scripted"
    """The name its replies carry (the executor prices calls by it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.replies = [_reply(item, i + 1, path) for i, item in enumerate(_read(path))]

    async def call(self, request: ChatRequest) -> ChatResponse:
        """The reply for this conversation."""
        turns = sum(1 for m in request.messages if m.role == "assistant")
        if turns >= len(self.replies):
            raise LLMError(
                f"the scripted model {self.path} has no reply left: it holds "
                f"{len(self.replies)} and the conversation already has {turns} model turns"
            )
        return _response(self.replies[turns], turns + 1)

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Like :meth:`call`, the text delivered word by word."""
        response = await self.call(request)
        words = response.message.content.split(" ") if response.message.content else []
        for i, word in enumerate(words):
            on_text(word if i == len(words) - 1 else word + " ")
        return response


def _read(path: Path) -> list[Any]:
    try:
        if path.stat().st_size > MAX_SCRIPT_BYTES:
            raise UsageProblem(f"the script {path} is larger than {MAX_SCRIPT_BYTES} bytes")
        data = safejson.loads(path.read_bytes())
    except OSError as exc:
        raise UsageProblem(f"cannot read the script {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise UsageProblem(f"the script {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, list) or not data:
        raise UsageProblem(f"the script {path} must be a non-empty JSON list of replies")
    return data


def _reply(item: Any, number: int, path: Path) -> dict[str, Any]:
    where = f"the script {path}, reply {number}"
    if not isinstance(item, dict) or set(item) - _REPLY_KEYS:
        raise UsageProblem(f"{where}: a reply is an object with content and/or tool_calls")
    if not isinstance(item.get("content", ""), str):
        raise UsageProblem(f"{where}: content must be a string")
    calls = item.get("tool_calls", [])
    if not isinstance(calls, list):
        raise UsageProblem(f"{where}: tool_calls must be a list")
    for call in calls:
        if (
            not isinstance(call, dict)
            or set(call) - _CALL_KEYS
            or not isinstance(call.get("name"), str)
            or not isinstance(call.get("arguments", {}), dict | str)
            or not isinstance(call.get("id", ""), str)
        ):
            raise UsageProblem(
                f'{where}: each tool call is {{"name": "...", "arguments": {{...}}}}'
            )
    usage = item.get("usage", {})
    if not isinstance(usage, dict) or not all(
        isinstance(usage.get(k, 0), int) for k in ("input_tokens", "output_tokens")
    ):
        raise UsageProblem(f"{where}: usage holds input_tokens and output_tokens (integers)")
    return item


def _response(reply: dict[str, Any], number: int) -> ChatResponse:
    calls = [
        ToolCall(
            c.get("id") or f"call_{number}_{i}",
            c["name"],
            c["arguments"]
            if isinstance(c.get("arguments"), str)
            else json.dumps(c.get("arguments", {})),
        )
        for i, c in enumerate(reply.get("tool_calls", []))
    ]
    usage = reply.get("usage", {})
    return ChatResponse(
        model=ScriptModel.model,
        message=Message("assistant", content=reply.get("content", ""), tool_calls=calls),
        usage=TokenUsage(usage.get("input_tokens", 0), usage.get("output_tokens", 0)),
        stop_reason="tool_use" if calls else "end_turn",
    )
