"""Circuit breakers: one object per kind of unproductive loop, each owning its own count.

The loop shows each breaker what happened (a call about to run, a call's result, a response
cut at the output limit) and acts on the :class:`Verdict` it gets back: go on, nudge the model,
or abort the run (after asking the human for a reprieve). A breaker's state is plain data,
saved with the run's state, so a paused and resumed run keeps every count.

Every threshold tests ``threshold > 0 and count >= threshold``, the abort before the nudge;
a threshold of ``0`` switches that nudge or abort off.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from sp4rk._internal.serde import Serializable
from sp4rk.agent._loop import nudges
from sp4rk.agent.config import CircuitBreakerConfig
from sp4rk.agent.exit_reason import ExitReason
from sp4rk.tools.base import ToolTraits

#: Consecutive retries of a call whose failure was marked retryable that are not counted.
MAX_FORGIVEN_RETRIES = 3


class Verdict(enum.Enum):
    """What a breaker says about the latest event."""

    OK = "ok"
    NUDGE = "nudge"
    ABORT = "abort"


@dataclass(frozen=True, slots=True)
class Trip:
    """What the loop tells the model and reports when a breaker trips."""

    nudge: str
    nudge_event: str
    abort: str
    abort_event: str
    exit_reason: ExitReason
    details: dict[str, object]


@dataclass(frozen=True, slots=True)
class CallResult:
    """What the result breakers see of one executed call (its raw result, before truncation)."""

    tool: str
    key: str
    content: str
    is_error: bool
    retryable: bool = False
    parse_error: bool = False
    traits: ToolTraits = field(default_factory=ToolTraits)


def _tripped(threshold: int, count: int) -> bool:
    return threshold > 0 and count >= threshold


@dataclass(slots=True, kw_only=True)
class Breaker(Serializable):
    """Shared state: a count, whether the one-shot nudge was given, and the abort switch."""

    name: ClassVar[str]
    count: int = 0
    nudged: bool = False
    """The one-shot nudge was given (breakers that nudge once per run until reprieved)."""
    abort_off: bool = False
    """The human answered ``ALLOW_ALWAYS``: this breaker no longer aborts the run."""

    def reset(self) -> None:
        """Start counting afresh (and re-arm the one-shot nudge)."""
        self.count = 0
        self.nudged = False

    def reprieve(self, *, always: bool) -> None:
        """The human let the run go on after an abort; ``always`` switches the abort off."""
        self.reset()
        if always:
            self.abort_off = True

    def _judge(self, nudge_at: int, abort_at: int, *, one_shot: bool) -> Verdict:
        if not self.abort_off and _tripped(abort_at, self.count):
            return Verdict.ABORT
        if not _tripped(nudge_at, self.count):
            return Verdict.OK
        if one_shot:
            if self.nudged:
                return Verdict.OK
            self.nudged = True
        return Verdict.NUDGE

    def trip(self, tool: str) -> Trip:
        """The nudge and abort texts, diagnostics and exit reason at the current count."""
        raise NotImplementedError


# --- identical repeats (checked before the call runs) ---------------------------------------

_WHITESPACE = " \t\r\n"
_DROP_WHITESPACE = str.maketrans("", "", _WHITESPACE)
# A JSON string (kept verbatim), or a run of whitespace outside strings (dropped).
_TOKENS = re.compile(r'("(?:\\.|[^"\\])*")|[ \t\r\n]+')


def _keep_strings(match: re.Match[str]) -> str:
    return match.group(1) or ""


def compact_json(raw: str) -> str:
    """``raw`` with whitespace between JSON tokens removed; strings and numbers untouched."""
    if not any(c in raw for c in _WHITESPACE):
        return raw
    if '"' not in raw:
        return raw.translate(_DROP_WHITESPACE)
    return _TOKENS.sub(_keep_strings, raw)


def call_key(name: str, raw_input: str) -> str:
    """Identity of a call for the repeat breakers: the name and the compacted arguments."""
    return f"{name}:{compact_json(raw_input)}"


@dataclass(slots=True, kw_only=True)
class RepeatBreaker(Breaker):
    """The same call with the same arguments, again and again: it is not run again."""

    name: ClassVar[str] = "repeat"
    key: str = ""
    last_failed: bool = False
    """The last run of ``key`` failed: an identical retry will fail too, so react sooner."""
    forgiven: int = 0
    """Consecutive retries let through because the failure was marked retryable."""

    def before_call(self, key: str, cfg: CircuitBreakerConfig) -> Verdict:
        """Count a call about to run; nudge or abort once it repeats too often."""
        if key == self.key:
            self.count += 1
        else:
            self.key, self.count, self.last_failed, self.forgiven = key, 1, False, 0
        nudge_at, abort_at = cfg.repeat_nudge_threshold, cfg.repeat_abort_threshold
        if self.last_failed:
            nudge_at, abort_at = (max(1, t - 1) if t > 0 else 0 for t in (nudge_at, abort_at))
        return self._judge(nudge_at, abort_at, one_shot=False)

    def after_call(self, result: CallResult) -> None:
        """Remember how the call went; a retryable failure makes its retry a fresh call."""
        if result.key != self.key:
            return
        if result.retryable and self.forgiven < MAX_FORGIVEN_RETRIES:
            self.forgiven += 1
            self.count = 0  # the next identical call is a legitimate retry, not a repeat
            self.last_failed = False
            return
        self.last_failed = result.is_error

    def trip(self, tool: str) -> Trip:  # noqa: D102
        return Trip(
            nudges.repeat_nudge(tool, self.count, self.last_failed),
            "repeated_tool_call_nudge",
            nudges.repeat_abort(tool, self.count),
            "repeated_tool_call_abort",
            ExitReason.REPEAT_ABORT,
            {"tool": tool, "repeat_count": self.count},
        )


# --- responses cut at the output-token limit -------------------------------------------------


@dataclass(slots=True, kw_only=True)
class TruncationBreaker(Breaker):
    """Responses that keep being cut at the output limit while calling tools."""

    name: ClassVar[str] = "truncation"

    def on_truncated(self, cfg: CircuitBreakerConfig) -> Verdict:
        """Count a cut response; every one below the abort threshold is nudged."""
        self.count += 1
        if not self.abort_off and _tripped(cfg.truncation_abort_threshold, self.count):
            return Verdict.ABORT
        return Verdict.NUDGE

    def on_complete_response(self) -> None:
        """A tool-call response arrived whole: the streak is over."""
        self.count = 0

    def trip(self, tool: str) -> Trip:  # noqa: D102
        return Trip(
            nudges.TRUNCATED_RESPONSE_NUDGE,
            "truncation_detected",
            nudges.truncation_abort(tool, self.count),
            "truncation_abort",
            ExitReason.TRUNCATION_ABORT,
            {"tool": tool, "consecutive": self.count},
        )


# --- results of executed calls -----------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class ParseErrorBreaker(Breaker):
    """One tool's input keeps failing to parse. Each failure gets a note; too many abort."""

    name: ClassVar[str] = "parse_error"
    tool: str = ""

    def observe(self, result: CallResult, cfg: CircuitBreakerConfig) -> Verdict:
        """Count a parse error of the same tool; a success resets, other failures do not."""
        if result.parse_error:
            if result.tool == self.tool:
                self.count += 1
            else:
                self.tool, self.count = result.tool, 1
            if not self.abort_off and _tripped(cfg.parse_error_abort_threshold, self.count):
                return Verdict.ABORT
            return Verdict.NUDGE
        if not result.is_error:
            self.tool, self.count = "", 0
        return Verdict.OK

    def trip(self, tool: str) -> Trip:  # noqa: D102
        return Trip(
            "",  # parse errors are noted in the observation, never a separate nudge
            "parse_error_nudge",
            nudges.parse_error_abort(tool, self.count),
            "parse_error_abort",
            ExitReason.PARSE_ERROR_ABORT,
            {"tool": tool, "consecutive_parse_errors": self.count},
        )


