"""The credentials a provider was given, and masking them wherever text leaves the process.

A provider's redaction set holds every credential it can send: the API key (passed or read
from the environment by the SDK), the value of every header it sends that is not known to be
harmless (``Authorization``, ``x-api-key``, any custom gateway header), the token part of
``Bearer``/``Basic`` values, query-parameter values and a password in the base URL. The set
masks exception text, the SDK exception kept as ``__cause__`` (its ``request`` and
``response`` are replaced by masked copies), dumps, cassettes and logs; a logging filter on the
SDKs' and their HTTP library's loggers masks what those log (a URL with a key in its query,
typically). Anything shaped like a well-known key (``sk-...``, ``AIza...``) is masked too,
even when no provider knew it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

_MASK = "[REDACTED]"
_KEY_LIKE = re.compile(r"\b(sk-(?:ant-|proj-)?|AIza|xai-|gsk_)[A-Za-z0-9_\-]{12,}")
#: Known secrets shorter than this are not masked (they would mask ordinary words).
MIN_SECRET = 4
#: Headers whose values are never credentials (the SDKs' own platform headers included).
_HARMLESS_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "content-type",
        "user-agent",
        "anthropic-version",
        "anthropic-beta",
        "openai-beta",
        "http-referer",
        "x-title",
        "connection",
    }
)
_HARMLESS_PREFIXES = ("x-stainless-",)
_AUTH_SCHEME = re.compile(r"^\s*[A-Za-z][A-Za-z0-9_-]*\s+(\S+)\s*$")
#: Nesting past which a value is replaced rather than walked (it came from a server).
_MAX_DEPTH = 200
#: The loggers of the SDKs and of their HTTP libraries: records they create are masked.
SDK_LOGGERS = (
    "openai",
    "openai._base_client",
    "openai._legacy_response",
    "openai._response",
    "anthropic",
    "anthropic._base_client",
    "anthropic._response",
    "anthropic._tracing",
    "httpx",
    "httpx2",
    "httpcore",
)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every known secret (4 characters or more) and every key-like word masked."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_SECRET and secret in text:
            text = text.replace(secret, _MASK)
    return _KEY_LIKE.sub(lambda m: f"{m.group(1)}{_MASK}", text)


def redact_value(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (a decoded JSON body, say) with secrets masked in every string it holds."""
    secrets = tuple(secrets)
    return map_strings(value, lambda text: redact(text, secrets))


