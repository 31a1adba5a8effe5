"""``AnthropicProvider``: the Messages API through the official ``anthropic`` SDK."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

try:
    import anthropic
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "AnthropicProvider needs the official anthropic SDK: pip install 'sp4rk[anthropic]'"
    ) from exc

from sp4rk._internal import safejson
from sp4rk._internal.text import valid_text, valid_texts
from sp4rk.llm._answer import event_json, read_json, sse_events
from sp4rk.llm._errors_map import connection_error
from sp4rk.llm._schema import anthropic_input_schema
from sp4rk.llm._shape import Reader
from sp4rk.llm.base import (
    ANTHROPIC_REDACTED_PREFIX,
    ANTHROPIC_THINKING_PREFIX,
    SDKProvider,
    build_sdk_client,
    content_blocks,
    logger,
    system_parts,
)
from sp4rk.llm.errors import LLMConnectionError, LLMError, ProviderAPIError
from sp4rk.llm.types import (
    ChatRequest,
    ChatResponse,
    Message,
    ReasoningItem,
    TokenUsage,
    ToolCall,
)

#: ``max_tokens`` when the request leaves it at 0 (the API requires one).
DEFAULT_MAX_TOKENS = 8192
#: Thinking budget ceiling; smaller requests get half their ``max_tokens``.
MAX_THINKING_BUDGET = 32_000
_MIN_THINKING_BUDGET = 1024
#: The API accepts at most four ``cache_control`` breakpoints.
_MAX_CACHE_BREAKPOINTS = 4
_STOP_REASONS = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
}
#: Where the stream assembler keeps a tool input's streamed JSON text (not a wire field).
_RAW_INPUT = "_sp4rk_raw_input"
_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
#: Reasoning efforts the API takes as ``output_config.effort``.
_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
#: A Claude model name: family and version (``claude-opus-4-5-20251101`` is Opus 4.5; a
#: Bedrock or Vertex prefix or suffix around it is fine).
_CLAUDE_MODEL = re.compile(
    r"claude-(opus|sonnet|haiku|mythos|fable)(?:-(\d+)(?:-(\d{1,2}))?(?!\d))?"
)
#: The first version of each family that accepts ``output_config.effort`` (Anthropic's effort
#: documentation: Opus 4.5, Sonnet 4.6, Haiku 5.5 and later, every Mythos and Fable model).
_EFFORT_SINCE = {
    "opus": (4, 5),
    "sonnet": (4, 6),
    "haiku": (5, 5),
    "mythos": (0, 0),
    "fable": (0, 0),
}


class AnthropicProvider(SDKProvider[anthropic.AsyncAnthropic]):
    """Claude models through the Messages API.

    System messages become the ``system`` parameter (several parts are cached up to the last
    one); tool calls and results become ``tool_use`` / ``tool_result`` blocks, with ids
    reduced to the characters the API allows. ``reasoning_effort="On"`` enables extended
    thinking (budget: half of ``max_tokens``, at most 32 000; sampling parameters are then
    dropped, as the API requires); ``low`` ... ``max`` are sent as ``output_config.effort`` to
    the models known to accept it (Opus 4.5, Sonnet 4.6, Haiku 5.5 and later, Mythos, Fable)
    and ignored for others, like any other value. Thinking blocks come back as the response's
    ``reasoning`` and as ``Message.reasoning_items`` (the signature in the id), and are sent
    back with the assistant turn they belong to while thinking is on, as the API requires
    during tool use.

    Args:
        model: the model used when a request does not name one.
        api_key: the API key; ``None`` lets the SDK read ``ANTHROPIC_API_KEY`` (or
            ``ANTHROPIC_AUTH_TOKEN``, or its other credential sources).
        base_url: another endpoint speaking the Messages API (``None``: ``ANTHROPIC_BASE_URL``
            or Anthropic); a trailing ``/v1`` is fine in either.
        client: a ready ``anthropic.AsyncAnthropic`` (then leave the connection options
            unset; its own retry policy applies).
        max_retries: SDK retries of transient failures (408, 409, 429, 5xx, 529) with its
            backoff and ``Retry-After``; ``None`` keeps the SDK default (2).
        timeout: the total deadline of one call in seconds (connection, retries and every
            read; ``None``: 600 s); also the SDK's per-read timeout. Allowed with ``client``.
        default_headers: extra headers sent with every request.

    Raises:
        ValueError: ``client`` given together with connection options.
        LLMError: no credentials were given or found (the message names the variable to set).
    """

    name = "anthropic"

    sdk_error = anthropic.AnthropicError

    def __init__(
        self,
        model: str = "",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        options = {
            "api_key": api_key,
            "base_url": base_url,
            "max_retries": max_retries,
            "timeout": timeout,
            "default_headers": default_headers,
        }
        super().__init__(model, client, lambda: _build_client(options), options)

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Send ``request`` as one Messages API call."""
        params = self.request_params(request)
        messages = self.client.messages.with_streaming_response
        async with self.exchange(), messages.create(**params) as answer:
            data = await read_json(answer.http_response.aiter_bytes(), self.name)
        return self.parse_message(data)

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Stream the call; tool inputs keep the raw JSON text the model streamed."""
        params = self.request_params(request)
        params["stream"] = True
        assembler = _StreamAssembler(on_text, self.name)
        messages = self.client.messages.with_streaming_response
        async with self.exchange(), messages.create(**params) as answer:
            async for event in sse_events(answer.http_response.aiter_bytes(), self.name):
                data = event_json(event, self.name)
                if data.get("type") == "error" or event.name == "error":
                    raise self.api_error(None, data, "an error event in the stream")
                assembler.feed(data)
                if assembler.stopped:
                    break
        if not assembler.finished:
            raise LLMConnectionError(
                f"{self.name}: the stream ended before the message did (no message_delta "
                "or message_stop event)",
                retryable=True,
            )
        return self.parse_message(assembler.message())

    def translate(self, exc: Exception) -> LLMError:
        """The sp4rk exception for an ``anthropic`` SDK exception."""
        if isinstance(exc, anthropic.APIConnectionError):
            return connection_error(self.name, exc, self._secrets, self.base_url)
        if isinstance(exc, anthropic.APIStatusError):
            return self.api_error(exc.status_code, exc.body, exc.message)
        return LLMError(f"{self.name}: {self.redact(str(exc))}")

    def request_params(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for ``request``."""
        max_tokens = request.max_tokens if request.max_tokens > 0 else DEFAULT_MAX_TOKENS
        budget = MAX_THINKING_BUDGET if max_tokens > MAX_THINKING_BUDGET else max_tokens // 2
        thinking = request.reasoning_effort.lower() == "on" and budget >= _MIN_THINKING_BUDGET
        params: dict[str, Any] = {
            "model": self.resolve_model(request),
            "max_tokens": max_tokens,
            "messages": _messages(request.messages, with_thinking=thinking),
        }
        system = system_parts(request.messages)
        if len(system) == 1:
            params["system"] = system[0]
        elif system:
            cached = set(range(len(system) - 1)[-_MAX_CACHE_BREAKPOINTS:])
            params["system"] = [
                {"type": "text", "text": text}
                | ({"cache_control": {"type": "ephemeral"}} if i in cached else {})
                for i, text in enumerate(system)
            ]
        effort = request.reasoning_effort.lower()
        if thinking:
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        else:
            # The SDK no longer has keywords for sampling; the API and compatible servers
            # still read the fields when given.
            sampling = {
                name: getattr(request, name)
                for name in ("temperature", "top_p", "top_k")
                if getattr(request, name) is not None
            }
            if sampling:
                params["extra_body"] = sampling
        if effort in _EFFORTS and supports_effort(params["model"]):
            params["output_config"] = {"effort": effort}
        if request.tools:
            params["tools"] = [
                {
                    "name": t.name,
                    "description": t.description,
                    "input_schema": anthropic_input_schema(t.input_schema),
                }
                for t in request.tools
            ]
        logger.debug(
            "anthropic: model=%s messages=%d tools=%d thinking=%s",
            params["model"],
            len(params["messages"]),
            len(request.tools),
            thinking,
        )
        sendable: dict[str, Any] = valid_texts(params)  # lone surrogates cannot be sent
        return sendable

    def parse_message(self, data: Any) -> ChatResponse:
        """A Messages API ``message`` (decoded JSON) as a :class:`ChatResponse`.

        Raises:
            LLMError: for an error body delivered with status 200, or a body that is not a
                well-formed message.
        """
        read = Reader(self.name)
        body = read.object(data, "the body")
        if body.get("type") == "error":
            raise self.api_error(None, body, "an error answered with HTTP 200")
        if not isinstance(body.get("content"), list):
            raw = self.redact(json.dumps(body, default=str))[:2048]
            raise ProviderAPIError(f"{self.name}: the endpoint did not answer a message: {raw}")
        texts: list[str] = []
        thoughts: list[str] = []
        items: list[ReasoningItem] = []
        calls: list[ToolCall] = []
        for where, block in read.items(body, "content", "body"):
            kind = read.text(block, "type", where)
            if kind == "text":
                texts.append(read.text(block, "text", where))
            elif kind == "thinking":
                thoughts.append(read.text(block, "thinking", where))
                signature = read.text(block, "signature", where)
                items.append(ReasoningItem(ANTHROPIC_THINKING_PREFIX + signature, thoughts[-1]))
            elif kind == "redacted_thinking":
                data_text = read.text(block, "data", where)
                items.append(ReasoningItem(ANTHROPIC_REDACTED_PREFIX + data_text))
            elif kind == "tool_use":
                calls.append(
                    ToolCall(
                        read.text(block, "id", where),
                        read.text(block, "name", where),
                        _tool_input(read, block, where),
                    )
                )
        usage = body.get("usage")
        input_tokens = read.tokens(
            usage, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"
        )
        stop = read.text(body, "stop_reason", "body")
        return ChatResponse(
            model=read.text(body, "model", "body"),
            message=Message(
                "assistant", content="\n".join(texts), tool_calls=calls, reasoning_items=items
            ),
            reasoning="\n".join(thoughts),
            usage=TokenUsage(
                input_tokens,
                read.tokens(usage, "output_tokens"),
                cached_input_tokens=read.tokens(usage, "cache_read_input_tokens"),
                cache_write_tokens=read.tokens(usage, "cache_creation_input_tokens"),
            ),
            stop_reason=_STOP_REASONS.get(stop, stop),
        )


