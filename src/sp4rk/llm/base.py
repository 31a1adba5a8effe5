"""The base class of sp4rk's model providers.

A provider turns a :class:`~sp4rk.llm.types.ChatRequest` into one call of a model API and the
answer into a :class:`~sp4rk.llm.types.ChatResponse`. Each satisfies ``sp4rk.agent.LLMCaller``
and ``sp4rk.agent.StreamingLLMCaller`` structurally; this module only shares the plumbing:
model selection, streaming fallback and the async context manager that releases the HTTP
connection pool.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from sp4rk.llm._errors_map import (
    DEADLINE,
    ErrorInfo,
    classify,
    connection_error,
    parse_error_body,
    retry_after,
    veto_retry_hook,
)
from sp4rk.llm._secrets import credentials, mask_in_sdk_logs, redact, scrub_exception
from sp4rk.llm.errors import LLMConnectionError, LLMError
from sp4rk.llm.types import ChatRequest, ChatResponse, ContentBlock, Message

logger = logging.getLogger("sp4rk.llm")
logger.addHandler(logging.NullHandler())


class Provider(ABC):
    """A model API behind ``call`` / ``call_stream``; use it as an async context manager.

    Args:
        model: the model used when a request does not name one.
    """

    #: Label used in error messages and log records.
    name: str = "provider"

    def __init__(self, model: str = "") -> None:
        self.model = model

    def resolve_model(self, request: ChatRequest) -> str:
        """The model to call: ``request.model`` when set, else the provider's.

        Raises:
            ValueError: when neither names a model.
        """
        model = request.model or self.model
        if not model:
            raise ValueError(
                f"{type(self).__name__} has no model: pass model=... to the constructor "
                "or set ChatRequest.model"
            )
        return model

    def redact(self, text: str) -> str:
        """``text`` with the credentials this provider was given masked (and key-like words).

        Dumps, cassettes and logging callers wrapped around a provider mask what they write
        with it.
        """
        return redact(text, ())

    @abstractmethod
    async def call(self, request: ChatRequest) -> ChatResponse:
        """Send ``request`` and return the complete response.

        Raises:
            LLMError: the call failed; ``ContextWindowExceededError`` when the request does
                not fit the model's window.
        """

    @abstractmethod
    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Like :meth:`call`, calling ``on_text`` with each text delta as it arrives.

        Tool calls are assembled from their deltas; the returned response is the same one
        :meth:`call` would give.
        """

    @abstractmethod
    async def aclose(self) -> None:
        """Release the provider's resources (the HTTP client it created, a loaded model).

        A client passed in by the caller is left open: its owner closes it.
        """

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class _Closable(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Closable)


#: The total deadline of one call when ``timeout`` is not given (the SDKs' read timeout).
DEFAULT_TIMEOUT = 600.0


