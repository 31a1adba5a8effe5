"""Tool results on their way into the context: two-stage truncation and caching.

Stage 1 applies the tool's line/byte limits; the cache keeps the full result (so nothing is
lost); Stage 2 caps what one result may take of the remaining window, in tokens.
"""

from __future__ import annotations

import os
from pathlib import Path

from sp4rk._internal import safejson
from sp4rk._internal.text import byte_len, cut_utf8_bytes
from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.scope import RunScope
from sp4rk.tools.builtins.result_read import DEFAULT_PAGE_LINES
from sp4rk.tools.truncation import apply_line_byte_limits

#: Stage 2 never cuts a result below this many tokens.
MIN_BUDGET_TOKENS = 256


def budget_cap(run: RunScope) -> int:
    """The most tokens one more result may take, or 0 when Stage 2 is off."""
    budget = run.settings.tool_result_budget
    if budget.hard_cap_tokens <= 0:
        return 0
    pending = run.trajectory.pending_tokens(run.settings.token_counter)
    available = max(0, run.cw.available_tokens() - pending)
    return max(
        MIN_BUDGET_TOKENS, min(budget.hard_cap_tokens, int(available * budget.max_fill_fraction))
    )


def process_tool_result(
    run: RunScope,
    tool: str,
    raw_input: str,
    full: str,
    observation: str,
    source: str,
    digest: str,
) -> tuple[str, str, str]:
    """Truncate ``observation`` in two stages and cache ``full``.

    Returns:
        ``(text, notes, cache_hash)``: the (cut) observation, sp4rk's notes on the cut (how
        to read the rest), and the full result's hash when it was cached.
    """
    limits = run.settings.per_tool_truncation.get(tool)
    text, cut_by = apply_line_byte_limits(observation, limits)
    cut = cut_by != ""
    cap = budget_cap(run)
    tokens = run.settings.token_counter.count(text) if cap else 0
    over_budget = cap > 0 and tokens > cap

    cache_hash = ""
    note = ""
    cache = run.cache
    if cache is not None and (run.tools.cacheable(tool) or cut or over_budget):
        path, mtime, size = _file_meta(run, tool, raw_input)
        cache_hash = cache.store(
            tool, full, file_path=path, mtime=mtime, size=size, source=source, digest=digest
        )
        if cut and limits is not None:
            short = cache.short_hash(cache_hash)
            if cut_by == "lines":
                note = nudges.truncated_lines(tool, limits.max_lines, short)
            else:
                page = limits.max_lines if limits.max_lines > 0 else DEFAULT_PAGE_LINES
                note = nudges.truncated_bytes(tool, limits.max_bytes, short, page)
    elif cut:
        note = f"\n\n[Output truncated at the configured {cut_by} limit for '{tool}'.]"

    if over_budget:
        keep = max(1, byte_len(text) * cap // tokens)
        hint_hash = ""
        if cache is not None and cache_hash and not note:
            hint_hash = cache.short_hash(cache_hash)
        text = cut_utf8_bytes(text, keep)
        note = nudges.budget_notice(cap, tokens, hint_hash, tool) + note
    return text, note, cache_hash


_NO_FILE: tuple[None, None, None] = (None, None, None)


def _file_meta(
    run: RunScope, tool: str, raw_input: str
) -> tuple[str | None, float | None, int | None]:
    """Path, mtime and size of the file a call read or wrote (inside the workspace)."""
    argument = run.tools.traits(tool).file_argument
    if not argument or run.tools.content_backed(run.tool_ctx, tool, raw_input):
        return _NO_FILE
    try:
        data = safejson.loads(raw_input)
    except ValueError:
        return _NO_FILE
    path = data.get(argument) if isinstance(data, dict) else None
    if not isinstance(path, str) or not path:
        return _NO_FILE
    workspace = run.ctx.workspace
    p = Path(path)
    if not p.is_absolute():
        if workspace is None:
            return _NO_FILE
        p = workspace / p
    if workspace is not None and not _within(p, workspace):
        return _NO_FILE
    try:
        st = os.stat(p)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return _NO_FILE
    return str(p), st.st_mtime, st.st_size


def _within(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop
        return False
    return True