def _tool_input(read: Reader, block: dict[str, Any], where: str) -> str:
    """A ``tool_use`` block's input as JSON text: as streamed, else the ``input`` object."""
    if _RAW_INPUT in block:
        return read.text(block, _RAW_INPUT, where)
    arguments = read.child(block, "input", where)
    return valid_text(json.dumps(arguments, ensure_ascii=False))


def supports_effort(model: str) -> bool:
    """Whether ``model`` is a Claude model known to accept ``output_config.effort``."""
    match = _CLAUDE_MODEL.search(model.lower())
    if match is None:
        return False
    family, major, minor = match.groups()
    return (int(major or 0), int(minor or 0)) >= _EFFORT_SINCE[family]


def _build_client(options: Mapping[str, object]) -> anthropic.AsyncAnthropic:
    base_url = options.get("base_url") or os.environ.get("ANTHROPIC_BASE_URL")
    if isinstance(base_url, str) and base_url:
        # The SDK's paths start with /v1; accept base URLs written with it too.
        options = {**options, "base_url": re.sub(r"/v1/?$", "", base_url.rstrip("/"))}
    client = build_sdk_client(
        "anthropic",
        anthropic.AsyncAnthropic,
        anthropic.DefaultAsyncHttpxClient,
        anthropic.AnthropicError,
        options,
    )
    if not _has_credentials(client):
        # The SDK would only fail at the first call, with a bare TypeError.
        raise LLMError(
            "anthropic: no API key: pass api_key=... or set ANTHROPIC_API_KEY "
            "(or ANTHROPIC_AUTH_TOKEN)"
        )
    return client


