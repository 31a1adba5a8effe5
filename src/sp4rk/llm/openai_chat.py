"""``OpenAIChatProvider``: the Chat Completions API, of OpenAI or of any compatible server."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sp4rk._internal.text import valid_texts
from sp4rk.llm._answer import event_json, read_json, sse_events
from sp4rk.llm._chat_format import (
    ChatStreamAssembler,
    chat_messages,
    chat_tools,
    parse_chat_completion,
)
from sp4rk.llm._openai_common import OpenAIProviderBase
from sp4rk.llm.base import logger
from sp4rk.llm.errors import LLMError
from sp4rk.llm.types import ChatRequest, ChatResponse

if TYPE_CHECKING:
    import openai

_GLM_VERSION = re.compile(r"^glm-(\d+)(?:\.(\d+))?")


class OpenAIChatProvider(OpenAIProviderBase):
    """Chat Completions through the official ``openai`` SDK.

    With ``base_url`` it talks to any compatible server (vLLM, llama.cpp, Ollama, OpenRouter,
    DeepSeek, ...). Against such servers it also sends what they understand and OpenAI does
    not: ``top_k``, each assistant message's ``reasoning_content``, and the reasoning switch
    of DeepSeek, Qwen and GLM models (chosen from the model name).

    Args:
        model: the model used when a request does not name one.
        api_key: the API key; ``None`` lets the SDK read ``OPENAI_API_KEY``.
        base_url: a compatible server's URL (``None``: ``OPENAI_BASE_URL`` or OpenAI).
        client: a ready ``openai.AsyncOpenAI`` (then leave the connection options unset).
        max_retries: SDK retries of transient failures; ``None`` keeps the SDK default.
        timeout: the total deadline of one call in seconds (connection, retries and every
            read; ``None``: 600 s); also the SDK's per-read timeout. Allowed with ``client``.
        default_headers: extra headers sent with every request.
        extra_body: extra JSON fields merged into every request body (fields sp4rk sets win).
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
        extra_body: Mapping[str, Any] | None = None,
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
        self.extra_body = dict(extra_body or {})

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Send ``request`` as one Chat Completions call."""
        params = self.request_params(request)
        completions = self.client.chat.completions.with_streaming_response
        async with self.exchange(), completions.create(**params) as answer:
            data = await read_json(answer.http_response.aiter_bytes(), self.name)
        if isinstance(data, dict) and not data.get("choices") and data.get("error"):
            raise self._error_in_body(data)
        return parse_chat_completion(data, provider=self.name)

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Stream the call; tool calls are assembled from their deltas."""
        params = self.request_params(request)
        params["stream"] = True
        params["stream_options"] = {"include_usage": True}
        assembler = ChatStreamAssembler(on_text, provider=self.name)
        completions = self.client.chat.completions.with_streaming_response
        async with self.exchange(), completions.create(**params) as answer:
            async for event in sse_events(answer.http_response.aiter_bytes(), self.name):
                if event.data.strip() == "[DONE]":
                    break
                chunk = event_json(event, self.name)
                if chunk.get("error"):
                    raise self.api_error(None, chunk, "an error in the stream")
                assembler.feed(chunk)
        return parse_chat_completion(assembler.completion(), provider=self.name)

    def _error_in_body(self, data: dict[str, Any]) -> LLMError:
        """The exception for an error answered with HTTP 200 (OpenRouter does this).

        The body's numeric ``code``, when it is an HTTP error status, stands in for the
        status (OpenRouter puts the upstream status there), so the answer is classified like
        the same error sent with that status.
        """
        error = data["error"]
        code = error.get("code") if isinstance(error, dict) else None
        status = (
            code
            if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599
            else None
        )
        return self.api_error(status, data, "an error answered with HTTP 200")

    def request_params(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for ``request``."""
        model = self.resolve_model(request)
        official = self.is_official
        params: dict[str, Any] = {
            "model": model,
            "messages": chat_messages(request.messages, reasoning_field=not official),
        }
        if request.tools:
            params["tools"] = chat_tools(request.tools)
        if request.max_tokens > 0:
            params["max_completion_tokens"] = request.max_tokens
        for name in ("temperature", "top_p", "presence_penalty"):
            value = getattr(request, name)
            if value is not None:
                params[name] = value
        extra: dict[str, Any] = {}
        if request.top_k is not None and not official:
            extra["top_k"] = request.top_k
        if request.reasoning_effort:
            _reasoning_params(model, request.reasoning_effort, official, params, extra)
        extra = {**self.extra_body, **extra}
        if extra:
            params["extra_body"] = extra
        logger.debug(
            "openai chat: model=%s messages=%d tools=%d",
            model,
            len(params["messages"]),
            len(request.tools),
        )
        sendable: dict[str, Any] = valid_texts(params)  # lone surrogates cannot be sent
        return sendable


def _reasoning_params(
    model: str, effort: str, official: bool, params: dict[str, Any], extra: dict[str, Any]
) -> None:
    """Put the reasoning effort where the model's family expects it."""
    bare = model.lower().rsplit("/", 1)[-1]
    if official or not any(family in bare for family in ("deepseek", "qwen", "glm")):
        params["reasoning_effort"] = effort
    elif "deepseek" in bare:
        extra["thinking"] = {"type": effort}
    elif "qwen" in bare:
        extra["enable_thinking"] = effort.lower() == "on"
    elif (match := _GLM_VERSION.match(bare)) and (
        int(match.group(1)),
        int(match.group(2) or 0),
    ) >= (5, 2):
        if effort.lower() == "none":
            extra["thinking"] = {"type": "disabled"}
        else:
            extra["thinking"] = {"type": "enabled"}
            params["reasoning_effort"] = effort
    else:
        extra["thinking"] = {"type": effort}
