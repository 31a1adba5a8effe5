r"""Tool input as it arrives from a model: bounded JSON, valid text, or a parse error.

A model (or an attacker steering one) can send JSON nested 100,000 deep, a 5,000-digit
number, ``NaN`` or a key twice. ``json.loads`` turns those into a crash or into values that
break a provider request later; here each becomes a ``ValueError`` whose message the
registry and the tools return as a parse-error observation (``PARSE_ERROR_PREFIX``), which
the executor's parse-error breaker counts. Lone surrogates (``"\ud800"``) are replaced by
U+FFFD at this edge, so no tool and no later request ever sees one.
"""

from __future__ import annotations

import json
from typing import Any

from sp4rk._internal import safejson
from sp4rk._internal.text import valid_text

#: Inputs that mean "no arguments".
_EMPTY_INPUTS = ("", "null")

#: The text :func:`checked_input` last returned and its parsed, valid value. The registry
#: checks an input and the tool then parses that very text: one parse serves both. The value
#: is handed out once (a tool may change its arguments) and only for the same string object.
_checked: tuple[str, Any] | None = None


def parse_tool_input(input: str) -> dict[str, Any]:
    """The arguments object of a tool call (``{}`` for an empty input or ``null``).

    Raises:
        ValueError: with a message for the model: not JSON, past a safety limit (depth,
            number size, ``NaN``/``Infinity``, a repeated key), or not a JSON object.
    """
    global _checked
    checked, _checked = _checked, None
    if checked is not None and checked[0] is input:
        value, valid = checked[1], True
    elif input.strip() in _EMPTY_INPUTS:
        return {}
    else:
        value, valid = _load(input), False
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {_json_type(value)}")
    cleaned: dict[str, Any] = value if valid else _valid(value)
    return cleaned


def checked_input(input: str) -> str:
    """``input`` when it is safe JSON (or empty), else a sanitised re-encoding of it.

    What the registry hands a tool: a tool that parses the text itself with ``json.loads``
    can then neither crash on it nor see a lone surrogate.

    Raises:
        ValueError: as :func:`parse_tool_input` does, except that any JSON value passes.
    """
    global _checked
    if not input.strip():
        return input
    value = _load(input)
    cleaned = _valid(value)
    if not (cleaned == value and valid_text(input) == input):
        input = json.dumps(cleaned, ensure_ascii=False)
    _checked = (input, cleaned) if isinstance(cleaned, dict) else None
    return input


def _load(text: str) -> Any:
    try:
        return safejson.loads(text)
    except safejson.JSONLimitError as exc:
        raise ValueError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg} at position {exc.pos})") from None


def _valid(value: Any) -> Any:
    """``value`` with every string (keys included) made valid Unicode."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, list):
        return [_valid(v) for v in value]
    if isinstance(value, dict):
        return {valid_text(k): _valid(v) for k, v in value.items()}
    return value


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number"}
    names[float] = "a number"
    return "null" if value is None else names.get(type(value), type(value).__name__)
