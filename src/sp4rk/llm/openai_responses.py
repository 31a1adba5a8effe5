"""``OpenAIResponsesProvider``: OpenAI's Responses API, with reasoning items round-tripped."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sp4rk._internal.text import valid_texts
from sp4rk.llm._answer import event_json, read_json, sse_events
from sp4rk.llm._openai_common import OpenAIProviderBase
from sp4rk.llm._schema import openai_strict_parameters
from sp4rk.llm._shape import Reader
from sp4rk.llm.base import (
    ANTHROPIC_REDACTED_PREFIX,
    ANTHROPIC_THINKING_PREFIX,
    content_blocks,
    logger,
    system_parts,
)
from sp4rk.llm.errors import LLMConnectionError, LLMError
from sp4rk.llm.types import (
    ChatRequest,
    ChatResponse,
    Message,
    ReasoningItem,
    TokenUsage,
    ToolCall,
    ToolDefinition,
)

if TYPE_CHECKING:
    import openai

_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})
#: Encrypted reasoning kept per provider for the round trip (oldest dropped first).
_MAX_REMEMBERED = 4096


class OpenAIResponsesProvider(OpenAIProviderBase):
    """The Responses API through the official ``openai`` SDK.

    Reasoning items come back as ``Message.reasoning_items`` and are sent again, by id, with
    the next request, so reasoning models keep their chain of thought across tool calls.
    By default nothing is stored at OpenAI (``store=False``); the provider then asks for each
    reasoning item's encrypted content and remembers it in memory to send it back, because
    OpenAI cannot look an unstored item up by id. Items it has no encrypted content for
    (a resumed run in a new process) are left out rather than failing the call. With
    ``store=True`` items are sent back by id alone.

    A response cut at ``max_output_tokens`` is reported as ``stop_reason="max_tokens"``, even
    when it holds function calls (they may be incomplete).

    Args:
        model: the model used when a request does not name one.
        api_key: the API key; ``None`` lets the SDK read ``OPENAI_API_KEY``.
        base_url: a compatible server's URL (``None``: ``OPENAI_BASE_URL`` or OpenAI).
        client: a ready ``openai.AsyncOpenAI`` (then leave the connection options unset).
        max_retries: SDK retries of transient failures; ``None`` keeps the SDK default.
        timeout: the total deadline of one call in seconds (connection, retries and every
            read; ``None``: 600 s); also the SDK's per-read timeout. Allowed with ``client``.
        default_headers: extra headers sent with every request.
        store: whether the server keeps the responses. ``None``: ``False`` at OpenAI, and
            not sent to other servers (which then get reasoning items by id and summary).
    """

    def __init__(
        self,
        model: str = "",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        default_headers: Mapping[str, str] | None = None,
        store: bool | None = None,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            client=client,
            max_retries=max_retries,
            timeout=timeout,
            default_headers=default_headers,
        )
        self.store = store
        self._encrypted: OrderedDict[str, str] = OrderedDict()

    @property
    def _uses_encrypted_reasoning(self) -> bool:
        return self.store is False or (self.store is None and self.is_official)

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Send ``request`` as one Responses API call."""
        params = self.request_params(request)
        responses = self.client.responses.with_streaming_response
        async with self.exchange(), responses.create(**params) as answer:
            data = await read_json(answer.http_response.aiter_bytes(), self.name)
        return self.parse_response(data)

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Stream the call: ``on_text`` gets each output-text delta."""
        params = self.request_params(request)
        params["stream"] = True
        read = Reader(self.name)
        final: dict[str, Any] | None = None
        responses = self.client.responses.with_streaming_response
        async with self.exchange(), responses.create(**params) as answer:
            async for event in sse_events(answer.http_response.aiter_bytes(), self.name):
                data = event_json(event, self.name)
                where = f"stream event {event.name or 'data'!r}"
                kind = read.text(data, "type", where)
                if kind == "response.output_text.delta":
                    if delta := read.text(data, "delta", where):
                        on_text(delta)
                elif kind in ("response.completed", "response.incomplete", "response.failed"):
                    final = read.child(data, "response", where, required=True)
                    break
                elif kind == "error":
                    raise self.api_error(None, data, "error event in the stream")
        if final is None:
            raise LLMConnectionError(
                f"{self.name}: the stream ended without a final response", retryable=True
            )
        return self.parse_response(final)

    def translate(self, exc: Exception) -> LLMError:
        """Like the base, with a hint when the server has no Responses endpoint."""
        error = super().translate(exc)
        if error.status_code in (404, 405) and not self.is_official:
            error.args = (
                f"{error} (does this server offer the Responses API? "
                "OpenAIChatProvider speaks Chat Completions)",
            )
        return error

    def request_params(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of ``responses.create`` for ``request``."""
        params: dict[str, Any] = {
            "model": self.resolve_model(request),
            "input": self._input_items(request.messages),
        }
        if instructions := "\n".join(system_parts(request.messages)):
            params["instructions"] = instructions
        if self._uses_encrypted_reasoning:
            params["store"] = False
            params["include"] = ["reasoning.encrypted_content"]
        elif self.store:
            params["store"] = True
        if request.max_tokens > 0:
            params["max_output_tokens"] = request.max_tokens
        for name in ("temperature", "top_p"):
            value = getattr(request, name)
            if value is not None:
                params[name] = value
        if request.reasoning_effort.lower() in _EFFORTS:
            params["reasoning"] = {"effort": request.reasoning_effort.lower(), "summary": "auto"}
        if request.tools:
            params["tools"] = [_tool(t) for t in request.tools]
        logger.debug(
            "openai responses: model=%s items=%d tools=%d",
            params["model"],
            len(params["input"]),
            len(request.tools),
        )
        sendable: dict[str, Any] = valid_texts(params)  # lone surrogates cannot be sent
        return sendable

    def _input_items(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "user":
                items.append({"role": "user", "content": _user_content(m)})
            elif m.role == "assistant":
                items.extend(self._reasoning_items(m.reasoning_items))
                if m.content:
                    items.append({"role": "assistant", "content": m.content})
                items.extend(
                    {
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": c.input or "{}",
                    }
                    for c in m.tool_calls
                )
            elif m.role == "tool":
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": m.tool_call_id,
                        "output": m.content or "(no output)",
                    }
                )
        return items

    def _reasoning_items(self, reasoning: Sequence[ReasoningItem]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for item in reasoning:
            if item.id.startswith((ANTHROPIC_THINKING_PREFIX, ANTHROPIC_REDACTED_PREFIX)):
                continue
            summary = [{"type": "summary_text", "text": item.summary}] if item.summary else []
            entry: dict[str, Any] = {"type": "reasoning", "id": item.id, "summary": summary}
            if self._uses_encrypted_reasoning:
                encrypted = self._encrypted.get(item.id)
                if encrypted is None:
                    logger.debug("openai responses: reasoning item %s not resent", item.id)
                    continue
                entry["encrypted_content"] = encrypted
            out.append(entry)
        return out

    def parse_response(self, data: Any) -> ChatResponse:
        """A ``response`` object (decoded JSON) as a :class:`ChatResponse`.

        Raises:
            LLMError: for a ``failed`` response, classified like an HTTP error; for a body
                that is not a well-formed response object.
        """
        read = Reader(self.name)
        body = read.object(data, "the body")
        status = read.text(body, "status", "body")
        if status == "failed":
            raise self.api_error(None, body.get("error") or {}, "the response failed")
        texts: list[str] = []
        calls: list[ToolCall] = []
        items: list[ReasoningItem] = []
        summaries: list[str] = []
        output = read.items(body, "output", "body", required=True)
        for position, (where, item) in enumerate(output):
            kind = read.text(item, "type", where)
            if kind == "message":
                texts += [
                    read.text(part, "text", part_where)
                    for part_where, part in read.items(item, "content", where)
                    if read.text(part, "type", part_where) == "output_text"
                ]
            elif kind == "function_call":
                call_id = read.text(item, "call_id", where) or read.text(item, "id", where)
                calls.append(
                    ToolCall(
                        call_id or f"call_{position}",
                        read.text(item, "name", where),
                        read.text(item, "arguments", where) or "{}",
                    )
                )
            elif kind == "reasoning":
                summary = "\n".join(
                    read.text(part, "text", part_where)
                    for part_where, part in read.items(item, "summary", where)
                )
                if summary:
                    summaries.append(summary)
                if item_id := read.text(item, "id", where):
                    items.append(ReasoningItem(item_id, summary))
                    self._remember(item_id, read.text(item, "encrypted_content", where))
        reasoning = "\n".join(summaries)
        details = read.child(body, "incomplete_details", "body")
        incomplete = read.text(details, "reason", "body.incomplete_details")
        if status == "incomplete" and incomplete == "max_output_tokens":
            stop = "max_tokens"
        else:
            stop = "tool_use" if calls else "end_turn"
        usage = body.get("usage")
        return ChatResponse(
            model=read.text(body, "model", "body"),
            message=Message(
                "assistant",
                content="".join(texts),
                reasoning_content=reasoning,
                tool_calls=calls,
                reasoning_items=items,
            ),
            reasoning=reasoning,
            usage=TokenUsage(
                read.tokens(usage, "input_tokens"),
                read.tokens(usage, "output_tokens"),
                cached_input_tokens=read.tokens(
                    usage.get("input_tokens_details") if isinstance(usage, dict) else None,
                    "cached_tokens",
                ),
            ),
            stop_reason=stop,
        )

    def _remember(self, item_id: str, encrypted: str) -> None:
        if not encrypted:
            return
        self._encrypted[item_id] = encrypted
        self._encrypted.move_to_end(item_id)
        while len(self._encrypted) > _MAX_REMEMBERED:
            self._encrypted.popitem(last=False)


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    blocks = content_blocks(message)
    if blocks is None:
        return message.content
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if block.type == "text":
            parts.append({"type": "input_text", "text": block.text})
        elif block.type == "image":
            url = f"data:{block.media_type};base64,{block.image_b64}"
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
    return parts


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    parameters, strict = openai_strict_parameters(tool.input_schema)
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": parameters,
        "strict": strict,
    }