class SDKProvider(Provider, Generic[ClientT]):
    """A provider around an official SDK client, which it builds (and then owns) or is given.

    Every call runs inside :meth:`exchange`: one total deadline (``timeout``, else
    :data:`DEFAULT_TIMEOUT`) bounds the whole call, connection, the SDK's retries and their
    waits, and every read of the answer, streamed or not, so a server that trickles bytes or
    keep-alive comments cannot hold it longer.

    Args:
        model: the model used when a request does not name one.
        client: a ready SDK client, or ``None`` to build one with ``build``.
        build: makes the client from the connection ``options``.
        options: the connection options as passed (``None`` = not given); only checked and
            searched for credentials here, ``build`` uses them. ``timeout`` may come with a
            ``client``: it is then the deadline only (the client keeps its read timeouts).

    Raises:
        ValueError: ``client`` given together with other connection options, or a
            ``timeout`` that is not a positive number of seconds.
    """

    #: The SDK's root exception, translated by :meth:`sdk_errors` (set by each subclass).
    sdk_error: ClassVar[type[Exception]]

    def __init__(
        self,
        model: str,
        client: ClientT | None,
        build: Callable[[], ClientT],
        options: Mapping[str, object],
    ) -> None:
        super().__init__(model)
        timeout = options.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < float("inf")
        ):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.timeout: float = float(timeout) if timeout is not None else DEFAULT_TIMEOUT
        """The total deadline of one call, in seconds."""
        if client is not None:  # the deadline is sp4rk's own: it goes with any client
            given = sorted(
                name for name, value in options.items() if value is not None and name != "timeout"
            )
            if given:
                raise ValueError(f"pass either client=... or {', '.join(given)}, not both")
            self._client, self._owns_client = client, False
        else:
            self._client, self._owns_client = build(), True
        self._secrets = _client_credentials(self._client, options)
        mask_in_sdk_logs(self._secrets)

    @property
    def client(self) -> ClientT:
        """The SDK client in use."""
        return self._client

    @property
    def base_url(self) -> object:
        """The server the client sends to (named in connection errors)."""
        return getattr(self._client, "base_url", None)

    async def aclose(self) -> None:
        """Close the SDK client if this provider built it."""
        if self._owns_client:
            await self._client.close()

    @asynccontextmanager
    async def exchange(self) -> AsyncIterator[None]:
        """Run one call inside the block: its total deadline, and errors as sp4rk's.

        Raises:
            LLMConnectionError: (retryable) the deadline passed before the answer was complete.
            LLMError: as :meth:`sdk_errors` says.
        """
        deadline = asyncio.get_running_loop().time() + self.timeout
        token = DEADLINE.set(deadline)  # read by the retry hook: no wait past the deadline
        timer = asyncio.timeout_at(deadline)
        try:
            async with timer:
                with self.sdk_errors():
                    yield
        except TimeoutError:
            if not timer.expired():
                raise
            raise LLMConnectionError(
                f"{self.name}: no complete answer within the call's deadline of "
                f"{self.timeout:g} s (timeout=...): the server is slow, or trickles its "
                "answer; retry, or pass a larger timeout",
                retryable=True,
            ) from None
        finally:
            DEADLINE.reset(token)

    @contextmanager
    def sdk_errors(self) -> Iterator[None]:
        """Re-raise the SDK's exceptions inside the block as sp4rk's, secrets masked.

        A failure of the SDK's HTTP library (a connection dropped while a stream is read, a
        body that cannot be decoded) becomes a retryable
        :class:`~sp4rk.llm.errors.LLMConnectionError` too. The ``Retry-After`` of a retryable
        error answer becomes the exception's ``retry_after``.
        """
        try:
            yield
        except self.sdk_error as exc:
            error = self.translate(exc)
            response = getattr(exc, "response", None)
            if error.retryable and error.retry_after is None and response is not None:
                wait = retry_after(response.headers)
                if wait is not None:
                    error.retry_after = wait
                    error.args = (f"{error} (the server asks to retry after {wait:g} s)",)
            scrub_exception(exc, self._secrets)
            raise error from exc
        except Exception as exc:
            if not _is_http_library_error(exc):
                raise
            scrub_exception(exc, self._secrets)
            raise connection_error(self.name, exc, self._secrets, self.base_url) from exc

    @abstractmethod
    def translate(self, exc: Exception) -> LLMError:
        """The sp4rk exception for one of the SDK's."""

    def api_error(self, status: int | None, body: Any, message: str, code: str = "") -> LLMError:
        """Classify an error answer (see :mod:`sp4rk.llm._errors_map`), secrets masked.

        ``message`` and ``code`` stand in when the body carries none.
        """
        info = parse_error_body(body)
        if not info.message:
            info = ErrorInfo(code=info.code or code, message=message)
        return classify(status, info, provider=self.name, secrets=self._secrets)

    def redact(self, text: str) -> str:
        """``text`` with this provider's credentials (and key-like words) masked."""
        return redact(text, self._secrets)


