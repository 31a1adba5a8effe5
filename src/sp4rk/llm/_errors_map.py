"""Classify provider error answers into sp4rk's exceptions, and keep secrets out of them.

One classifier serves every wire format. It decides by HTTP status first, then by the
provider's machine-readable error code or type, and reads the message text only as a last
resort (servers that give no code: Anthropic, Gemini-style, vLLM, OpenRouter)::

    429 (in a stream: a rate-limit or     RateLimitError (retryable), unless the code says
    quota code)                           quota/billing, or the text does without naming a
                                          per-minute limit or a retry delay
                                          (QuotaExceededError), or the request alone exceeds
                                          the per-minute limit: not retryable
    code context_length_exceeded, ...     ContextWindowExceededError
    503, 529, code overloaded_error       ProviderOverloadedError (retryable)
    400/413/422 + an overflow message     ContextWindowExceededError (whatever the code)
    408, 409, 5xx                         ProviderAPIError (retryable)
    anything else                         ProviderAPIError (not retryable)

The same decision vetoes the SDK's own retries: :func:`veto_retry_hook` marks a response
``x-should-retry: false`` when it is not retryable, so the SDK's backoff (and ``Retry-After``)
applies to transient failures only and a quota 429 fails at once.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from typing import Any

from sp4rk.llm.errors import (
    ContextWindowExceededError,
    LLMConnectionError,
    LLMError,
    ProviderAPIError,
    ProviderOverloadedError,
    QuotaExceededError,
    RateLimitError,
)

_OVERFLOW_CODES = frozenset(
    {
        "context_length_exceeded",  # OpenAI, Azure, most compatible servers
        "exceed_context_size_error",  # llama.cpp server
        "context_window_exceeded",
        "model_context_window_exceeded",  # Anthropic
    }
)
_OVERFLOW_TEXT = re.compile(
    r"maximum context length"  # OpenAI, vLLM, OpenRouter
    r"|context[ _]length[ _]exceeded"
    r"|prompt is too long"  # Anthropic
    r"|input is too long"
    r"|exceed(?:s|ed)? (?:the )?context (?:limit|window)"  # Anthropic, OpenAI Responses
    r"|exceeds the maximum number of tokens allowed"  # Gemini
    r"|exceeds the available context size"  # llama.cpp
    r"|longer than the maximum model length"  # vLLM ("The decoder prompt (length N) is ...")
    r"|exceeds the context length"  # Ollama ("the input length exceeds the context length")
    r"|context length of only \d+ tokens"  # LM Studio
    r"|greater than the context length"  # LM Studio ("tokens to keep ... greater than ...")
    r"|too many tokens in (?:the )?(?:prompt|input|request)",
    re.IGNORECASE,
)
_QUOTA_CODES = frozenset(
    {"insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "quota_exceeded"}
)
#: Codes that make an error reported inside a stream (no HTTP status) a 429.
_STREAM_RATE_CODES = frozenset({"rate_limit_exceeded", "rate_limit_error"}) | _QUOTA_CODES
_TOO_LARGE_TEXT = re.compile(r"request too large", re.IGNORECASE)
_QUOTA_TEXT = re.compile(r"exceeded your current quota|check your plan and billing", re.I)
#: A quota text with one of these is a per-minute limit (Gemini's RESOURCE_EXHAUSTED 429s say
#: "You exceeded your current quota ... Please retry in 43s"): waiting helps.
_PER_MINUTE_TEXT = re.compile(r"retry in|try again in|per[ _-]?minute", re.I)
_OVERLOADED = frozenset({"overloaded_error", "overloaded", "unavailable"})
_RETRYABLE_TYPES = frozenset({"rate_limit_error", "api_error", "server_error", "timeout"})
_OVERFLOW_STATUSES = frozenset({400, 413, 422})
_KEY_LIKE = re.compile(r"\b(sk-(?:ant-|proj-)?|AIza|xai-|gsk_)[A-Za-z0-9_\-]{12,}")
#: Known secrets shorter than this are not masked (they would mask ordinary words).
_MIN_SECRET = 4
_MAX_MESSAGE = 2000


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """What an error body says, whatever its wire format."""

    code: str = ""
    """The machine-readable code, else the error type (``""`` when neither)."""
    message: str = ""
    """The human-readable text (plus any upstream body an aggregator attached)."""


def parse_error_body(body: Any) -> ErrorInfo:
    """Read the code and message of an error body in any of the formats we meet.

    Handles ``{"error": {...}}`` (OpenAI, Anthropic, llama.cpp, OpenRouter, Gemini),
    ``[{"error": ...}]`` (Gemini's list), a bare error object (vLLM's older format, and the
    error objects of server-sent events), ``{"error": "text"}`` and plain text.
    """
    if isinstance(body, list) and body:
        return parse_error_body(body[0])
    if isinstance(body, str | bytes):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            decoded = json.loads(text)
        except ValueError:
            return ErrorInfo(message=text)
        return parse_error_body(decoded) if isinstance(decoded, dict | list) else ErrorInfo()
    if not isinstance(body, dict):
        return ErrorInfo()
    inner = body.get("error")
    if isinstance(inner, str):
        return ErrorInfo(code=str(body.get("code") or ""), message=inner)
    err = inner if isinstance(inner, dict) else body
    code = _text_code(err.get("code"))
    details = err.get("details")
    if not code and isinstance(details, dict):
        code = _text_code(details.get("error_code"))
    code = code or _text_code(err.get("type")) or _text_code(err.get("status"))
    message = str(err.get("message") or "")
    metadata = err.get("metadata")
    if isinstance(metadata, dict) and metadata.get("raw"):
        message = f"{message} (upstream: {metadata['raw']})"
    return ErrorInfo(code=code, message=message)


def _text_code(value: Any) -> str:
    # Numeric "code" fields (vLLM, OpenRouter, Gemini) merely repeat the HTTP status.
    return value if isinstance(value, str) and not value.isdigit() else ""


def classify(
    status: int | None, info: ErrorInfo, *, provider: str, secrets: tuple[str, ...] = ()
) -> LLMError:
    """Build the sp4rk exception for an error answer (``status`` ``None``: inside a stream)."""
    code = info.code.lower()
    text = redact(info.message, secrets)[:_MAX_MESSAGE]
    label = f"HTTP {status}" if status else "stream error"
    message = f"{provider}: {label}{f' {info.code}' if info.code else ''}: {text}".rstrip(": ")

    def api_error(cls: type[ProviderAPIError], retryable: bool) -> ProviderAPIError:
        return cls(message, status_code=status, retryable=retryable, code=info.code)

    if status == 429 or (status is None and code in _STREAM_RATE_CODES):
        if code in _QUOTA_CODES or (
            _QUOTA_TEXT.search(info.message) and not _PER_MINUTE_TEXT.search(info.message)
        ):
            return api_error(QuotaExceededError, False)
        return api_error(RateLimitError, not _TOO_LARGE_TEXT.search(info.message))
    if code in _OVERFLOW_CODES:
        return ContextWindowExceededError(message, status_code=status)
    if status in (503, 529) or code in _OVERLOADED:
        return api_error(ProviderOverloadedError, True)
    if (status in _OVERFLOW_STATUSES or status is None) and _OVERFLOW_TEXT.search(info.message):
        return ContextWindowExceededError(message, status_code=status)
    if status is None:
        return api_error(ProviderAPIError, code in _RETRYABLE_TYPES)
    return api_error(ProviderAPIError, status in (408, 409) or status >= 500)


def connection_error(provider: str, exc: BaseException, secrets: tuple[str, ...]) -> LLMError:
    """The exception for a call that got no HTTP answer (always retryable)."""
    detail = redact(str(exc), secrets) or type(exc).__name__  # some say nothing: ReadError('')
    return LLMConnectionError(f"{provider}: connection failed: {detail}", retryable=True)


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every known secret (4 characters or more) and every key-like word masked."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= _MIN_SECRET:
            text = text.replace(secret, "[REDACTED]")
    return _KEY_LIKE.sub(lambda m: f"{m.group(1)}[REDACTED]", text)


def _redact_value(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` (a decoded JSON body, say) with secrets masked in every string it holds."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {key: _redact_value(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact_value(item, secrets) for item in value]
    if isinstance(value, tuple):
        return tuple(_redact_value(item, secrets) for item in value)
    return value


def scrub_exception(exc: BaseException, secrets: tuple[str, ...]) -> None:
    """Mask secrets in an SDK exception and in the exceptions chained to it.

    The text (``args``, ``message``) and the error ``body`` a server sent back are rewritten,
    so neither a chained traceback nor code inspecting ``__cause__`` can show a key, also
    when the server echoed it.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(_redact_value(a, secrets) for a in current.args)
        for name in ("message", "body"):
            value = getattr(current, name, None)
            if value is not None:
                with contextlib.suppress(AttributeError):  # a read-only property: nothing stored
                    setattr(current, name, _redact_value(value, secrets))
        current = current.__cause__ or current.__context__


async def veto_retry_hook(response: Any) -> None:
    """An httpx response hook: forbid the SDK to retry an error that is not transient.

    Both official SDKs obey ``x-should-retry``; setting it to ``"false"`` here leaves their
    backoff and ``Retry-After`` handling in charge of the failures worth retrying.
    """
    if response.status_code < 400:
        return
    await response.aread()
    error = classify(response.status_code, parse_error_body(response.content), provider="")
    if not error.retryable:
        response.headers["x-should-retry"] = "false"
