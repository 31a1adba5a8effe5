"""Prompt-injection defence: wrap untrusted observations and neutralise forged tags."""

from __future__ import annotations

import re

_OPEN = re.compile(r"<(\s*untrusted-content)", re.IGNORECASE)
_CLOSE = re.compile(r"<(\s*/\s*untrusted-content)", re.IGNORECASE)
_ATTR_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def strip_untrusted_tags(text: str) -> str:
    """Escape the ``<`` of any opening or closing ``untrusted-content`` tag inside ``text``.

    Idempotent: escaped tags no longer match.
    """
    if "untrusted" not in text.lower():
        return text
    return _CLOSE.sub(r"&lt;\1", _OPEN.sub(r"&lt;\1", text))


def wrap_untrusted_content(
    content: str, source: str, metadata: dict[str, str] | None = None
) -> str:
    """Wrap ``content`` in an ``<untrusted-content>`` boundary naming its ``source``."""
    attrs = [f'source="{source.replace(chr(34), "&quot;")}"']
    for key in sorted(metadata or {}):
        if _ATTR_KEY.match(key):
            value = (metadata or {})[key].replace('"', "&quot;")
            attrs.append(f'{key}="{value}"')
    body = strip_untrusted_tags(content)
    return f"<untrusted-content {' '.join(attrs)}>\n{body}\n</untrusted-content>"
