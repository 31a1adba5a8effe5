"""Classify provider error answers into sp4rk's exceptions, and police the SDKs' retries.

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
applies to transient failures only and a quota 429 fails at once; a transient failure whose
``Retry-After`` exceeds :data:`MAX_RETRY_WAIT` or the call's deadline fails at once too.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sp4rk._internal import safejson
from sp4rk._internal.text import valid_text
from sp4rk.llm._secrets import redact
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
_MAX_MESSAGE = 2000
_MAX_CODE = 200
#: Error text read (and matched) at most; a hostile body may be megabytes long.
_MAX_READ = 20_000
#: ``[[{"error": ...}]]``: lists unwrapped before giving up.
_MAX_LIST_NESTING = 4
#: The longest server-requested wait (``Retry-After``) the SDKs may honour before retrying;
#: past it (or past the call's deadline) the call fails at once with ``retry_after`` set.
MAX_RETRY_WAIT = 10.0
#: When the current call must be over (``loop.time()``), set by the provider for its hook.
DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "sp4rk_llm_deadline", default=None
)


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
    error objects of server-sent events), ``{"error": "text"}`` and plain text. Text is parsed
    with the bounded parser, and fields of the wrong type are ignored: an error body is as
    hostile as any other answer.
    """
    if isinstance(body, str | bytes):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            body = safejson.loads(text, allow_duplicate_keys=True)
        except ValueError:
            return ErrorInfo(message=valid_text(text[:_MAX_READ]))
        if not isinstance(body, dict | list):
            return ErrorInfo()
    for _ in range(_MAX_LIST_NESTING):
        if not (isinstance(body, list) and body):
            break
        body = body[0]
    if not isinstance(body, dict):
        return ErrorInfo()
    inner = body.get("error")
    if isinstance(inner, str):
        return ErrorInfo(code=_text_code(body.get("code")), message=inner)
    err = inner if isinstance(inner, dict) else body
    code = _text_code(err.get("code"))
    details = err.get("details")
    if not code and isinstance(details, dict):
        code = _text_code(details.get("error_code"))
    code = code or _text_code(err.get("type")) or _text_code(err.get("status"))
    message = err.get("message")
    message = message[:_MAX_READ] if isinstance(message, str) else ""
    metadata = err.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("raw"), str) and metadata["raw"]:
        message = f"{message} (upstream: {metadata['raw']})"[:_MAX_READ]
    return ErrorInfo(code=code, message=valid_text(message))


def _text_code(value: Any) -> str:
    # Numeric "code" fields (vLLM, OpenRouter, Gemini) merely repeat the HTTP status.
    if not isinstance(value, str) or value.isdigit():
        return ""
    return valid_text(value[:_MAX_CODE])


def classify(
    status: int | None, info: ErrorInfo, *, provider: str, secrets: Iterable[str] = ()
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


def connection_error(
    provider: str, exc: BaseException, secrets: Iterable[str], url: object = None
) -> LLMError:
    """The exception for a call that got no HTTP answer (always retryable).

    ``url`` is the server the call went to (the client's base URL): the message names it
    (without credentials or query), so a wrong ``base_url`` or a server that is not running
    is plain to see.
    """
    secrets = tuple(secrets)
    detail = redact(str(exc), secrets) or type(exc).__name__  # some say nothing: ReadError('')
    where = _display_url(url)
    to = f" to {redact(where, secrets)}" if where else ""
    hint = " (is the server running, and is the base URL right?)" if where else ""
    return LLMConnectionError(f"{provider}: connection failed{to}: {detail}{hint}", retryable=True)


def _display_url(url: object) -> str:
    """``scheme://host:port/path`` of ``url``, without user info, query or fragment."""
    if url is None:
        return ""
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return ""
    if not parts.scheme or not parts.hostname:
        return ""
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def requested_wait(headers: Any) -> float | None:
    """The wait a server asked for, in seconds, read the way the SDKs read it.

    ``retry-after-ms`` first, then ``retry-after`` as seconds or as an HTTP date; ``None``
    when there is none. It may be negative, or infinite.
    """
    wait: float | None = None
    with contextlib.suppress(TypeError, ValueError):
        wait = float(headers.get("retry-after-ms")) / 1000
    if wait is None:
        value = headers.get("retry-after")
        try:
            wait = float(value)
        except (TypeError, ValueError):
            with contextlib.suppress(TypeError, ValueError, OverflowError):
                parsed = email.utils.parsedate_tz(value) if isinstance(value, str) else None
                wait = None if parsed is None else email.utils.mktime_tz(parsed) - time.time()
    return None if wait is None or math.isnan(wait) else wait


def retry_after(headers: Any) -> float | None:
    """:func:`requested_wait` when it is a finite, positive number of seconds, else ``None``."""
    wait = requested_wait(headers)
    return wait if wait is not None and 0 < wait < math.inf else None


def _wait_too_long(wait: float | None) -> bool:
    """Whether the SDK must not sleep ``wait`` seconds: past the cap, or past the deadline."""
    if wait is None or wait <= 0:
        return False
    deadline = DEADLINE.get()
    if deadline is not None and asyncio.get_running_loop().time() + wait >= deadline:
        return True
    return wait > MAX_RETRY_WAIT


async def veto_retry_hook(response: Any) -> None:
    """An httpx response hook: forbid the SDK to retry an error that is not transient.

    Both official SDKs obey ``x-should-retry``; setting it to ``"false"`` here leaves their
    backoff and ``Retry-After`` handling in charge of the failures worth retrying. A transient
    failure whose ``Retry-After`` exceeds :data:`MAX_RETRY_WAIT` or the call's deadline is not
    retried either: the SDKs would sleep that long (Anthropic's for any delay), so the call
    fails at once with the delay in the error's ``retry_after``.
    """
    if response.status_code < 400:
        return
    await response.aread()
    error = classify(response.status_code, parse_error_body(response.content), provider="")
    if not error.retryable or _wait_too_long(requested_wait(response.headers)):
        response.headers["x-should-retry"] = "false"
