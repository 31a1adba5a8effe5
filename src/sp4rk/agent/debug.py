"""LLM caller decorators for debugging: full JSONL dumps, token-usage logs, usage totals.

Each wraps an ``LLMCaller``, forwards the response or exception untouched, forwards streaming
when the inner caller streams, and stacks with the others.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, ClassVar, Self, TypeVar, cast

from sp4rk.agent.protocols import LLMCaller, StreamingLLMCaller, supports_streaming
from sp4rk.llm.cassette import record_call, redactor_for
from sp4rk.llm.types import ChatRequest, ChatResponse, TokenUsage


class _Decorator:
    """Shared plumbing: ``call`` (and ``call_stream``, when streaming) go through ``_around``.

    Constructing a decorator around a caller that streams gives an instance of its streaming
    variant, a subclass that adds a real ``call_stream`` method; around one that does not
    stream, the decorator has no ``call_stream`` at all. So ``supports_streaming`` and
    ``isinstance(decorator, StreamingLLMCaller)`` agree with the inner caller, on every
    Python version.
    """

    def __new__(cls, inner: LLMCaller, *args: Any, **kwargs: Any) -> Self:
        if supports_streaming(inner) and not issubclass(cls, _StreamingDecorator):
            return super().__new__(_streaming_variant(cls))
        return super().__new__(cls)

    #: Set on each decorator class by ``_streaming_variant`` (read from its own ``__dict__``).
    _streaming_variant: ClassVar[type[_Decorator]]

    def __init__(self, inner: LLMCaller) -> None:
        self.inner = inner

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Call the inner caller."""
        return await self._around(request, lambda: self.inner.call(request))

    async def _around(self, request: ChatRequest, send: Callable[[], Any]) -> ChatResponse:
        response: ChatResponse = await send()
        return response

    def redact(self, text: str) -> str:
        """``text`` with the inner caller's credentials masked (see ``Provider.redact``)."""
        return redactor_for(self.inner)(text)


class _StreamingDecorator(_Decorator):
    """Adds ``call_stream``, forwarded to the inner caller through ``_around``."""

    inner: StreamingLLMCaller

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Stream from the inner caller."""
        return await self._around(request, lambda: self.inner.call_stream(request, on_text))


D = TypeVar("D", bound=_Decorator)


def _streaming_variant(cls: type[D]) -> type[D]:
    """``cls`` with ``call_stream``: made on first use, then kept on ``cls`` itself."""
    variant = cls.__dict__.get("_streaming_variant")
    if variant is None:
        variant = type(cls.__name__, (cls, _StreamingDecorator), {"__module__": cls.__module__})
        variant.__qualname__ = cls.__qualname__
        variant.__doc__ = cls.__doc__
        cls._streaming_variant = variant
    return cast("type[D]", variant)


class DumpCaller(_Decorator):
    """Writes every request and response as one JSON object per line to ``writer``.

    Records: ``{"ts", "direction": "request"|"response", "id", "data", "error", "error_type"}``
    with a UTC ISO-8601 timestamp; the error fields appear only on a failed call (``data`` is
    then ``null``, and an ``LLMError``'s status, retryability, retry delay and code are kept
    too). The request line is written before the inner caller is called, so a call that
    hangs still leaves its request; the response line when it ends (a cancelled call has
    none). Both carry the call's ``id``, and each line is written whole under a lock, so
    concurrent calls never mix and ``sp4rk.llm.cassette.ReplayLLM`` pairs them. Every string
    is masked with the inner caller's credentials. With ``writer=None`` nothing is written.
    Write failures are logged (through ``logger``, if given) and never affect the call.
    """

    def __init__(
        self, inner: LLMCaller, writer: Any | None, logger: logging.Logger | None = None
    ) -> None:
        super().__init__(inner)
        self.writer = writer
        self.logger = logger
        self._lock = threading.Lock()

    async def _around(self, request: ChatRequest, send: Callable[[], Any]) -> ChatResponse:
        if self.writer is None:
            return await super()._around(request, send)
        return await record_call(request, send, self._write, self.redact)

    def _write(self, lines: str) -> None:
        try:
            with self._lock:
                assert self.writer is not None
                self.writer.write(lines)
                flush = getattr(self.writer, "flush", None)
                if callable(flush):
                    flush()
        except Exception:
            if self.logger is not None:
                self.logger.debug("dump write failed", exc_info=True)


class LoggingLLMCaller(_Decorator):
    """Logs each request and its token usage at DEBUG, and failures at WARNING.

    ``provider`` is a label for the records. With ``logger=None`` nothing is logged. Failure
    messages are masked with the inner caller's credentials.
    """

    def __init__(self, inner: LLMCaller, provider: str, logger: logging.Logger | None) -> None:
        super().__init__(inner)
        self.provider = provider
        self.logger = logger

    async def _around(self, request: ChatRequest, send: Callable[[], Any]) -> ChatResponse:
        log = self.logger
        if log is None:
            return await super()._around(request, send)
        log.debug(
            "llm: request provider=%s model=%s messages=%d tools=%d",
            self.provider,
            request.model,
            len(request.messages),
            len(request.tools),
        )
        try:
            response: ChatResponse = await send()
        except Exception as exc:
            log.warning(
                "llm: call failed provider=%s error=%s", self.provider, self.redact(str(exc))
            )
            raise
        u = response.usage
        log.debug(
            "llm: token usage provider=%s model=%s input_tokens=%d output_tokens=%d "
            "total_tokens=%d stop_reason=%s tool_calls=%d",
            self.provider,
            response.model or request.model,
            u.input_tokens,
            u.output_tokens,
            u.total_tokens,
            response.stop_reason,
            len(response.message.tool_calls),
        )
        return response


class UsageTrackingCaller(_Decorator):
    """Sums token usage per model across every call (thread-safe).

    ``totals()`` gives ``{model: TokenUsage}``; ``total()`` the sum over models. The model is
    the response's, else the request's, else ``""``.
    """

    def __init__(self, inner: LLMCaller) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()
        self._by_model: dict[str, TokenUsage] = {}

    async def _around(self, request: ChatRequest, send: Callable[[], Any]) -> ChatResponse:
        response: ChatResponse = await send()
        model = response.model or request.model
        with self._lock:
            usage = self._by_model.setdefault(model, TokenUsage())
            usage.input_tokens += response.usage.input_tokens
            usage.output_tokens += response.usage.output_tokens
        return response

    def totals(self) -> dict[str, TokenUsage]:
        """Usage per model (copies)."""
        with self._lock:
            return {
                m: TokenUsage(u.input_tokens, u.output_tokens) for m, u in self._by_model.items()
            }

    def total(self) -> TokenUsage:
        """Usage summed over all models."""
        with self._lock:
            return TokenUsage(
                sum(u.input_tokens for u in self._by_model.values()),
                sum(u.output_tokens for u in self._by_model.values()),
            )