# Results that report nothing, however they are worded: empty JSON, "no matches", "0 results".
_NOTHING = re.compile(
    r"^\W*(?:|none|null|nil|empty|nothing(?: found)?|not found|no \w+(?: \w+)?"
    r"|0 \w+(?: found)?|\(no output\))\W*$",
    re.IGNORECASE,
)


def reports_nothing(content: str) -> bool:
    """Whether a short result says only that nothing was found (``""``, ``[]``, ``No matches``)."""
    return _NOTHING.match(content.strip()) is not None


@dataclass(slots=True, kw_only=True)
class FruitlessBreaker(Breaker):
    """Call after call finds (almost) nothing.

    A short result counts as fruitless when the tool is read-only (its whole point is what it
    finds) or when the result says nothing was found. A short acknowledgement from a tool
    with side effects (``[{"affected_rows": 1}]``) is a success, not a fruitless call.
    Failures neither count nor reset; tools with ``brief_results`` reset the count.
    """

    name: ClassVar[str] = "fruitless"

    def observe(self, result: CallResult, cfg: CircuitBreakerConfig) -> Verdict:  # noqa: D102
        if result.traits.brief_results or result.traits.mutating:
            self.count = 0
            return Verdict.OK
        if result.is_error or cfg.fruitless_max_result_len <= 0:
            return Verdict.OK
        text = result.content.strip()
        short = len(text) <= cfg.fruitless_max_result_len
        fruitless = short and (result.traits.read_only or reports_nothing(text))
        self.count = self.count + 1 if fruitless else 0
        return self._judge(
            cfg.fruitless_nudge_threshold, cfg.fruitless_abort_threshold, one_shot=True
        )

    def trip(self, tool: str) -> Trip:  # noqa: D102
        return Trip(
            nudges.fruitless_nudge(self.count),
            "fruitless_nudge",
            nudges.fruitless_abort(self.count),
            "fruitless_abort",
            ExitReason.FRUITLESS_ABORT,
            {"consecutive": self.count},
        )


