"""Text helpers: visible-content checks and UTF-8-safe truncation."""

from __future__ import annotations

import re

#: Characters that carry no visible content (stripped from the right in many places).
INVISIBLE = " \t\n\r\x00\f\v\u200b\u200c\u200d\ufeff"
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_visible_content(text: str) -> bool:
    """Report whether ``text`` holds anything besides whitespace and zero-width characters."""
    return text.rstrip(INVISIBLE) != ""


def valid_text(text: str) -> str:
    """``text`` as valid Unicode for every provider: lone surrogates become U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def byte_len(text: str) -> int:
    """UTF-8 length of ``text`` in bytes."""
    return len(text.encode("utf-8", "surrogatepass"))


def cut_utf8_bytes(text: str, max_bytes: int) -> str:
    """Keep at most ``max_bytes`` UTF-8 bytes of ``text`` without splitting a code point."""
    if max_bytes <= 0:
        return ""
    # Fast path: every code point is at least one byte.
    if len(text) <= max_bytes and byte_len(text) <= max_bytes:
        return text
    return text.encode("utf-8", "surrogatepass")[:max_bytes].decode("utf-8", "ignore")


def truncate_chars(text: str, max_chars: int) -> str:
    """Shorten ``text`` to ``max_chars`` code points, ending with an ellipsis when cut."""
    if max_chars <= 0:
        return ""
    if len(text) <= max_chars:
        return text
    if max_chars == 1:
        return text[:1] + "…"
    return text[: max_chars - 1] + "…"


def head_lines(text: str, max_lines: int) -> tuple[str, bool]:
    """Keep the first ``max_lines`` newline-separated lines; report whether anything was cut."""
    if max_lines <= 0 or text.count("\n") < max_lines:  # the common case, at C speed
        return text, False
    # Find the cut without splitting the whole text: outputs can be megabytes long.
    idx = -1
    for _ in range(max_lines):
        idx = text.find("\n", idx + 1)
        if idx < 0:
            return text, False
    return text[:idx], True


def to_text(data: bytes) -> tuple[str, bool]:
    """Decode bytes as UTF-8, replacing invalid sequences; report whether it looks binary."""
    sample = data[:8192]
    if b"\x00" in sample:
        return "", True
    return data.decode("utf-8", "replace"), False