def _has_credentials(client: anthropic.AsyncAnthropic) -> bool:
    """Whether the client can authenticate (key, token, credentials provider or auth header)."""
    if getattr(client, "credentials", None) is not None:
        return True
    headers = {name.lower() for name, value in client.default_headers.items() if value}
    return bool(headers & {"x-api-key", "authorization"})


def _tool_id(call_id: str) -> str:
    """``call_id`` in the characters the API allows, distinct ids staying distinct.

    An id that needs no change is kept; a changed one gets a short hash of the original, so
    ``a:b`` and ``a.b`` do not both become ``a_b``.
    """
    safe = _BAD_ID_CHARS.sub("_", call_id)
    if safe == call_id:
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8")).hexdigest()[:8]
    return f"{safe}_{digest}"


def _messages(messages: Sequence[Message], *, with_thinking: bool) -> list[dict[str, Any]]:
    """Non-system messages as Messages API turns; consecutive same-role turns are merged.

    Raises:
        ValueError: for a role the API has no place for.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "user":
            role, blocks = "user", _user_blocks(m)
        elif m.role == "assistant":
            role, blocks = "assistant", _assistant_blocks(m, with_thinking=with_thinking)
        elif m.role == "tool":
            role = "user"
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": _tool_id(m.tool_call_id),
                    "content": m.content or "(no output)",
                    "is_error": False,
                }
            ]
        else:
            raise ValueError(f"anthropic: a message with role {m.role!r} cannot be sent")
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    blocks = content_blocks(message)
    if blocks is None:
        return [{"type": "text", "text": message.content}] if message.content else []
    out: list[dict[str, Any]] = []
    for block in blocks:
        if block.type == "text":
            out.append({"type": "text", "text": block.text})
        elif block.type == "image":
            source = {"type": "base64", "media_type": block.media_type, "data": block.image_b64}
            out.append({"type": "image", "source": source})
    return out


def _assistant_blocks(message: Message, *, with_thinking: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in message.reasoning_items if with_thinking else ():
        if item.id.startswith(ANTHROPIC_THINKING_PREFIX):
            signature = item.id.removeprefix(ANTHROPIC_THINKING_PREFIX)
            out.append({"type": "thinking", "thinking": item.summary, "signature": signature})
        elif item.id.startswith(ANTHROPIC_REDACTED_PREFIX):
            data = item.id.removeprefix(ANTHROPIC_REDACTED_PREFIX)
            out.append({"type": "redacted_thinking", "data": data})
    if message.content:
        out.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        try:  # the model's text: bounded, it may be hostile
            arguments = safejson.loads(call.input) if call.input else {}
        except ValueError:
            arguments = {}
        out.append(
            {
                "type": "tool_use",
                "id": _tool_id(call.id),
                "name": call.name,
                "input": arguments if isinstance(arguments, dict) else {},
            }
        )
    return out


class _StreamAssembler:
    """Rebuilds a ``message`` from Messages API stream events (decoded JSON), type-checked.

    Tool inputs are kept as the concatenated raw ``partial_json`` text, so a malformed or
    truncated input reaches the executor as the model wrote it. An event without ``index``
    (a non-compliant server) refers to the block opened last.
    """

    def __init__(self, on_text: Callable[[str], None], provider: str) -> None:
        self._on_text = on_text
        self._read = Reader(provider)
        self._message: dict[str, Any] = {"content": [], "usage": {}}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._raw_inputs: dict[int, list[str]] = {}
        self._current = 0
        self.finished = False
        """Whether the stream said how the message ended (``message_delta`` or
        ``message_stop``); a stream cut short ends without either."""
        self.stopped = False
        """Whether ``message_stop`` arrived: nothing after it matters."""

    def feed(self, event: dict[str, Any]) -> None:
        """Take one event.

        Raises:
            LLMError: a field of the event has the wrong type.
        """
        read = self._read
        kind = read.text(event, "type", "stream event")
        where = f"{kind or 'stream'} event"
        if kind == "message_start":
            message = read.child(event, "message", where, required=True)
            usage = message.get("usage")  # counts never fail a call: read leniently later
            self._message = {**message, "content": [], "usage": _as_dict(usage)}
        elif kind == "content_block_start":
            block = dict(read.child(event, "content_block", where, required=True))
            block_type = read.text(block, "type", f"{where}.content_block")
            for key in ("text", "thinking", "signature"):  # deltas are appended to these
                if key in block:
                    block[key] = read.text(block, key, f"{where}.content_block")
            if block_type == "text" and any(b.get("type") == "text" for b in self._blocks.values()):
                self._on_text("\n")  # text blocks are joined with newlines
            index = read.index(event, "index", where)
            self._current = len(self._blocks) if index is None else index
            self._blocks[self._current] = block
            if block_type == "tool_use":
                self._raw_inputs[self._current] = []
        elif kind == "content_block_delta":
            index = read.index(event, "index", where)
            delta = read.child(event, "delta", where)
            self._delta(self._current if index is None else index, delta, f"{where}.delta")
        elif kind == "message_delta":
            self.finished = True
            delta = read.child(event, "delta", where)
            self._message["stop_reason"] = read.text(delta, "stop_reason", f"{where}.delta")
            usage = _as_dict(event.get("usage"))
            self._message["usage"].update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            self.finished = self.stopped = True

    def _delta(self, index: int, delta: dict[str, Any], where: str) -> None:
        read = self._read
        block = self._blocks.setdefault(index, {})
        kind = read.text(delta, "type", where)
        if kind == "text_delta":
            text = read.text(delta, "text", where)
            block["text"] = (block.get("text") or "") + text
            if text:
                self._on_text(text)
        elif kind == "thinking_delta":
            block["thinking"] = (block.get("thinking") or "") + read.text(delta, "thinking", where)
        elif kind == "signature_delta":
            block["signature"] = read.text(delta, "signature", where)
        elif kind == "input_json_delta":
            self._raw_inputs.setdefault(index, []).append(read.text(delta, "partial_json", where))

    def message(self) -> dict[str, Any]:
        """The assembled message, in the non-streamed response shape."""
        for index, parts in self._raw_inputs.items():
            self._blocks[index][_RAW_INPUT] = "".join(parts) or "{}"
        self._message["content"] = [self._blocks[i] for i in sorted(self._blocks)]
        return self._message


def _as_dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}
