"""Short human-readable summaries of tool inputs (for vulnerable-output listings).

Values are formatted the way the reference (Go, ``fmt`` ``%v``) prints decoded JSON: numbers
as float64 (``42``, ``3.5``, ``1e+06``), lists as ``[a b]``, objects as ``map[k:v]`` with sorted
keys, ``true``/``false`` and ``<nil>``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from sp4rk._internal import safejson
from sp4rk._internal.text import byte_len, truncate_chars

_HINT_KEYS = ("path", "file_path", "file", "pattern", "query", "command", "url")
#: Longest hint, in UTF-8 bytes (longer ones are cut to this many characters).
MAX_HINT_BYTES = 60


def input_hint(raw_input: str) -> str:
    """The most telling argument of a call: its path, pattern, query, command or URL."""
    try:
        data = safejson.loads(raw_input)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    for key in _HINT_KEYS:
        if key in data and data[key] not in (None, ""):
            text = go_format(data[key])
            return truncate_chars(text, MAX_HINT_BYTES) if byte_len(text) > MAX_HINT_BYTES else text
    for key in sorted(data):
        value = data[key]
        if isinstance(value, str) and value and byte_len(value) <= MAX_HINT_BYTES:
            return value
    return ""


def go_format(value: Any) -> str:
    """``value`` (decoded JSON) as Go's ``fmt.Sprint`` prints it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, int | float):
        return _go_float(float(value))
    if isinstance(value, list):
        return "[" + " ".join(go_format(v) for v in value) + "]"
    if isinstance(value, dict):
        items = " ".join(f"{k}:{go_format(value[k])}" for k in sorted(value))
        return f"map[{items}]"
    return str(value)


def _go_float(f: float) -> str:
    """``f`` as Go's ``%v`` prints a float64: shortest digits, ``%e`` from 1e+06 and below 1e-04."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign, digits, exponent = Decimal(repr(f)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = len(text) + exponent  # the decimal point's position after the first digit
    exp = point - 1
    minus = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{minus}{text}{'0' * (point - len(text))}"
    return f"{minus}{text[:point]}.{text[point:]}"