def map_strings(value: Any, fn: Callable[[str], str], depth: int = 0) -> Any:
    """A copy of ``value`` (JSON-like) with ``fn`` applied to every string in it, keys too.

    A value nested deeper than any real body is replaced by a note, so a hostile body cannot
    exhaust the stack here.
    """
    if isinstance(value, str):
        return fn(value)
    if depth > _MAX_DEPTH and isinstance(value, dict | list | tuple):
        return "[nested too deeply]"
    if isinstance(value, dict):
        return {
            fn(k) if isinstance(k, str) else k: map_strings(v, fn, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        items = [map_strings(item, fn, depth + 1) for item in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def credentials(
    *,
    keys: Iterable[object] = (),
    headers: Mapping[str, object] | None = None,
    query: Mapping[str, object] | None = None,
    urls: Iterable[object] = (),
) -> frozenset[str]:
    """Every secret among a client's keys, headers, query parameters and URLs.

    Args:
        keys: API keys and tokens (non-strings are skipped).
        headers: the headers sent with every request; all values count but those of
            :data:`_HARMLESS_HEADERS` and the SDKs' ``x-stainless-*`` headers.
        query: query parameters sent with every request (all values count).
        urls: base URLs; their query values and password count.
    """
    found: set[str] = {k for k in keys if isinstance(k, str)}
    for name, value in (headers or {}).items():
        lowered = str(name).lower()
        if lowered in _HARMLESS_HEADERS or lowered.startswith(_HARMLESS_PREFIXES):
            continue
        if isinstance(value, str):
            found.add(value.strip())
            if match := _AUTH_SCHEME.match(value):  # "Bearer <token>", "Basic <b64>"
                found.add(match.group(1))
    found |= {v for v in (query or {}).values() if isinstance(v, str)}
    for url in urls:
        with contextlib.suppress(ValueError):
            parts = urlsplit(str(url))
            found |= {value for _, value in parse_qsl(parts.query)}
            if parts.password:
                found.add(parts.password)
    return frozenset(s for s in found if len(s) >= MIN_SECRET)


def scrub_exception(exc: BaseException, secrets: Iterable[str]) -> None:
    """Mask secrets in an exception and in every exception chained to it.

    The text (``args``, ``message``), the error ``body`` a server sent back, and the HTTP
    ``request``/``response`` the SDKs keep (headers with the raw key, a URL with one in its
    query, a body echoing it) are replaced by masked copies, so neither a chained traceback
    nor code inspecting ``__cause__`` can show a key.
    """
    secrets = tuple(secrets)
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(redact_value(a, secrets) for a in current.args)
        for name in ("message", "body"):
            value = getattr(current, name, None)
            if value is not None:
                with contextlib.suppress(AttributeError):  # a read-only property
                    setattr(current, name, redact_value(value, secrets))
        _scrub_http(current, secrets)
        current = current.__cause__ or current.__context__


def _scrub_http(exc: BaseException, secrets: tuple[str, ...]) -> None:
    """Replace the exception's ``request`` and ``response`` by masked copies."""
    request = _masked_request(_attribute(exc, "request"), secrets)
    response = _masked_response(_attribute(exc, "response"), request, secrets)
    for name, value in (("request", request), ("response", response)):
        if value is not None:
            with contextlib.suppress(AttributeError, TypeError, RuntimeError):
                setattr(exc, name, value)


def _attribute(exc: BaseException, name: str) -> Any:
    try:  # httpx's ``request`` property raises when none was set
        return getattr(exc, name, None)
    except RuntimeError:
        return None


def _masked_headers(headers: Any, secrets: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(k, redact(v, secrets)) for k, v in headers.multi_items()]


def _masked_request(request: Any, secrets: tuple[str, ...]) -> Any:
    """A copy of an httpx request with masked URL, headers and body (``None`` if not one)."""
    if request is None or not hasattr(request, "headers") or not hasattr(request, "url"):
        return None
    try:
        content = request.content
    except Exception:  # a streamed body not read: nothing of it kept
        content = b""
    try:
        return type(request)(
            request.method,
            redact(str(request.url), secrets),
            headers=_masked_headers(request.headers, secrets),
            content=_masked_bytes(content, secrets),
        )
    except Exception:
        return None


def _masked_response(response: Any, request: Any, secrets: tuple[str, ...]) -> Any:
    """A copy of an httpx response with masked headers and body (``None`` if not one)."""
    if response is None or not hasattr(response, "status_code"):
        return None
    try:
        content = response.content
    except Exception:  # never read (a stream): the copy has no body
        content = b""
    try:
        return type(response)(
            response.status_code,
            headers=_masked_headers(response.headers, secrets),
            content=_masked_bytes(content, secrets),
            request=request,
        )
    except Exception:
        return None


def _masked_bytes(content: bytes, secrets: tuple[str, ...]) -> bytes:
    return redact(content.decode("utf-8", "replace"), secrets).encode("utf-8")


class _SecretsFilter(logging.Filter):
    """Masks the known secrets in records of the loggers it is attached to."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._secrets: frozenset[str] = frozenset()

    def add(self, secrets: Iterable[str]) -> None:
        with self._lock:
            self._secrets = self._secrets | frozenset(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self._secrets
        try:
            message = record.getMessage()
        except Exception:  # a broken format: leave it to the handler to report
            return True
        masked = redact(message, secrets)
        if masked != message:
            record.msg, record.args = masked, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info), secrets)
        return True


_FILTER = _SecretsFilter()
_installed = False
_install_lock = threading.Lock()


def mask_in_sdk_logs(secrets: Iterable[str]) -> None:
    """Mask ``secrets`` in what the SDKs and their HTTP libraries log, from now on."""
    global _installed
    _FILTER.add(secrets)
    with _install_lock:
        if not _installed:
            for name in SDK_LOGGERS:
                logging.getLogger(name).addFilter(_FILTER)
            _installed = True
