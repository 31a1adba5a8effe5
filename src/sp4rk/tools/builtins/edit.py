"""``edit_file``: exact string replacement, with errors that show the model where to look.

A missing ``old_string`` is the most common failure of a model editing code: a wrong
indentation, a stale copy, a line-number prefix pasted along. The error therefore shows the
nearest candidates in the file with their line numbers (each inside an
``<untrusted-content>`` boundary: the file may say anything, and edit_file's own output is
not wrapped as a whole); an ambiguous match says where every
occurrence is. Several edits in one call apply in order and all or nothing.
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections import Counter
from dataclasses import dataclass

from sp4rk._internal.untrusted import wrap_untrusted_content
from sp4rk.tools.base import Tool, ToolError, ToolPolicy
from sp4rk.tools.builtins.files import EDITS_FILE, encode_text, read_text_file, write_atomic
from sp4rk.tools.builtins.paths import Confinement
from sp4rk.tools.context import RunContext
from sp4rk.tools.function import tool

#: Largest file edit_file loads.
MAX_EDIT_BYTES = 32 * 1024 * 1024
#: Candidates shown when old_string is not found.
MAX_CANDIDATES = 3
#: Least similarity (0..1) for a region to be shown as a candidate.
MIN_SIMILARITY = 0.6
#: The near-match search is skipped for an old_string or a file larger than these.
MAX_FUZZY_CHARS = 16_000
MAX_FUZZY_TEXT_CHARS = 2 * 1024 * 1024
#: Work units (about one character compared each) one near-match search may spend.
MAX_FUZZY_WORK = 4_000_000
#: Regions scored in full, the best of the line-level pass.
_SHORTLIST = 12
#: Characters of a line compared when a region is scored in full.
_SCORED_LINE_CHARS = 200
#: Characters of each candidate shown.
MAX_SNIPPET_CHARS = 600
#: Occurrence line numbers listed for an ambiguous match.
MAX_LISTED_OCCURRENCES = 10

_TOKEN = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True, slots=True)
class Edit:
    """One replacement: ``old_string`` must occur exactly once when it is applied."""

    old_string: str
    new_string: str


def edit_tools(fs: Confinement) -> list[Tool]:
    """``edit_file`` bound to ``fs``."""

    @tool(name="edit_file", policy=ToolPolicy.USER_CONFIRM, traits=EDITS_FILE)
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
        how = "differs only in whitespace" if ratio == 1 else f"{round(ratio * 100)}% similar"
        # File content in a trusted tool's message: it gets a boundary of its own.
        parts.append(f"--- {where} ({how}):\n{wrap_untrusted_content(snippet, 'edit_file')}")
    parts.append("Copy the exact text from one of these (whitespace included) and retry.")
    return "\n".join(parts)


class WorkBudget:
    """Counts the work a search spends and says when it is used up."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0

    def charge(self, units: int) -> bool:
        """Spend ``units``; ``False`` (nothing spent) when that would pass the limit."""
        if self.spent + units > self.limit:
            return False
        self.spent += units
        return True


def nearest_candidates(
    text: str, old: str, budget: WorkBudget | None = None
) -> list[tuple[int, int, float, str]]:
    """Regions of ``text`` most similar to ``old``: ``(first_line, last_line, ratio, text)``.

    Regions are as many lines long as ``old``. A cheap line-level pass ranks every region
    (lines of ``old`` it holds exactly, and how many words its first and last lines share
    with those of ``old``); only the best few are then scored character by character,
    line against line, within a fixed work budget. Regions at least
    :data:`MIN_SIMILARITY` similar are returned, best first. Large inputs are skipped.

    Args:
        text: the file's text.
        old: the text that was not found.
        budget: the work allowed (default :data:`MAX_FUZZY_WORK`); it records what was spent.
    """
    budget = budget if budget is not None else WorkBudget(MAX_FUZZY_WORK)
    wanted = old.strip("\n").splitlines() or [old]
    width = len(wanted)
    if len(old) > MAX_FUZZY_CHARS or len(text) > MAX_FUZZY_TEXT_CHARS:
        return []
    if not budget.charge(len(text)):
        return []
    lines = text.splitlines()
    if len(lines) < width:
        return []
    scored: list[tuple[float, int]] = []
    for start in _shortlist(lines, wanted):
        ratio = _region_ratio(lines[start : start + width], wanted, budget)
        if ratio is None:
            break  # out of budget: keep what was scored
        if ratio >= MIN_SIMILARITY:
            scored.append((ratio, start))
    result: list[tuple[int, int, float, str]] = []
    for ratio, start in sorted(scored, key=lambda item: (-item[0], item[1])):
        if len(result) == MAX_CANDIDATES:
            break
        if any(first - width <= start < first - 1 + width for first, _, _, _ in result):
            continue  # overlaps a better candidate
        snippet = "\n".join(lines[start : start + width])
        if len(snippet) > MAX_SNIPPET_CHARS:
            snippet = snippet[:MAX_SNIPPET_CHARS] + "…"
        result.append((start + 1, start + width, ratio, snippet))
    return result


def _shortlist(lines: list[str], wanted: list[str]) -> list[int]:
    """Start lines of the regions worth scoring in full, best first (linear in the file)."""
    width = len(wanted)
    keys = [" ".join(line.split()) for line in lines]
    need = Counter(" ".join(line.split()) for line in wanted)
    edges = [i for i, line in enumerate(wanted) if line.strip()] or [0]
    head, tail = edges[0], edges[-1]
    head_tokens, tail_tokens = _tokens(wanted[head]), _tokens(wanted[tail])
    line_tokens: dict[int, frozenset[str]] = {}

    def overlap(index: int, tokens: frozenset[str]) -> float:
        if index not in line_tokens:
            line_tokens[index] = _tokens(lines[index])
        return _jaccard(line_tokens[index], tokens)

    have: Counter[str] = Counter()
    exact = 0
    ranked: list[tuple[float, int]] = []
    for end in range(len(lines)):
        key = keys[end]
        if have[key] < need[key]:
            exact += 1
        have[key] += 1
        start = end - width + 1
        if start > 0:
            gone = keys[start - 1]
            have[gone] -= 1
            if have[gone] < need[gone]:
                exact -= 1
        if start < 0:
            continue
        score = exact + overlap(start + head, head_tokens)
        if tail != head:
            score += overlap(start + tail, tail_tokens)
        ranked.append((score, start))
    return [start for _, start in heapq.nlargest(_SHORTLIST, ranked, key=lambda r: r[0])]


def _region_ratio(region: list[str], wanted: list[str], budget: WorkBudget) -> float | None:
    """Similarity of ``region`` to ``wanted``, line against line, weighted by length.

    Returns:
        The ratio, or ``None`` when the budget cannot pay for it.
    """
    pairs = [
        (" ".join(a.split())[:_SCORED_LINE_CHARS], " ".join(b.split())[:_SCORED_LINE_CHARS])
        for a, b in zip(region, wanted, strict=True)
    ]
    if not budget.charge(sum(len(a) * len(b) + len(a) + len(b) for a, b in pairs)):
        return None
    matched = total = 0.0
    for a, b in pairs:
        weight = max(len(a), len(b), 1)
        total += weight
        if a == b:
            matched += weight
        elif a and b:
            matched += weight * difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
    return matched / total


def _tokens(line: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(line))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)