_KEY_ATTRS = ("api_key", "auth_token")
#: The HTTP libraries of the official SDKs (httpx2 today, httpx before).
_HTTP_LIBRARIES = ("httpx2", "httpx")


def _client_credentials(client: object, options: Mapping[str, object]) -> frozenset[str]:
    """Every credential the client sends: keys, header values, query values, URL password."""
    headers: dict[str, object] = {}
    for source in (options.get("default_headers"), getattr(client, "default_headers", None)):
        if isinstance(source, Mapping):
            headers.update({str(k): v for k, v in source.items()})
    query = getattr(client, "default_query", None)
    return credentials(
        keys=(options.get("api_key"), *(getattr(client, a, None) for a in _KEY_ATTRS)),
        headers=headers,
        query=query if isinstance(query, Mapping) else None,
        urls=(options.get("base_url"), getattr(client, "base_url", None)),
    )


def _is_http_library_error(exc: Exception) -> bool:
    """Whether ``exc`` is a request error of an HTTP library the SDKs use.

    Transport failures and undecodable bodies alike. Only libraries already imported are
    checked: an exception of one cannot exist otherwise, and importing one here would load it
    for nothing.
    """
    for name in _HTTP_LIBRARIES:
        library = sys.modules.get(name)
        request_error = getattr(library, "RequestError", None)
        if isinstance(request_error, type) and isinstance(exc, request_error):
            return True
    return False


def build_sdk_client(
    provider: str,
    factory: Callable[..., ClientT],
    http_client: Callable[..., Any],
    sdk_error: type[Exception],
    options: Mapping[str, object],
) -> ClientT:
    """Build an official SDK client; options left ``None`` keep the SDK's defaults.

    The client's HTTP client (``http_client``: the SDK's ``DefaultAsyncHttpxClient``, which
    keeps its timeouts and limits) vetoes retries of errors that are not transient (see
    :func:`~sp4rk.llm._errors_map.veto_retry_hook`) and does not follow redirects, which could
    carry the API key to another host.

    Raises:
        LLMError: the SDK refused the options (no API key, typically).
    """
    kwargs = {name: value for name, value in options.items() if value is not None}
    kwargs["http_client"] = http_client(
        event_hooks={"response": [veto_retry_hook]}, follow_redirects=False
    )
    try:
        return factory(**kwargs)
    except sdk_error as exc:
        headers = options.get("default_headers")
        secrets = credentials(
            keys=(options.get("api_key"),),
            headers=headers if isinstance(headers, Mapping) else None,
            urls=(options.get("base_url"),),
        )
        raise LLMError(
            f"{provider}: cannot create the client: {redact(str(exc), secrets)}"
        ) from None


def content_blocks(message: Message) -> list[ContentBlock] | None:
    """The message's blocks ready to send, or ``None`` when it is plain text.

    When no block is text but ``content`` is set, the content leads as a text block.

    Raises:
        ValueError: naming the first text block without text, or image block without
            ``media_type`` or ``image_b64``.
    """
    blocks = message.content_blocks
    if not blocks:
        return None
    for index, block in enumerate(blocks):
        if block.type == "text" and not block.text:
            raise ValueError(f"content block {index}: a text block needs text")
        if block.type == "image" and not (block.media_type and block.image_b64):
            raise ValueError(
                f"content block {index}: an image block needs media_type and image_b64"
            )
    if message.content and not any(b.type == "text" for b in blocks):
        return [ContentBlock("text", text=message.content), *blocks]
    return list(blocks)


def system_parts(messages: Sequence[Message]) -> list[str]:
    """The non-empty system messages' texts, in order (every API takes them apart)."""
    return [m.content for m in messages if m.role == "system" and m.content]


#: Reasoning items whose id starts with one of these carry Anthropic thinking blocks (the
#: id holds the block's signature or redacted data); other providers skip them.
ANTHROPIC_THINKING_PREFIX = "thinking:"
ANTHROPIC_REDACTED_PREFIX = "redacted_thinking:"
