"""``tool_result_read``: page through or search a cached (full) tool result.

What it returns from the cache came from a tool, often an untrusted one, so it is wrapped in
an ``<untrusted-content>`` boundary here, and sp4rk's own header and hints (how to read on)
stay outside it (``ToolResult.self_wrapped``).

The search pattern is the model's, so it runs through ``rg`` (finite automata: linear time,
never catastrophic backtracking) in a process that is killed at :data:`PATTERN_TIMEOUT` or
when the call is cancelled; the event loop and the GIL are never held by it.
"""

from __future__ import annotations

import json

from sp4rk._internal.untrusted import wrap_untrusted_content
from sp4rk.tools.base import ToolError, ToolResult, ToolTraits, own_error
from sp4rk.tools.context import RunContext
from sp4rk.tools.function import own_tool

#: Lines per page when the tool has no ``max_lines`` limit of its own.
DEFAULT_PAGE_LINES = 500
#: Most matching lines a pattern search returns.
MAX_PATTERN_MATCHES = 200
#: Longest line shown by a pattern search, in characters.
MAX_MATCH_LINE_CHARS = 500
#: Longest line shown whole in a page of lines; longer ones are read with ``line=``.
MAX_PAGE_LINE_CHARS = 2000
#: Characters of one line returned per ``line=`` call; ``char_offset`` pages through the rest.
LINE_CHUNK_CHARS = 20_000
#: Seconds a pattern search may take before it is stopped.
PATTERN_TIMEOUT = 10.0
#: Output of ``rg`` read before the search is stopped (its matches are counted up to there).
_RG_MAX_OUTPUT_BYTES = 8 * 1024 * 1024


@own_tool(
    name="tool_result_read",
    untrusted=True,
    traits=ToolTraits(read_only=True, cacheable=False, reads_workspace=True),
)
async def tool_result_read(
    ctx: RunContext,
    hash: str,
    start_line: int = 1,
    num_lines: int = DEFAULT_PAGE_LINES,
    line: int = 0,
    char_offset: int = 0,
    pattern: str = "",
) -> ToolResult:
    """Read the full result of an earlier tool call that was cut, by the hash the cut named.

    Pages through it by line range, returns one whole line, or searches it with a regex.

    Args:
        ctx: the run context.
        hash: the cache hash from the truncation notice (any unique prefix of 8+ characters).
        start_line: first line to return, 1-based.
        num_lines: how many lines to return (capped per tool, usually 500).
        line: return only this one line (overrides the range), up to 20 000 characters.
        char_offset: with ``line``, where in the line to start (to page through long lines).
        pattern: a regular expression (ripgrep syntax); return the matching lines with their
            numbers instead.
    """
    cache = ctx.tool_result_cache
    if cache is None:
        return own_error("Tool result cache not available in this run")
    if not hash.strip():
        return own_error("validation error: hash is required")
    entry = cache.lookup(hash)
    if entry is None:
        return own_error(
            f"no cached result for {hash!r}: it expired, was evicted, or the hash is wrong. "
            "Re-run the original tool call to get the output again."
        )
    problem = cache.coherence_problem(entry.hash)
    if problem:
        raise ToolError(
            f"the cached {entry.tool_name} result is stale: {problem}. "
            "Re-run the original tool to read the current content."
        )
    lines = entry.content.split("\n")
    total = len(lines)
    tool_name = entry.tool_name
    if pattern:
        return await _search(entry.content, total, pattern, tool_name, hash)
    if line > 0:
        if line > total:
            return own_text(
                f"[Line {line} is past end of cached {tool_name} result ({total} lines) "
                f"| hash: {hash}]"
            )
        return _line_chunk(lines[line - 1], line, total, max(char_offset, 0), tool_name, hash)
    limits = ctx.per_tool_truncation or {}
    limit = limits[tool_name].max_lines if tool_name in limits else 0
    cap = limit if limit > 0 else DEFAULT_PAGE_LINES
    num = min(num_lines if num_lines > 0 else DEFAULT_PAGE_LINES, cap)
    start = min(max(start_line, 1), total)
    end = min(start + num - 1, total)
    page = lines[start - 1 : end]
    cut = [n for n, text in enumerate(page, start) if len(text) > MAX_PAGE_LINE_CHARS]
    shown = "\n".join(
        text if len(text) <= MAX_PAGE_LINE_CHARS else text[:MAX_PAGE_LINE_CHARS] + "…"
        for text in page
    )
    notes = []
    if cut:
        listed = ", ".join(str(n) for n in cut[:10]) + (", …" if len(cut) > 10 else "")
        notes.append(
            f"[Line(s) {listed} were cut at {MAX_PAGE_LINE_CHARS} characters; read one whole "
            f'with tool_result_read(hash="{hash}", line=N, char_offset={MAX_PAGE_LINE_CHARS})]'
        )
    if end < total:
        notes.append(
            f'[Use tool_result_read(hash="{hash}", start_line={end + 1}, num_lines={num}) '
            "to continue reading]"
        )
    return _framed(
        f"[Lines {start}-{end} of {total} from cached {tool_name} result | hash: {hash}]",
        shown,
        tool_name,
        notes,
    )