@dataclass(slots=True, kw_only=True)
class SameToolBreaker(Breaker):
    """One tool called with ever-different arguments while its results stay the same size."""

    name: ClassVar[str] = "same_tool"
    tool: str = ""
    key: str = ""
    size: int = 0
    last_failed: bool = False

    def observe(self, result: CallResult, cfg: CircuitBreakerConfig) -> Verdict:  # noqa: D102
        if result.traits.brief_results or result.traits.mutating:
            self.tool, self.key, self.size, self.count, self.last_failed = "", "", 0, 0, False
            return Verdict.OK
        delta = cfg.same_tool_result_size_delta
        size = len(result.content)
        if result.tool != self.tool or (self.last_failed and not result.is_error):
            self.count = 1
        elif result.key != self.key and delta > 0 and abs(size - self.size) <= delta:
            self.count += 1
        elif result.key != self.key:
            self.count = 1
        self.tool, self.key, self.size = result.tool, result.key, size
        self.last_failed = result.is_error
        return self._judge(
            cfg.same_tool_repeat_nudge_threshold,
            cfg.same_tool_repeat_abort_threshold,
            one_shot=True,
        )

    def trip(self, tool: str) -> Trip:  # noqa: D102
        return Trip(
            nudges.same_tool_nudge(tool, self.count),
            "same_tool_repeat_nudge",
            nudges.same_tool_abort(tool, self.count),
            "same_tool_repeat_abort",
            ExitReason.SAME_TOOL_ABORT,
            {"tool": tool, "consecutive": self.count},
        )


@dataclass(slots=True, kw_only=True)
class BreakerSet(Serializable):
    """Every breaker of one run, and the order in which results reach them."""

    repeat: RepeatBreaker = field(default_factory=RepeatBreaker)
    truncation: TruncationBreaker = field(default_factory=TruncationBreaker)
    parse_error: ParseErrorBreaker = field(default_factory=ParseErrorBreaker)
    fruitless: FruitlessBreaker = field(default_factory=FruitlessBreaker)
    same_tool: SameToolBreaker = field(default_factory=SameToolBreaker)

    def __iter__(self) -> Iterator[Breaker]:
        yield from (self.repeat, self.truncation, self.parse_error, self.fruitless, self.same_tool)

    def named(self, name: str) -> Breaker:
        """The breaker called ``name`` (the reason passed to ``on_step_limit``)."""
        for breaker in self:
            if breaker.name == name:
                return breaker
        raise KeyError(name)

    def observe_result(
        self, result: CallResult, cfg: CircuitBreakerConfig
    ) -> tuple[Breaker, Verdict]:
        """Show an executed call to the result breakers; the first that objects answers.

        One call trips at most one breaker: fruitless, then same-tool, then parse errors
        (whose nudge is a note on the observation rather than a separate message).
        """
        self.repeat.after_call(result)
        verdict = self.fruitless.observe(result, cfg)
        if verdict is not Verdict.OK:
            return self.fruitless, verdict
        verdict = self.same_tool.observe(result, cfg)
        if verdict is not Verdict.OK:
            return self.same_tool, verdict
        return self.parse_error, self.parse_error.observe(result, cfg)
