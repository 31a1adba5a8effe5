"""Circuit breakers: one object per kind of unproductive loop, each owning its own count.

The loop shows each breaker what happened (a call about to run, a call's result, a response
cut at the output limit) and acts on the :class:`Verdict` it gets back: go on, nudge the model,
or abort the run (after asking the human for a reprieve). A breaker's state is plain data,
saved with the run's state, so a paused and resumed run keeps every count.

Every threshold tests ``threshold > 0 and count >= threshold``, the abort before the nudge;
a threshold of ``0`` switches that nudge or abort off.
"""

from __future__ import annotations

import abc
import enum
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from sp4rk._internal.serde import TRANSIENT, Serializable
from sp4rk._internal.text import truncate_chars
from sp4rk.agent._loop import nudges
from sp4rk.agent.config import MAX_CYCLE_PERIOD, CircuitBreakerConfig
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
    digest: str = ""
    """The result's hash (``compute_tool_result_hash``): equal digests, unchanged result."""


def _tripped(threshold: int, count: int) -> bool:
    return threshold > 0 and count >= threshold


def _sooner(threshold: int, by: int) -> int:
    """``threshold`` lowered by ``by`` but not below 1 (``0`` stays off)."""
    return max(1, threshold - by) if threshold > 0 else 0


@dataclass(slots=True, kw_only=True)
class Breaker(Serializable, abc.ABC):
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

    @abc.abstractmethod
    def trip(self, tool: str) -> Trip:
        """The nudge and abort texts, diagnostics and exit reason at the current count."""


# --- identical repeats (checked before the call runs) ---------------------------------------

_WHITESPACE = " \t\r\n"
_DROP_WHITESPACE = str.maketrans("", "", _WHITESPACE)
# A JSON string (kept verbatim), or a run of whitespace outside strings (dropped).
_TOKENS = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")|[ \t\r\n]+')  # strings: unrolled loop


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
    """The same call with the same arguments, again and again: it is not run again.

    It reacts one call sooner when the identical call failed (it will fail again). A call
    whose result changed since its last run (a status being polled) starts a fresh count,
    and so does the retry of a failure the tool marked retryable.
    """

    name: ClassVar[str] = "repeat"
    key: str = ""
    last_failed: bool = False
    """The last run of ``key`` failed: an identical retry will fail too."""
    digest: str = ""
    """The result of the last run of ``key``."""
    forgiven: int = 0
    """Consecutive retries let through because the failure was marked retryable."""

    def before_call(self, key: str, traits: ToolTraits, cfg: CircuitBreakerConfig) -> Verdict:
        """Count a call about to run; nudge or abort once it repeats too often."""
        if traits.pollable:  # calling it again is how a pollable tool is used
            self.key, self.count, self.forgiven = "", 0, 0  # and it ends another call's streak
            self.last_failed, self.digest = False, ""
            return Verdict.OK
        if key == self.key:
            self.count += 1
        else:
            self.key, self.count, self.forgiven = key, 1, 0
            self.last_failed = False
            self.digest = ""
        nudge_at, abort_at = cfg.repeat_nudge_threshold, cfg.repeat_abort_threshold
        if self.last_failed:
            nudge_at, abort_at = _sooner(nudge_at, 1), _sooner(abort_at, 1)
        return self._judge(nudge_at, abort_at, one_shot=False)

    def after_call(self, result: CallResult) -> None:
        """Remember how the call went; a changed result or a retryable failure is progress."""
        if result.key != self.key:
            return
        if result.retryable and self.forgiven < MAX_FORGIVEN_RETRIES:
            self.forgiven += 1
            self.count = 0  # the next identical call is a legitimate retry, not a repeat
            self.last_failed = False
            return
        if self.digest and result.digest != self.digest:
            self.count = 1  # polling: the result moved, so this call starts a new streak
        self.digest = result.digest
        self.last_failed = result.is_error

    def trip(self, tool: str) -> Trip:  # noqa: D102
        return Trip(
            nudges.repeat_nudge(tool, self.count, last_was_error=self.last_failed),
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
    last_error: str = ""
    """The latest parse error (cut short): the abort says why the input kept failing."""

    def observe(self, result: CallResult, cfg: CircuitBreakerConfig) -> Verdict:
        """Count a parse error of the same tool; a success resets, other failures do not."""
        if result.parse_error:
            self.last_error = truncate_chars(result.content.strip(), MAX_LAST_ERROR_CHARS)
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
            nudges.parse_error_abort(tool, self.count, self.last_error),
            "parse_error_abort",
            ExitReason.PARSE_ERROR_ABORT,
            {"tool": tool, "consecutive_parse_errors": self.count},
        )