def _framed(header: str, body: str, source: str, notes: list[str]) -> ToolResult:
    """``body`` (cached, untrusted text) wrapped; sp4rk's header and notes outside it."""
    parts = [header, wrap_untrusted_content(body, source)]
    if notes:
        parts.append("\n".join(notes))
    return own_text("\n".join(parts[:2]) + ("\n\n" + parts[2] if len(parts) > 2 else ""))


def own_text(text: str) -> ToolResult:
    """A result whose untrusted parts are wrapped already (or that has none)."""
    return ToolResult(text, self_wrapped=True)


def _line_chunk(
    text: str, number: int, total: int, offset: int, tool: str, hash: str
) -> ToolResult:
    """Up to ``LINE_CHUNK_CHARS`` characters of one line, from ``offset``."""
    end = min(offset + LINE_CHUNK_CHARS, len(text))
    where = f"Line {number} of {total}"
    if len(text) > LINE_CHUNK_CHARS or offset:
        where += f", characters {min(offset, len(text))}-{end} of {len(text)}"
    notes = []
    if end < len(text):
        notes.append(
            f'[Use tool_result_read(hash="{hash}", line={number}, char_offset={end}) '
            "to continue this line]"
        )
    return _framed(
        f"[{where} from cached {tool} result | hash: {hash}]", text[offset:end], tool, notes
    )


def find_rg() -> str:
    """The ``rg`` binary, as the search tools find it.

    Imported on first use: the executor offers this tool in every run, and most runs never
    search a cached result.
    """
    from sp4rk.tools.builtins.search import find_rg as search_find_rg

    return search_find_rg()


async def _search(content: str, total: int, pattern: str, tool_name: str, hash: str) -> ToolResult:
    """The lines of ``content`` that ``pattern`` matches, numbered, found by ``rg``."""
    from sp4rk._internal.proc import allowlisted_environment, run_process
    from sp4rk.tools.builtins.search import rg_text

    outcome = await run_process(
        [find_rg(), "--json", "--no-config", "--text", "--regexp", pattern, "-"],
        cwd="/",
        env=allowlisted_environment(),
        timeout=PATTERN_TIMEOUT,
        max_output_bytes=_RG_MAX_OUTPUT_BYTES,
        kill_on_cap=True,
        input=content.encode("utf-8", "replace"),
    )
    hits: list[str] = []
    errors: list[str] = []
    matched = 0
    counted: int | None = None
    for raw in outcome.output.splitlines():
        try:
            event = json.loads(raw)
        except ValueError:
            if raw.strip():
                errors.append(raw)
            continue
        kind = event.get("type") if isinstance(event, dict) else None
        data = event.get("data") if isinstance(event, dict) else None
        if not isinstance(data, dict):
            continue
        if kind == "match":
            matched += 1
            if len(hits) < MAX_PATTERN_MATCHES:
                text = rg_text(data.get("lines")).rstrip("\r\n")
                if len(text) > MAX_MATCH_LINE_CHARS:
                    text = text[:MAX_MATCH_LINE_CHARS] + "…"
                hits.append(f"{data.get('line_number')}: {text}")
        elif kind == "summary":
            stats = data.get("stats")
            if isinstance(stats, dict) and isinstance(stats.get("matched_lines"), int):
                counted = stats["matched_lines"]
    if outcome.timed_out:
        return own_error(
            f"the pattern search was stopped after {PATTERN_TIMEOUT:g}s. Use a simpler pattern, "
            "or page through the result with start_line and num_lines."
        )
    if outcome.exit_code is not None and outcome.exit_code >= 2 and not hits:
        detail = "\n".join(errors).strip() or f"rg exit status {outcome.exit_code}"
        return own_error(f"invalid pattern {pattern[:200]!r}: {detail[:1000]}")
    count = f"{matched}+" if outcome.capped else str(counted if counted is not None else matched)
    header = (
        f"[{count} line(s) of {total} match {pattern[:200]!r} in cached {tool_name} result "
        f"| hash: {hash}]"
    )
    if not hits:
        return own_text(header)
    notes = []
    if (counted or matched) > len(hits) or outcome.capped:
        notes.append(f"[showing the first {len(hits)}; narrow the pattern to see the rest]")
    return _framed(header, "\n".join(hits), tool_name, notes)
