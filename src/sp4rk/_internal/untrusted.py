"""Prompt-injection defence: wrap untrusted observations and neutralise forged tags.

A forged tag need not be spelled in ASCII to read as one: ``＜/untrusted-content>``
(fullwidth), ``</untrusted\u00adcontent>`` (a soft hyphen), ``<\u200b/UNTRUSTED-content>`` (a
zero-width space, capitals). Before tags are looked for, the text after each ``<`` (or a
character that normalises to one) is read the way a reader sees it: NFKC-normalised,
case-folded, with format characters (Unicode category Cf) and other invisible ones skipped,
and any dash (or none) where the name has its hyphen.
Only the ``<`` of a tag found that way is escaped; everything else is kept as it was.
"""

from __future__ import annotations

import re
import unicodedata

_ATTR_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
#: Characters that NFKC-normalise to ``<``: the ASCII one, fullwidth and small forms.
_LESS_THAN = re.compile("[<\ufe64\uff1c]")
#: What follows ``<`` in a tag, once normalised (an optional ``/`` comes first).
_TAG_NAME = "untrusted-content"
#: Invisible characters that are not in category Cf (joiners, fillers, selectors).
_ALSO_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u3164\uffa0")


def _invisible(ch: str) -> bool:
    if unicodedata.category(ch) == "Cf" or ch in _ALSO_INVISIBLE:
        return True
    code = ord(ch)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF  # variation selectors


def _is_dash(ch: str) -> bool:
    return ch == "-" or ch == "\u2212" or unicodedata.category(ch) == "Pd"


def _opens_tag(text: str, start: int) -> bool:
    """Whether ``text[start]`` (a ``<``) begins an ``untrusted-content`` tag as read."""
    wanted = _TAG_NAME
    matched = 0
    slash_allowed = True
    for i in range(start + 1, len(text)):
        ch = text[i]
        if _invisible(ch):
            continue
        for c in unicodedata.normalize("NFKC", ch).casefold():
            if c.isspace() and matched == 0:
                continue
            if c == "/" and matched == 0 and slash_allowed:
                slash_allowed = False
                continue
            if wanted[matched] == "-":
                matched += 1  # the hyphen may be any dash, or missing (a soft hyphen)
                if _is_dash(c):
                    continue
            if c != wanted[matched]:
                return False
            matched += 1
            if matched == len(wanted):
                return True
    return False


def strip_untrusted_tags(text: str) -> str:
    """Escape the ``<`` of any opening or closing ``untrusted-content`` tag inside ``text``.

    Lookalikes count (see the module docstring). Idempotent: escaped tags no longer match.
    """
    if text.isascii():
        if "untrusted" not in text.lower():
            return text
    elif not _LESS_THAN.search(text):
        return text
    out: list[str] = []
    last = 0
    for match in _LESS_THAN.finditer(text):
        at = match.start()
        if _opens_tag(text, at):
            out += [text[last:at], "&lt;"]
            last = at + 1
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


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
