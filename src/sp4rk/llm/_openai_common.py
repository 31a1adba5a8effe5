"""What both OpenAI providers share: building the SDK client and translating its errors."""

from __future__ import annotations

from collections.abc import Mapping

try:
    import openai
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the OpenAI providers need the official openai SDK: pip install 'sp4rk[openai]'"
    ) from exc

from sp4rk.llm._errors_map import connection_error
from sp4rk.llm.base import SDKProvider, build_sdk_client
from sp4rk.llm.errors import LLMError

OFFICIAL_HOST = "api.openai.com"


class OpenAIProviderBase(SDKProvider[openai.AsyncOpenAI]):
    """An ``openai.AsyncOpenAI`` client plus the error translation of the OpenAI wire formats.

    Args:
        model: the model used when a request does not name one.
        api_key: the API key; ``None`` lets the SDK read ``OPENAI_API_KEY``.
        base_url: any OpenAI-compatible server (``None``: ``OPENAI_BASE_URL`` or OpenAI).
        client: a ready ``openai.AsyncOpenAI``; the connection options must then be left
            unset, and the client's own retry policy applies.
        max_retries: retries of transient failures (408, 409, 429, 5xx) with the SDK's
            backoff and ``Retry-After``; ``None`` keeps the SDK default (2).
        timeout: the total deadline of one call in seconds (connection, retries and every
            read; ``None``: 600 s); also the SDK's per-read timeout. Allowed with ``client``.
        default_headers: extra headers sent with every request.

    Raises:
        ValueError: ``client`` given together with connection options.
        LLMError: the SDK could not build a client (no API key, typically).
    """

    name = "openai"
    sdk_error = openai.OpenAIError

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
    ) -> None:
        options = {
            "api_key": api_key,
            "base_url": base_url,
            "max_retries": max_retries,
            "timeout": timeout,
            "default_headers": default_headers,
        }
        super().__init__(model, client, lambda: _build_client(options), options)

    @property
    def is_official(self) -> bool:
        """Whether requests go to OpenAI itself rather than a compatible server."""
        return bool(self.client.base_url.host == OFFICIAL_HOST)

    def translate(self, exc: Exception) -> LLMError:
        """The sp4rk exception for an ``openai`` SDK exception."""
        if isinstance(exc, openai.APIConnectionError):
            return connection_error(self.name, exc, self._secrets, self.base_url)
        if isinstance(exc, openai.APIError):
            status = getattr(exc, "status_code", None)
            return self.api_error(status, exc.body, exc.message, exc.code or "")
        return LLMError(f"{self.name}: {self.redact(str(exc))}")


def _build_client(options: Mapping[str, object]) -> openai.AsyncOpenAI:
    return build_sdk_client(
        "openai", openai.AsyncOpenAI, openai.DefaultAsyncHttpxClient, openai.OpenAIError, options
    )
