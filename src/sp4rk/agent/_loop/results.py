"""Tool results on their way into the context: two-stage truncation and caching.

Stage 1 applies the tool's line/byte limits; the cache keeps the full result (so nothing is
lost); Stage 2 caps what one result may take of the remaining window, in tokens.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sp4rk._internal.text import byte_len, cut_utf8_bytes
from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.state import Run
from sp4rk.tools.base import CacheMode
from sp4rk.tools.builtins.result_read import DEFAULT_PAGE_LINES
from sp4rk.tools.truncation import apply_line_byte_limits

#: Tools whose results are tied to a file: the cache records its mtime and size.
FILE_TOOLS = frozenset({"read_file", "write_file", "edit_file"})
#: Stage 2 never cuts a result below this many tokens.
MIN_BUDGET_TOKENS = 256


def budget_cap(run: Run) -> int:
    """The most tokens one more result may take, or 0 when Stage 2 is off."""
    budget = run.s.tool_result_budget
    if budget.hard_cap_tokens <= 0:
        return 0
    available = max(0, run.cw.available_tokens() - run.pending_tokens())
    return max(
        MIN_BUDGET_TOKENS, min(budget.hard_cap_tokens, int(available * budget.max_fill_fraction))
    )


def process_tool_result(
    run: Run, tool: str, raw_input: str, full: str, observation: str, source: str
) -> tuple[str, str]:
    """Truncate ``observation`` in two stages and cache ``full``; return ``(text, cache_hash)``."""
    limits = run.s.per_tool_truncation.get(tool)
    text, cut_by = apply_line_byte_limits(observation, limits)
    cut = cut_by != ""
    cap = budget_cap(run)
    tokens = run.s.token_counter.count(text) if cap else 0
    over_budget = cap > 0 and tokens > cap

    cache_hash = ""
    note = ""
    cache = run.cache
    if cache is not None and (tool not in run.s.non_cacheable or cut or over_budget):
        path, mtime, size = _file_meta(run, tool, raw_input)
        cache_hash = cache.store(tool, full, file_path=path, mtime=mtime, size=size, source=source)
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
        text = cut_utf8_bytes(text, keep) + nudges.budget_notice(cap, tokens, hint_hash, tool)
    return text + note, cache_hash


_NO_FILE: tuple[None, None, None] = (None, None, None)


def _file_meta(run: Run, tool: str, raw_input: str) -> tuple[str | None, float | None, int | None]:
    """Path, mtime and size of the file a read/write/edit touched (inside the workspace)."""
    if tool not in FILE_TOOLS:
        return _NO_FILE
    if tool == "read_file" and (
        run.tools.cache_strategy(run.tool_ctx, tool, raw_input) is CacheMode.CONTENT_BACKED
    ):
        return _NO_FILE
    try:
        data = json.loads(raw_input)
    except json.JSONDecodeError:
        return _NO_FILE
    path = data.get("path") if isinstance(data, dict) else None
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
    except OSError:
        return _NO_FILE
    return str(p), st.st_mtime, st.st_size


def _within(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return True
