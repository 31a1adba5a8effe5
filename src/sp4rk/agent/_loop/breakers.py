"""Circuit-breaker bookkeeping: pure counting that returns a verdict; the caller acts on it.

Each breaker tests ``threshold > 0 and count >= threshold``, the abort before the nudge.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.state import BreakerCounters, Run
from sp4rk.agent.hitl import StepLimitResponse
from sp4rk.agent.types import ExitReason

#: Tools exempt from the fruitless and same-tool breakers: they legitimately return little.
EXEMPT_TOOLS = frozenset(
    {
        "write_file",
        "edit_file",
        "create_directory",
        "delete_file",
        "delete_directory",
        "update_checklist",
        "set_step_status",
        "store_fact",
    }
)

_WHITESPACE = " \t\r\n"


@dataclass(frozen=True, slots=True)
class Trip:
    """What the loop says and reports when a breaker on executed calls trips."""

    nudge: str
    nudge_event: str
    abort: str
    abort_event: str
    exit_reason: ExitReason
    details: dict[str, object]


def describe_trip(run: Run, breaker: str, tool: str) -> Trip:
    """The nudge, abort text, diagnostics and exit reason of ``breaker`` at its count."""
    c = run.counters
    if breaker == "fruitless":
        n = c.fruitless
        return Trip(
            nudges.fruitless_nudge(n),
            "fruitless_nudge",
            nudges.fruitless_abort(n),
            "fruitless_abort",
            ExitReason.FRUITLESS_ABORT,
            {"consecutive": n},
        )
    if breaker == "same_tool":
        n = c.same_count
        return Trip(
            nudges.same_tool_nudge(tool, n),
            "same_tool_repeat_nudge",
            nudges.same_tool_abort(tool, n),
            "same_tool_repeat_abort",
            ExitReason.SAME_TOOL_ABORT,
            {"tool": tool, "consecutive": n},
        )
    n = c.parse_count
    return Trip(
        "",  # parse errors are noted in the observation, never a separate nudge
        "parse_error_nudge",
        nudges.parse_error_abort(tool, n),
        "parse_error_abort",
        ExitReason.PARSE_ERROR_ABORT,
        {"tool": tool, "consecutive_parse_errors": n},
    )


class Verdict(enum.Enum):
    """What a breaker says about the latest call."""

    OK = "ok"
    NUDGE = "nudge"
    ABORT = "abort"


def _tripped(threshold: int, count: int) -> bool:
    return threshold > 0 and count >= threshold


def compact_json(raw: str) -> str:
    """``raw`` with whitespace between JSON tokens removed; strings and numbers untouched."""
    if not any(c in raw for c in _WHITESPACE):
        return raw
    if '"' not in raw:
        return raw.translate(_DROP_WHITESPACE)
    return _TOKENS.sub(_keep_strings, raw)


_DROP_WHITESPACE = str.maketrans("", "", _WHITESPACE)
# A JSON string (kept verbatim), or a run of whitespace outside strings (dropped).
_TOKENS = re.compile(r'("(?:\\.|[^"\\])*")|[ \t\r\n]+')


def _keep_strings(match: re.Match[str]) -> str:
    return match.group(1) or ""


def call_key(name: str, raw_input: str) -> str:
    """Identity of a call for the repeat breaker: the name and the compacted arguments."""
    return f"{name}:{compact_json(raw_input)}"


def check_repeat(run: Run, key: str) -> Verdict:
    """Count an identical call (before it runs); nudge or abort past the thresholds."""
    c, cfg = run.counters, run.breaker
    if key == c.repeat_key:
        c.repeat_count += 1
    else:
        c.repeat_key, c.repeat_count, c.repeat_last_error = key, 1, False
    nudge, abort = cfg.repeat_nudge_threshold, cfg.repeat_abort_threshold
    if c.repeat_last_error:
        # An identical call that failed will fail again: react one call earlier.
        nudge, abort = (max(1, t - 1) if t > 0 else 0 for t in (nudge, abort))
    if "repeat" not in c.disabled and _tripped(abort, c.repeat_count):
        return Verdict.ABORT
    if _tripped(nudge, c.repeat_count):
        return Verdict.NUDGE
    return Verdict.OK


def note_result(c: BreakerCounters, key: str, is_error: bool) -> None:
    """Remember whether the last executed call with ``key`` failed."""
    if key == c.repeat_key:
        c.repeat_last_error = is_error


def check_fruitless(run: Run, tool: str, content: str, is_error: bool) -> Verdict:
    """Count calls that return (almost) nothing; errors neither count nor reset."""
    c, cfg = run.counters, run.breaker
    if tool in EXEMPT_TOOLS:
        c.fruitless = 0
        return Verdict.OK
    if is_error:
        return Verdict.OK
    max_len = cfg.fruitless_max_result_len or 32
    c.fruitless = c.fruitless + 1 if len(content.strip()) <= max_len else 0
    if "fruitless" not in c.disabled and _tripped(cfg.fruitless_abort_threshold, c.fruitless):
        return Verdict.ABORT
    if not c.fruitless_nudged and _tripped(cfg.fruitless_nudge_threshold, c.fruitless):
        c.fruitless_nudged = True
        return Verdict.NUDGE
    return Verdict.OK


def check_same_tool(run: Run, tool: str, key: str, content: str, is_error: bool) -> Verdict:
    """Count calls of one tool with different arguments whose results stay similar in size."""
    c, cfg = run.counters, run.breaker
    if tool in EXEMPT_TOOLS:
        c.same_tool, c.same_key, c.same_len, c.same_count, c.same_last_error = "", "", 0, 0, False
        return Verdict.OK
    delta = cfg.same_tool_result_size_delta or 64
    size = len(content)
    if tool != c.same_tool or (c.same_last_error and not is_error):
        c.same_count = 1
    elif key != c.same_key and abs(size - c.same_len) <= delta:
        c.same_count += 1
    elif key != c.same_key:
        c.same_count = 1
    c.same_tool, c.same_key, c.same_len, c.same_last_error = tool, key, size, is_error
    if "same_tool" not in c.disabled and _tripped(
        cfg.same_tool_repeat_abort_threshold, c.same_count
    ):
        return Verdict.ABORT
    if not c.same_nudged and _tripped(cfg.same_tool_repeat_nudge_threshold, c.same_count):
        c.same_nudged = True
        return Verdict.NUDGE
    return Verdict.OK


def check_parse_error(run: Run, tool: str, is_parse_error: bool, is_error: bool) -> Verdict:
    """Count consecutive input-parse errors of one tool; a success resets the count."""
    c = run.counters
    if is_parse_error:
        if tool == c.parse_tool:
            c.parse_count += 1
        else:
            c.parse_tool, c.parse_count = tool, 1
        if "parse_error" not in c.disabled and _tripped(
            run.breaker.parse_error_abort_threshold, c.parse_count
        ):
            return Verdict.ABORT
        return Verdict.NUDGE
    if not is_error:
        c.parse_tool, c.parse_count = "", 0
    return Verdict.OK


def check_truncation(run: Run) -> Verdict:
    """Count consecutive responses cut at the output limit while calling tools."""
    c = run.counters
    c.truncations += 1
    if "truncation" not in c.disabled and _tripped(
        run.breaker.truncation_abort_threshold, c.truncations
    ):
        return Verdict.ABORT
    return Verdict.NUDGE


def reset_breaker(c: BreakerCounters, name: str) -> None:
    """Zero one breaker's counter after a reprieve (and re-arm its one-shot nudge)."""
    if name == "repeat":
        c.repeat_count = 0
    elif name == "truncation":
        c.truncations = 0
    elif name == "parse_error":
        c.parse_count = 0
    elif name == "fruitless":
        c.fruitless, c.fruitless_nudged = 0, False
    elif name == "same_tool":
        c.same_count, c.same_nudged = 0, False


async def reprieve(run: Run, name: str) -> str | None:
    """Ask the HITL handler whether a tripped breaker may let the run go on.

    Returns the nudge to record when it may (the breaker's counter is reset, and switched off
    for the rest of the run on ``ALLOW_ALWAYS``), or ``None`` to abort.
    """
    answer = await run.s.hitl.on_step_limit(run.ctx, run.step, run.eff_max, name)
    if answer not in (
        StepLimitResponse.ALLOW_ONCE,
        StepLimitResponse.ALLOW_MORE,
        StepLimitResponse.ALLOW_ALWAYS,
    ):
        return None
    reset_breaker(run.counters, name)
    always = answer is StepLimitResponse.ALLOW_ALWAYS
    if always:
        run.counters.disabled.add(name)
    run.diag("breaker_reprieve", breaker=name, response=answer.value)
    return nudges.breaker_reprieve(
        name.replace("_", " "), always=always, more=answer is StepLimitResponse.ALLOW_MORE
    )
