"""Glob and ``.gitignore`` patterns, matched in time linear in the path, whatever the pattern.

Why not translate a glob into a Python regular expression: ``re`` backtracks, and a pattern
such as ``"**/" * 16 + "*.zzz"`` (or ``*a*a*a*a*a*b`` in a ``.gitignore`` a model wrote)
then takes minutes on a deep path while holding the GIL, so the event loop stops and
cancellation never lands. Here a path is matched one component at a time against a small
state machine: ``**`` is a state that may stay, so no choice is ever retried. Inside one
component, ``*`` uses the classic single-backtrack wildcard algorithm (time: name length ×
pattern length), or a compiled regex when there are at most two stars (bounded, and at C
speed). Brace alternatives (``{a,b}``) expand to at most :data:`MAX_ALTERNATIVES` patterns.

Semantics: ``*``, ``?`` and ``[...]`` (``[!...]`` or ``[^...]`` negates) stay within one
path component; ``**`` as a whole component matches any number of components, none
included, except at the end of a pattern, where it matches one or more (``src/**`` is what
is inside ``src``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

#: Most patterns one glob may expand to through ``{a,b}`` alternatives.
MAX_ALTERNATIVES = 256
#: Longest pattern accepted, in characters.
MAX_PATTERN_CHARS = 4096
#: Components with at most this many ``*`` are matched with a compiled regex (bounded cost).
_REGEX_STARS = 2


class GlobError(ValueError):
    """A pattern that cannot be used (too long, too many alternatives, a bad class)."""


class _Star:
    """``*`` inside a component."""

    __slots__ = ()


class _Any:
    """``?``: any one character."""

    __slots__ = ()


_STAR = _Star()
_ANY = _Any()
_GLOBSTAR = "**"

_Token = str | _Star | _Any | re.Pattern[str]


class _Component:
    """One component of a pattern: literal text, or wildcards matched without backtracking."""

    __slots__ = ("_literal", "_regex", "_tokens")

    def __init__(self, text: str) -> None:
        tokens = _tokens(text)
        self._tokens = tokens
        self._literal: str | None = None
        self._regex: re.Pattern[str] | None = None
        if all(isinstance(t, str) for t in tokens):
            self._literal = "".join(t for t in tokens if isinstance(t, str))
        elif sum(t is _STAR for t in tokens) <= _REGEX_STARS:
            self._regex = re.compile("".join(_regex_of(t) for t in tokens) + r"\Z", re.DOTALL)

    def match(self, name: str) -> bool:
        if self._literal is not None:
            return name == self._literal
        if self._regex is not None:
            return self._regex.match(name) is not None
        return _wildcard_match(self._tokens, name)


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "*":
            while i < n and text[i] == "*":
                i += 1
            out.append(_STAR)
            continue
        if c == "?":
            out.append(_ANY)
        elif c == "[":
            start = i + 2 if text.startswith(("[!", "[^"), i) else i + 1
            end = text.find("]", start + 1 if text[start : start + 1] == "]" else start)
            if end < 0:
                out.append(c)
            else:
                body = text[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                try:
                    out.append(re.compile("[" + body.replace("\\", "\\\\") + "]"))
                except re.error as exc:
                    raise GlobError(f"bad character class [{text[i + 1 : end]}]: {exc}") from None
                i = end + 1
                continue
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(text[i])
        else:
            out.append(c)
        i += 1
    return out


def _regex_of(token: _Token) -> str:
    if token is _STAR:
        return ".*"
    if token is _ANY:
        return "."
    if isinstance(token, re.Pattern):
        return token.pattern
    assert isinstance(token, str)
    return re.escape(token)


def _one(token: _Token, ch: str) -> bool:
    if token is _ANY:
        return True
    if isinstance(token, re.Pattern):
        return token.match(ch) is not None
    return token == ch


def _wildcard_match(tokens: Sequence[_Token], name: str) -> bool:
    """Whether ``name`` matches; only the last ``*`` is ever retried (len × len time)."""
    p = n = 0
    star = -1
    resume = 0
    while n < len(name):
        if p < len(tokens) and tokens[p] is _STAR:
            star, resume = p, n
            p += 1
        elif p < len(tokens) and _one(tokens[p], name[n]):
            p += 1
            n += 1
        elif star >= 0:
            resume += 1
            p, n = star + 1, resume
        else:
            return False
    while p < len(tokens) and tokens[p] is _STAR:
        p += 1
    return p == len(tokens)


@dataclass(frozen=True, slots=True)
class _Alternative:
    """One brace-free pattern, as components (``**`` stays the string ``"**"``)."""

    parts: tuple[_Component | str, ...]

    def states_after(self, names: Sequence[str]) -> list[set[int]]:
        """The states reached after each prefix of ``names`` (index 0: before any)."""
        parts = self.parts
        last = len(parts)

        def close(states: set[int]) -> set[int]:
            todo = list(states)
            while todo:
                i = todo.pop()
                # A ``**`` may match no component, except as the last part of the pattern.
                if i < last - 1 and parts[i] == _GLOBSTAR and i + 1 not in states:
                    states.add(i + 1)
                    todo.append(i + 1)
            return states

        states = close({0})
        history = [states]
        for name in names:
            following: set[int] = set()
            for i in states:
                if i == last:
                    continue
                part = parts[i]
                if part == _GLOBSTAR:
                    following.update((i, i + 1))
                elif isinstance(part, _Component) and part.match(name):
                    following.add(i + 1)
            states = close(following)
            history.append(states)
            if not states:
                break
        return history


class Glob:
    """A compiled glob; :meth:`match` takes a relative, ``/``-separated path.

    Raises:
        GlobError: from the constructor, for a pattern that is too long, expands to too many
            alternatives, or holds a bad character class.
    """

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise GlobError(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
        self.pattern = pattern
        self._alternatives = [_compile(p) for p in expand_braces(pattern)]

    def match(self, path: str) -> bool:
        """Whether the whole of ``path`` matches."""
        return self.match_parts(path.split("/"))

    def match_parts(self, names: Sequence[str]) -> bool:
        """Whether the path made of the components ``names`` matches."""
        for alternative in self._alternatives:
            history = alternative.states_after(names)
            if len(history) == len(names) + 1 and len(alternative.parts) in history[-1]:
                return True
        return False

    def match_prefixes(self, names: Sequence[str]) -> list[bool]:
        """For each ``k`` in ``1..len(names)``: whether ``names[:k]`` matches (one pass)."""
        found = [False] * len(names)
        for alternative in self._alternatives:
            end = len(alternative.parts)
            for k, states in enumerate(alternative.states_after(names)[1:]):
                if end in states:
                    found[k] = True
        return found


def _compile(pattern: str) -> _Alternative:
    parts: list[_Component | str] = []
    for text in pattern.split("/"):
        if text == _GLOBSTAR:
            if not parts or parts[-1] != _GLOBSTAR:  # **/** is **
                parts.append(_GLOBSTAR)
        elif text:  # a doubled or trailing slash adds nothing
            parts.append(_Component(text))
    return _Alternative(tuple(parts))


def expand_braces(pattern: str) -> list[str]:
    """``pattern`` with every ``{a,b}`` group expanded (nested groups too).

    A ``{`` without a matching ``}``, or a group without a comma, is literal text.

    Raises:
        GlobError: when the expansion passes :data:`MAX_ALTERNATIVES` patterns.
    """
    start = _open_brace(pattern)
    if start < 0:
        return [pattern]
    end, choices = _brace_group(pattern, start)
    if end < 0:
        # Not a group: keep the brace literal and expand what follows it.
        return [pattern[: start + 1] + rest for rest in expand_braces(pattern[start + 1 :])]
    head, tail = pattern[:start], pattern[end + 1 :]
    out: list[str] = []
    tails = expand_braces(tail)
    for choice in choices:
        for middle in expand_braces(choice):
            for rest in tails:
                out.append(head + middle + rest)
                if len(out) > MAX_ALTERNATIVES:
                    raise GlobError(
                        f"the pattern's {{a,b}} groups expand to more than {MAX_ALTERNATIVES} "
                        "patterns; use fewer alternatives"
                    )
    return out


def _open_brace(pattern: str) -> int:
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "{":
            return i
        i += 1
    return -1


def _brace_group(pattern: str, start: int) -> tuple[int, list[str]]:
    """The index of the ``}`` closing the group at ``start`` and its choices (``-1``: none)."""
    depth, i, last = 0, start, start + 1
    choices: list[str] = []
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                choices.append(pattern[last:i])
                return (i, choices) if len(choices) > 1 else (-1, [])
        elif c == "," and depth == 1:
            choices.append(pattern[last:i])
            last = i + 1
        i += 1
    return -1, []


@dataclass(frozen=True, slots=True)
class IgnorePattern:
    """One ``.gitignore`` line: what it matches, whether it re-includes, directories only."""

    glob: Glob
    negate: bool
    dir_only: bool

    def matches(self, names: Sequence[str], is_dir: bool) -> bool:
        """Whether the line applies to the path made of the components ``names``.

        An ignoring line also applies below a directory it matches; a re-including (``!``)
        line applies only to what it matches itself.
        """
        hits = self.glob.match_prefixes(names)
        if not self.negate and any(hits[:-1]):
            return True  # a directory above it is ignored, and so is everything inside
        return bool(hits) and hits[-1] and (is_dir or not self.dir_only)


def parse_gitignore(text: str) -> list[IgnorePattern]:
    """The patterns of a ``.gitignore`` file, in order (later ones win).

    Lines that cannot be used (a bad class, too many alternatives) are skipped.
    """
    patterns = []
    for raw in text.splitlines():
        line = _strip_trailing_spaces(raw)
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate or line.startswith(("\\!", "\\#")):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        # A pattern with a slash (other than a trailing one) is anchored to its directory;
        # any other pattern matches at every depth.
        line = line.lstrip("/") if "/" in line else "**/" + line
        try:
            patterns.append(IgnorePattern(Glob(line), negate, dir_only))
        except GlobError:
            continue
    return patterns


def _strip_trailing_spaces(line: str) -> str:
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        return stripped[:-1] + " "
    return stripped