#: How much of the last parse error the parse-error breaker keeps (it is saved with the state).
MAX_LAST_ERROR_CHARS = 500

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
    """One tool called with ever-different arguments, and nothing new comes back.

    It counts calls of one tool whose results stay within a size delta of each other and
    bring nothing new: a failure, a result that found nothing, or one this streak already
    returned. New content (the next page of a log, a different search hit) is progress, and
    so is a tool with side effects answering with something (``{"id": 7}``, a bulk insert).
    """

    name: ClassVar[str] = "same_tool"
    tool: str = ""
    key: str = ""
    size: int = 0
    last_failed: bool = False
    seen: list[str] = field(default_factory=list)
    """Digests of the results this streak returned (bounded)."""

    def observe(self, result: CallResult, cfg: CircuitBreakerConfig) -> Verdict:  # noqa: D102
        nothing = result.is_error or reports_nothing(result.content)
        acknowledgement = not (result.traits.read_only or nothing)
        if not result.is_error and (
            result.traits.brief_results or result.traits.mutating or acknowledgement
        ):
            # A tool that may act, answering with something (an id, a row count): a success.
            # Its failures count like any other: an edit that keeps failing is no progress.
            self._restart("", "", 0, "", failed=False)
            return Verdict.OK
        delta = cfg.same_tool_result_size_delta
        size = len(result.content)
        new = not nothing and result.digest not in self.seen
        if result.tool != self.tool or (self.last_failed and not result.is_error) or new:
            self._restart(result.tool, result.key, size, result.digest, failed=result.is_error)
        elif result.key != self.key and delta > 0 and abs(size - self.size) <= delta:
            self.count += 1
            self.key, self.size, self.last_failed = result.key, size, result.is_error
            self._remember(result.digest)
        elif result.key != self.key:
            self._restart(result.tool, result.key, size, result.digest, failed=result.is_error)
        return self._judge(
            cfg.same_tool_repeat_nudge_threshold,
            cfg.same_tool_repeat_abort_threshold,
            one_shot=True,
        )

    def _restart(self, tool: str, key: str, size: int, digest: str, *, failed: bool) -> None:
        self.tool, self.key, self.size, self.last_failed = tool, key, size, failed
        self.count = 1 if tool else 0
        self.seen = [digest] if digest else []

    def _remember(self, digest: str) -> None:
        if digest and digest not in self.seen:
            self.seen.append(digest)
            del self.seen[:-CYCLE_MEMORY]

    def trip(self, tool: str) -> Trip:  # noqa: D102
        return Trip(
            nudges.same_tool_nudge(tool, self.count),
            "same_tool_repeat_nudge",
            nudges.same_tool_abort(tool, self.count),
            "same_tool_repeat_abort",
            ExitReason.SAME_TOOL_ABORT,
            {"tool": tool, "consecutive": self.count},
        )


#: Calls the cycle breaker remembers: two turns of the longest cycle a config may ask for.
CYCLE_MEMORY = 2 * MAX_CYCLE_PERIOD
#: Distinct (call, result) pairs the no-progress breaker remembers.
SEEN_MEMORY = 4096


@dataclass(slots=True, kw_only=True)
class CycleBreaker(Breaker):
    """A sequence of calls (A-B-A-B, A-B-C-A-B-C …) repeating with unchanged results.

    Each breaker on its own sees nothing: the calls differ from one to the next. This one
    keeps the recent (call, result) pairs and finds the shortest period, from 2 to
    ``cycle_max_period``, that the latest calls repeat exactly. A result that changed (a file
    edited between two reads) breaks the cycle: that is progress.
    """

    name: ClassVar[str] = "cycle"
    recent: list[str] = field(default_factory=list)
    """The latest (call, result) pairs, each as one string."""
    period: int = 0
    """The period of the cycle being repeated (``0``: none)."""

    def reset(self) -> None:
        """Start counting afresh: the count is read off ``recent``, so forget it too."""
        Breaker.reset(self)  # slotted dataclass: no zero-argument super()
        self.recent.clear()
        self.period = 0

    def observe(self, result: CallResult, cfg: CircuitBreakerConfig) -> Verdict:  # noqa: D102
        if result.traits.pollable or result.retryable:
            return Verdict.OK
        self.recent.append(f"{result.key}\x00{result.digest}")
        del self.recent[:-CYCLE_MEMORY]
        self.period, self.count = _cycle(self.recent, cfg.cycle_max_period)
        if not self.period:
            self.nudged = False
            return Verdict.OK
        nudge_at = self.period * cfg.cycle_nudge_threshold
        abort_at = nudge_at + cfg.cycle_abort_threshold if cfg.cycle_abort_threshold else 0
        if not cfg.cycle_nudge_threshold:
            abort_at = 0  # no nudge, no abort: the breaker is off
        return self._judge(nudge_at, abort_at, one_shot=True)

    def trip(self, tool: str) -> Trip:  # noqa: D102
        return Trip(
            nudges.cycle_nudge(self.period, self.count),
            "cycle_nudge",
            nudges.cycle_abort(self.period, self.count),
            "cycle_abort",
            ExitReason.CYCLE_ABORT,
            {"period": self.period, "repeated_calls": self.count},
        )


