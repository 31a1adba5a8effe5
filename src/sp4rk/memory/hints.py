"""Short human-readable summaries of tool inputs (for vulnerable-output listings)."""

from __future__ import annotations

import json

from sp4rk._internal.text import truncate_chars

_HINT_KEYS = ("path", "file_path", "file", "pattern", "query", "command", "url")
MAX_HINT_CHARS = 60


def input_hint(raw_input: str) -> str:
    """The most telling argument of a call: its path, pattern, query, command or URL."""
    try:
        data = json.loads(raw_input)
    except json.JSONDecodeError:
        return ""
    if not isinstance(data, dict):
        return ""
    for key in _HINT_KEYS:
        if key in data and data[key] not in (None, ""):
            value = data[key]
            text = value if isinstance(value, str) else json.dumps(value)
            return truncate_chars(text, MAX_HINT_CHARS)
    for key in sorted(data):
        value = data[key]
        if isinstance(value, str) and value and len(value) <= MAX_HINT_CHARS:
            return value
    return ""
