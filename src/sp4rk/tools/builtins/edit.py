"""``edit_file``: exact string replacement, with errors that show the model where to look.

A missing ``old_string`` is the most common failure of a model editing code: a wrong
indentation, a stale copy, a line-number prefix pasted along. The error therefore shows the
nearest candidates in the file with their line numbers; an ambiguous match says where every
occurrence is. Several edits in one call apply in order and all or nothing.
"""

from __future__ import annotations

import difflib
import heapq
from dataclasses import dataclass

from sp4rk.tools.base import Tool, ToolError, ToolPolicy
from sp4rk.tools.builtins.files import encode_text, read_text_file, write_atomic
from sp4rk.tools.builtins.paths import Confinement
from sp4rk.tools.context import RunContext
from sp4rk.tools.function import tool

#: Largest file edit_file loads.
MAX_EDIT_BYTES = 32 * 1024 * 1024
#: Candidates shown when old_string is not found.
MAX_CANDIDATES = 3
#: Best-scoring windows kept before overlapping ones are dropped.
_KEPT_WINDOWS = 20
#: Least similarity (0..1) for a region to be shown as a candidate.
MIN_SIMILARITY = 0.6
#: Fuzzy search only runs below these sizes (it is quadratic in the worst case).
MAX_FUZZY_WINDOWS = 20_000
MAX_FUZZY_CHARS = 4000
#: Characters of each candidate shown.
MAX_SNIPPET_CHARS = 600
#: Occurrence line numbers listed for an ambiguous match.
MAX_LISTED_OCCURRENCES = 10


@dataclass(frozen=True, slots=True)
class Edit:
    """One replacement: ``old_string`` must occur exactly once when it is applied."""

    old_string: str
    new_string: str


def edit_tools(fs: Confinement) -> list[Tool]:
    """``edit_file`` bound to ``fs``."""

    @tool(name="edit_file", policy=ToolPolicy.USER_CONFIRM)
    def edit_file(
        ctx: RunContext,
        path: str,
        old_string: str = "",
        new_string: str = "",
        edits: list[Edit] | None = None,
    ) -> str:
        """Replace an exact, unique piece of text in a file; several edits may be given at once.

        Give either old_string and new_string, or a list of edits applied in order. Each
        old_string must match the file exactly once (whitespace included); add surrounding
        lines to make it unique. Nothing is written unless every edit applies.

        Args:
            ctx: the run context.
            path: the file, relative to the workspace (or absolute inside it).
            old_string: the exact text to replace.
            new_string: the replacement text.
            edits: several {old_string, new_string} replacements, applied in order.
        """
        if edits and (old_string or new_string):
            raise ToolError("give either old_string/new_string or edits, not both")
        changes = list(edits) if edits else [Edit(old_string, new_string)]
        for number, change in enumerate(changes, start=1):
            if not change.old_string:
                raise ToolError(
                    _prefix(number, len(changes)) + "validation error: old_string is required"
                )
        target, text = read_text_file(
            fs, ctx, path, max_bytes=MAX_EDIT_BYTES, tool_name="edit_file"
        )
        for number, change in enumerate(changes, start=1):
            try:
                text = apply_edit(text, change.old_string, change.new_string)
            except ToolError as exc:
                raise ToolError(
                    f"{_prefix(number, len(changes))}{exc}\nThe file was not changed."
                ) from None
        write_atomic(target, encode_text(text))
        if len(changes) == 1:
            return "successfully edited file"
        return f"successfully edited file ({len(changes)} edits applied)"

    return [edit_file]


def _prefix(number: int, total: int) -> str:
    return f"edit {number} of {total}: " if total > 1 else ""


def apply_edit(text: str, old: str, new: str) -> str:
    """``text`` with the single occurrence of ``old`` replaced by ``new``.

    A file with CRLF line endings also matches an ``old`` written with plain newlines.

    Raises:
        ToolError: when ``old`` does not occur, occurs more than once, or equals ``new``.
    """
    if old == new:
        raise ToolError("old_string and new_string are identical; there is nothing to change")
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        crlf_old = old.replace("\n", "\r\n")
        crlf_count = text.count(crlf_old)
        if crlf_count:
            old, new, count = crlf_old, new.replace("\n", "\r\n"), crlf_count
    if count == 0:
        raise ToolError("old_string not found in file." + _candidates_note(text, old))
    if count > 1:
        lines = _occurrence_lines(text, old)
        listed = ", ".join(str(n) for n in lines[:MAX_LISTED_OCCURRENCES])
        more = ", …" if len(lines) > MAX_LISTED_OCCURRENCES else ""
        raise ToolError(
            f"old_string is not unique, found {count} occurrences (starting at lines "
            f"{listed}{more}). Include more surrounding lines to make it unique."
        )
    return text.replace(old, new, 1)


def _occurrence_lines(text: str, old: str) -> list[int]:
    lines: list[int] = []
    at = text.find(old)
    while at >= 0:
        lines.append(text.count("\n", 0, at) + 1)
        at = text.find(old, at + len(old))
    return lines


def _candidates_note(text: str, old: str) -> str:
    candidates = nearest_candidates(text, old)
    if not candidates:
        return " Re-read the file with read_file and copy the exact text, whitespace included."
    parts = [" The closest regions of the file are:"]
    for first, last, ratio, snippet in candidates:
        where = f"line {first}" if first == last else f"lines {first}-{last}"
        parts.append(f"--- {where} ({round(ratio * 100)}% similar):\n{snippet}")
    parts.append("Copy the exact text from one of these (whitespace included) and retry.")
    return "\n".join(parts)


def nearest_candidates(text: str, old: str) -> list[tuple[int, int, float, str]]:
    """Regions of ``text`` most similar to ``old``: ``(first_line, last_line, ratio, text)``.

    Windows of as many lines as ``old`` are compared with :class:`difflib.SequenceMatcher`;
    only those at least :data:`MIN_SIMILARITY` similar are returned, best first.
    """
    lines = text.splitlines()
    width = max(1, len(old.strip("\n").splitlines()))
    windows = len(lines) - width + 1
    if windows <= 0 or windows > MAX_FUZZY_WINDOWS or len(old) > MAX_FUZZY_CHARS:
        return []
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(old.strip("\n"))
    best: list[tuple[float, int]] = []
    for start in range(windows):
        matcher.set_seq1("\n".join(lines[start : start + width]))
        floor = best[0][0] if len(best) == _KEPT_WINDOWS else MIN_SIMILARITY
        if matcher.real_quick_ratio() < floor or matcher.quick_ratio() < floor:
            continue
        ratio = matcher.ratio()
        if ratio < floor:
            continue
        if len(best) == _KEPT_WINDOWS:
            heapq.heapreplace(best, (ratio, start))
        else:
            heapq.heappush(best, (ratio, start))
    result: list[tuple[int, int, float, str]] = []
    for ratio, start in sorted(best, key=lambda item: (-item[0], item[1])):
        if len(result) == MAX_CANDIDATES:
            break
        if any(first - width <= start < first - 1 + width for first, _, _, _ in result):
            continue  # overlaps a better candidate
        snippet = "\n".join(lines[start : start + width])
        if len(snippet) > MAX_SNIPPET_CHARS:
            snippet = snippet[:MAX_SNIPPET_CHARS] + "…"
        result.append((start + 1, start + width, ratio, snippet))
    return result