def _cycle(recent: list[str], max_period: int) -> tuple[int, int]:
    """The shortest period (2..max) the tail of ``recent`` repeats, and how many calls do.

    A period counts only when it spans at least two different calls (one call repeated is the
    repeat breaker's business) and at least one call repeats it.
    """
    best = (0, 0)
    if not recent or recent.count(recent[-1]) < 2:
        return best  # the latest call is new: no period can repeat it (the usual case)
    for period in range(2, max_period + 1):
        repeated = 0
        for i in range(len(recent) - 1, period - 1, -1):
            if recent[i] != recent[i - period]:
                break
            repeated += 1
        if repeated and len(set(recent[-period:])) > 1 and repeated > best[1]:
            best = (period, repeated)
    return best


@dataclass(slots=True, kw_only=True)
class NoProgressBreaker(Breaker):
    """Call after call brings nothing new: each is a call that already returned that result.

    Unlike the cycle breaker it needs no pattern: re-reading unchanged files and listings in
    any order is caught too. A call with other arguments, or whose result changed, is new;
    so is a pollable status that moved (an unchanged one neither counts nor resets).
    """

    name: ClassVar[str] = "no_progress"
    seen: list[str] = field(default_factory=list)
    """Digests of the (call, result) pairs seen in this run, oldest first (bounded)."""
    _index: set[str] = field(
        default_factory=set, init=False, repr=False, compare=False, metadata=TRANSIENT
    )
    """``seen`` as a set, so that a step's check does not scan the run's history."""

    def observe(self, result: CallResult, cfg: CircuitBreakerConfig) -> Verdict:  # noqa: D102
        if result.retryable:
            return Verdict.OK
        pair = _pair_digest(result.key, result.digest)
        seen, index = self.seen, self._index
        if len(index) != len(seen):  # restored from a checkpoint, or ``seen`` was replaced
            index.clear()
            index.update(seen)
        if pair in index:
            if result.traits.pollable:
                return Verdict.OK  # an unchanged status is waiting, not a loop of its own
            self.count += 1
        else:
            self.count = 0
            self.nudged = False
            seen.append(pair)
            index.add(pair)
            if len(seen) > SEEN_MEMORY:
                index.difference_update(seen[:-SEEN_MEMORY])
                del seen[:-SEEN_MEMORY]
        return self._judge(
            cfg.no_progress_nudge_threshold, cfg.no_progress_abort_threshold, one_shot=True
        )

    def forget(self) -> None:
        """Start afresh: every result counts as new again."""
        self.seen.clear()
        self._index.clear()
        self.count = 0

    def count_unrun_repeat(self) -> None:
        """A repeated call the repeat breaker answered instead of running brought nothing new.

        It only counts: the repeat breaker speaks for that call.
        """
        self.count += 1

    def trip(self, tool: str) -> Trip:  # noqa: D102
        return Trip(
            nudges.no_progress_nudge(self.count),
            "no_progress_nudge",
            nudges.no_progress_abort(self.count),
            "no_progress_abort",
            ExitReason.NO_PROGRESS_ABORT,
            {"calls_without_progress": self.count},
        )


def _pair_digest(key: str, digest: str) -> str:
    """A short stable digest of a call and its result (kept for the whole run)."""
    return hashlib.blake2b(
        f"{key}\x00{digest}".encode("utf-8", "replace"), digest_size=12
    ).hexdigest()


@dataclass(slots=True, kw_only=True)
class BreakerSet(Serializable):
    """Every breaker of one run, and the order in which results reach them."""

    repeat: RepeatBreaker = field(default_factory=RepeatBreaker)
    truncation: TruncationBreaker = field(default_factory=TruncationBreaker)
    parse_error: ParseErrorBreaker = field(default_factory=ParseErrorBreaker)
    fruitless: FruitlessBreaker = field(default_factory=FruitlessBreaker)
    same_tool: SameToolBreaker = field(default_factory=SameToolBreaker)
    cycle: CycleBreaker = field(default_factory=CycleBreaker)
    no_progress: NoProgressBreaker = field(default_factory=NoProgressBreaker)

    def __iter__(self) -> Iterator[Breaker]:
        yield from (
            self.repeat,
            self.truncation,
            self.parse_error,
            self.fruitless,
            self.same_tool,
            self.cycle,
            self.no_progress,
        )

    def context_compacted(self) -> None:
        """The model lost old results from its context: re-reading them is progress again."""
        self.no_progress.forget()
        self.cycle.recent.clear()

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

        Every breaker sees every call; one call trips at most one of them. An abort wins
        over a nudge; among equals the order is fruitless, same-tool, cycle, no-progress, parse
        errors (whose nudge is a note on the observation rather than a separate message).
        """
        self.repeat.after_call(result)
        verdicts: list[tuple[Breaker, Verdict]] = [
            (self.fruitless, self.fruitless.observe(result, cfg)),
            (self.same_tool, self.same_tool.observe(result, cfg)),
            (self.cycle, self.cycle.observe(result, cfg)),
            (self.no_progress, self.no_progress.observe(result, cfg)),
            (self.parse_error, self.parse_error.observe(result, cfg)),
        ]
        for wanted in (Verdict.ABORT, Verdict.NUDGE):
            for breaker, verdict in verdicts:
                if verdict is wanted:
                    return breaker, verdict
        return self.parse_error, Verdict.OK
