"""JSON parsing for text a model, a server or a file sent us: bounded, strict, never crashing.

``json.loads`` on hostile text can raise ``RecursionError`` (deep nesting), ``ValueError`` from
``int`` (thousands of digits), or accept ``NaN``/``Infinity`` and duplicate keys that later
break a provider request. :func:`loads` turns every one of those into a ``ValueError`` with a
readable message, after a linear pre-scan that bounds the nesting depth before the parser
recurses at all.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

#: Deepest nesting accepted by default (objects and arrays).
MAX_DEPTH = 100
#: Longest integer literal accepted by default, in digits.
MAX_INT_DIGITS = 100

# A JSON string (skipped whole) or a bracket; everything else is irrelevant to depth.
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


class JSONLimitError(ValueError):
    """The text is JSON-like but breaks a safety limit (depth, number size, duplicates, NaN)."""


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting in ``text``, ignoring brackets inside strings (linear time)."""
    depth = deepest = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("]", "}"):
            depth -= 1
    return deepest


def loads(
    text: str | bytes,
    *,
    max_depth: int = MAX_DEPTH,
    max_int_digits: int = MAX_INT_DIGITS,
    allow_duplicate_keys: bool = False,
) -> Any:
    """Parse ``text`` as strict JSON within safety limits.

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``), or a limit was broken
            (:class:`JSONLimitError`): nesting deeper than ``max_depth``, an integer longer
            than ``max_int_digits``, a non-finite number, or a repeated key in one object.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONLimitError(f"JSON is not valid UTF-8: {exc}") from exc
    # Fewer opening brackets than the limit cannot nest past it: skip the scan (the usual case).
    opening = text.count("[") + text.count("{")
    depth = nesting_depth(text) if opening > max_depth else 0
    if depth > max_depth:
        raise JSONLimitError(f"JSON nested {depth} levels deep; at most {max_depth} are allowed")

    try:
        if text.startswith("\ufeff"):  # what json.loads refuses before decoding
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        return _decoder(max_int_digits, allow_duplicate_keys).decode(text)
    except RecursionError as exc:  # defensive: the pre-scan should make this unreachable
        raise JSONLimitError("JSON is nested too deeply") from exc


@functools.lru_cache(maxsize=16)
def _decoder(max_int_digits: int, allow_duplicate_keys: bool) -> json.JSONDecoder:
    """One decoder per set of limits: building it (and its hooks) per call is a hot-path cost.

    A decoder keeps no state between calls, so one instance serves every caller.
    """

    def parse_int(literal: str) -> int:
        if len(literal.lstrip("-")) > max_int_digits:
            raise JSONLimitError(
                f"JSON integer with {len(literal)} digits; at most {max_int_digits} are allowed"
            )
        return int(literal)

    def parse_float(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise JSONLimitError(f"JSON number {literal[:40]!r} is out of range")
        return value

    def parse_constant(name: str) -> Any:
        raise JSONLimitError(f"{name} is not valid JSON")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(items)
        if not allow_duplicate_keys and len(result) != len(items):
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    raise JSONLimitError(f"JSON object repeats the key {key[:80]!r}")
                seen.add(key)
        return result

    return json.JSONDecoder(
        parse_int=parse_int,
        parse_float=parse_float,
        parse_constant=parse_constant,
        object_pairs_hook=pairs,
    )
