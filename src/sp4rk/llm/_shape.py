"""Typed reads of a decoded answer: a wrong shape is an ``LLMError`` naming where it is.

Providers read every field through a :class:`Reader`, so ``null`` bodies, lists where objects
belong, numbers where text belongs and missing required fields become one clear error instead
of an ``AttributeError`` deep in a parser. Text is repaired as it is read (lone surrogates
become U+FFFD, :func:`~sp4rk._internal.text.valid_text`), so model text is sanitised once, at
ingestion, and cannot break the next request. Token counts never fail a call: anything that
is not a sane count becomes 0, and huge counts are clamped.
"""

from __future__ import annotations

import math
from typing import Any

from sp4rk._internal.text import valid_text
from sp4rk.llm.errors import LLMError

#: Token counts above this are clamped (no real call uses a billion tokens).
MAX_TOKENS = 1_000_000_000


def kind(value: Any) -> str:
    """What ``value`` is, in words, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def malformed(provider: str, problem: str) -> LLMError:
    """The error for an answer that is not what the API specifies (not retryable)."""
    return LLMError(
        f"{provider}: malformed answer: {problem} (is the server at base_url speaking this "
        "API? a proxy may also have cut or rewritten the answer)"
    )


def token_count(value: Any) -> int:
    """``value`` as a token count: an int in ``0..MAX_TOKENS``; anything else counts 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(0, min(int(value), MAX_TOKENS))


class Reader:
    """Reads fields of one provider's answers; ``where`` arguments name the path read."""

    def __init__(self, provider: str) -> None:
        self.provider = provider

    def error(self, where: str, problem: str) -> LLMError:
        """The malformed-answer error for ``where``."""
        return malformed(self.provider, f"{where} {problem}")

    def object(self, value: Any, where: str) -> dict[str, Any]:
        """``value``, which must be a JSON object."""
        if not isinstance(value, dict):
            raise self.error(where, f"is {kind(value)}, expected an object")
        return value

    def child(
        self, parent: dict[str, Any], key: str, where: str, *, required: bool = False
    ) -> dict[str, Any]:
        """The object at ``parent[key]``; ``{}`` when absent or null, unless ``required``."""
        value = parent.get(key)
        if value is None and not required:
            return {}
        return self.object(value, f"{where}.{key}")

    def items(
        self, parent: dict[str, Any], key: str, where: str, *, required: bool = False
    ) -> list[tuple[str, dict[str, Any]]]:
        """The objects of the list at ``parent[key]``, each with its path.

        ``[]`` when absent or null, unless ``required``.
        """
        value = parent.get(key)
        path = f"{where}.{key}"
        if value is None and not required:
            return []
        if not isinstance(value, list):
            raise self.error(path, f"is {kind(value)}, expected a list")
        return [(f"{path}[{i}]", self.object(item, f"{path}[{i}]")) for i, item in enumerate(value)]

    def text(self, parent: dict[str, Any], key: str, where: str, *, required: bool = False) -> str:
        """The string at ``parent[key]``, repaired; ``""`` when absent or null.

        With ``required``, absent, null and empty are errors.
        """
        value = parent.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str):
            raise self.error(f"{where}.{key}", f"is {kind(value)}, expected a string")
        if required and not value:
            raise self.error(f"{where}.{key}", "is empty")
        return valid_text(value)

    def index(self, parent: dict[str, Any], key: str, where: str) -> int | None:
        """The integer at ``parent[key]`` (a position), ``None`` when absent or null."""
        value = parent.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"{where}.{key}", f"is {kind(value)}, expected an integer")
        return value

    def tokens(self, usage: Any, *keys: str) -> int:
        """The sum of the token counts ``keys`` of a usage object (0 for what is not one)."""
        if not isinstance(usage, dict):
            return 0
        return min(sum(token_count(usage.get(k)) for k in keys), MAX_TOKENS)
