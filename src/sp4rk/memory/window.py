"""``ContextWindow``: the prompt history of one run, its token accounting and its compaction.

Everything is incremental. ``add_step`` renders only the new step (a step joining a response
group replaces the group's assistant message and appends one result) and counts only its
messages; ``build_prompt`` copies the message list and prunes at most the outputs that just
fell out of the protected tail. A compaction costs what can end up in the prompt, never the
whole run: without a strategy it rewrites the current prompt (masking and fitting only what is
new since the last compaction, dropping what cannot fit), and a strategy is only shown the
newest steps that could still fit the window (what lies before them is carried as a rolling
summary when the strategy summarises).

Token accounting: ``used = extra + scale * local``. ``local`` is the counter's estimate of the
prompt, kept up to date message by message; ``scale`` and ``extra`` calibrate it to the
provider's counts (tokenizer differences scale with the prompt, tool definitions do not). Both
are fitted to the recent ``(local, provider count)`` pairs, so they hold after a compaction
shrinks ``local``, and every estimate (fill, available tokens, compaction targets) uses them.
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from sp4rk._core.context import CompactionResult, CompactionStrategy, FillCheck, VulnerableOutput
from sp4rk._core.trajectory import Step
from sp4rk._internal.conformance import conforms
from sp4rk._internal.text import INVISIBLE
from sp4rk.llm.errors import ContextWindowExceededError
from sp4rk.llm.tokens import SimpleTokenCounter, TokenCounter
from sp4rk.llm.types import ContentBlock, Message
from sp4rk.memory.compaction import (
    EVICTED_MARK,
    ResultRefs,
    RollingSummarizer,
    StepRange,
    masked_observation,
    summary_message,
    untrusted_sources,
)
from sp4rk.memory.fit import OMITTED_NOTE, Sized, last_turn_start, shrink, smallest_tokens
from sp4rk.memory.hints import input_hint
from sp4rk.memory.render import (
    CallIds,
    is_blank,
    render_unit,
    tool_message,
    unit_start,
    wrap_for,
)
from sp4rk.memory.validate import history_problems
from sp4rk.tools.result_cache import ToolResultCache

logger = logging.getLogger("sp4rk.memory")

#: System-prompt separator: each part becomes its own system message (for prompt caching).
CACHE_BREAK = "\x00CACHE_BREAK\x00"
#: The user message put before a history that would otherwise open with the assistant (no
#: task text): providers require the first turn to be the user's.
NO_TASK_TEXT = "(no task text)"
#: Most entries ``vulnerable_outputs`` reports (the newest).
MAX_VULNERABLE = 20
#: Tool results the fallback masking keeps verbatim when pruning is off (``keep_last_n=0``).
FALLBACK_KEEP_LAST = 10
#: A strategy's result is kept when the fill after it is at most this share of the compact
#: threshold: a compaction that leaves the window nearly full would run again a step later.
ACCEPT_RATIO = 0.7
#: When it is not, the fallbacks shrink the history to this share of the compact threshold.
FIT_TARGET_RATIO = 0.5
#: A provider count below this share of the local estimate is not trusted (cache-read tokens
#: reported apart from input tokens would otherwise make the window look empty). It is also
#: the smallest ``scale``.
MIN_CORRECTION_RATIO = 0.5
#: Provider counts the calibration is fitted to (the most recent).
CALIBRATION_SAMPLES = 16
#: The samples give ``scale`` and ``extra`` apart once their local sizes differ by this share of
#: the largest; until then ``extra`` is at most :data:`MAX_GUESSED_EXTRA_SHARE` of the window.
CALIBRATION_SPREAD = 0.2
#: Most of the usable window a single count may attribute to a fixed part (tool definitions).
MAX_GUESSED_EXTRA_SHARE = 0.1
#: How far into a tool message an eviction reference's mark is looked for (past a boundary).
EVICTED_MARK_WITHIN = 300
#: The first step shown to a strategy is rounded down to a multiple of this (then to the start
#: of its response group), so it moves in jumps and summaries of blocks stay memoised.
HORIZON_QUANTUM = 240


@dataclass
class _Rolling:
    """The running summary of steps ``[first, through)``, which no strategy is shown any more."""

    first: int
    through: int
    text: str = ""
    sources: set[str] = field(default_factory=set)  # tools of the untrusted steps it covers


class ContextWindow:
    """The prompt history of one run: renders steps into messages and keeps them in budget.

    Args:
        max_tokens: the model's context window.
        output_limit: tokens reserved for the reply (``max_tokens`` of each request).
        token_counter: estimates tokens; calibrated by ``correct_token_count``.
        system_prompt: system text; ``CACHE_BREAK`` splits it into several system messages.
        task: the user's task (text or content blocks), the first user message. It is never
            compacted. Without one, a ``(no task text)`` user message opens any history that
            would otherwise start with the assistant.
        strategy: how ``compact`` compresses the history. ``None`` masks old tool results in
            the current prompt. A strategy is shown the newest steps that could still fit
            (a ``StepRange``); older ones become a note, or a rolling summary when the strategy
            is a ``RollingSummarizer``. Whatever the strategy, ``compact`` falls back to
            masking when it fails or returns an invalid history, and shrinks further (cutting,
            then dropping the oldest turns, summaries last) when the result is still too large.
        keep_last_n: tool outputs always shown in full once pruning starts (0 = never prune).
        prune_threshold_percent: fill at which older tool outputs are pruned from the prompt
            (replaced by a cache reference when cached, else a placeholder). Pruning is sticky:
            a pruned output stays pruned, so the prompt prefix stays stable for caching.
        safety_margin_percent: share of the window kept free for estimation error.
        thresholds: fill percentages for ``compact``, ``warning`` and ``emergency``; at or
            above 100 % of the usable window the status is ``reject``.

    Raises:
        ValueError: for sizes or percentages out of range.
    """

    def __init__(
        self,
        max_tokens: int = 128_000,
        output_limit: int = 4096,
        *,
        token_counter: TokenCounter | None = None,
        system_prompt: str = "",
        task: str | Sequence[ContentBlock] = "",
        strategy: CompactionStrategy | None = None,
        keep_last_n: int = 3,
        prune_threshold_percent: int = 50,
        safety_margin_percent: int = 5,
        thresholds: tuple[int, int, int] = (85, 92, 98),
    ) -> None:
        if max_tokens <= 0 or output_limit <= 0:
            raise ValueError("max_tokens and output_limit must be positive")
        if not 0 <= safety_margin_percent < 100:
            raise ValueError("safety_margin_percent must be in [0, 100)")
        if not 0 <= prune_threshold_percent <= 100 or keep_last_n < 0:
            raise ValueError("prune_threshold_percent must be in [0, 100], keep_last_n >= 0")
        if len(thresholds) != 3 or not (0 < thresholds[0] <= thresholds[1] <= thresholds[2] <= 100):
            raise ValueError("thresholds must be increasing percentages, e.g. (85, 92, 98)")
        self.max_tokens = max_tokens
        self._output_limit = output_limit
        self.counter: TokenCounter = token_counter or SimpleTokenCounter()
        self.strategy = strategy
        self.keep_last_n = keep_last_n
        self.prune_threshold_percent = prune_threshold_percent
        self.safety_margin_percent = safety_margin_percent
        self.thresholds = tuple(thresholds)
        self._base = _base_messages(system_prompt, task)
        self._base_tokens = self.counter.count_messages(self._base)
        self._has_task = any(m.role == "user" for m in self._base)
        self._no_task = Message("user", NO_TASK_TEXT)
        self._no_task_tokens = 0 if self._has_task else self.counter.count_messages([self._no_task])
        self._refs = ResultRefs()
        self._interjection = ""
        self._interjection_tokens = 0
        self._reset([])

    # --- history --------------------------------------------------------------------------

    def _reset(self, steps: Sequence[Step]) -> None:
        self._steps: list[Step] = []  # ids normalised (unique, non-empty)
        self._ids = CallIds()
        self._step_by_call: dict[str, int] = {}
        self._by_call = _StepsByCall(self._step_by_call, self._steps)
        self._floors: dict[int, tuple[int, int]] = {}  # unit start -> (end, smallest tokens)
        self._compacted_through = 0  # steps before this index are in the compacted prefix
        self._rolling: _Rolling | None = None
        self._set_messages([])
        self._samples: deque[tuple[int, int]] = deque(maxlen=CALIBRATION_SAMPLES)
        self._scale = 1.0
        self._anchor = (0, 0)  # (local, used) of the last calibrated prompt
        self._local_at_build: int | None = None
        self._compactions_in_a_row = 0
        for step in steps:
            self.add_step(step)

    def _set_messages(
        self,
        messages: list[Message],
        tokens: list[int] | None = None,
        *,
        scan_from: int = 0,
        settled: int = 0,
    ) -> None:
        """Start the rendered history over from ``messages`` (a compacted prefix, or nothing).

        Args:
            messages: the new history.
            tokens: the count of each message, when known.
            scan_from: no tool result before this index can still be pruned.
            settled: the messages before this index are already as small as a fit makes them.
        """
        self._messages = messages  # compacted prefix, then the steps rendered since
        if tokens is None:
            tokens = [self.counter.count_messages([m]) for m in messages]
        self._message_tokens = tokens
        self._history_tokens = sum(tokens)
        self._settled = settled
        # (message index, step index) of every tool message that can still be pruned, so
        # pruning reaches results a compaction kept in full as well.
        self._tool_messages: list[tuple[int, int]] = []
        for i in range(scan_from, len(messages)):
            m = messages[i]
            index = self._step_by_call.get(m.tool_call_id, -1) if m.role == "tool" else -1
            if index >= 0:
                masked = self._masked_message(self._steps[index])
                if masked is not None and masked.content != m.content:
                    self._tool_messages.append((i, index))
        self._unit_start = len(self._steps)  # first step of the last render unit
        self._unit_msg_start = len(messages)  # its first message
        self._pruning = False
        self._prune_next = 0  # first entry of _tool_messages not yet pruned

    @property
    def steps(self) -> list[Step]:
        """Every step added (compacted ones included), oldest first, with unique call ids."""
        return list(self._steps)

    def add_step(self, step: Step) -> None:
        """Record ``step``; costs O(size of the step), never a re-render of the history.

        A step of the response the previous step came from replaces only that response's
        assistant message (one more call) and its trailing nudge, and appends its result.
        """
        steps = self._steps
        index = len(steps)
        step = self._ids.normalize(step, index)
        steps.append(step)
        if step.action is not None:
            self._step_by_call[step.action.id] = index
        self._compactions_in_a_row = 0
        previous = steps[index - 1] if index > self._compacted_through else None
        if (
            previous is not None
            and step.response_group > 0
            and previous.response_group == step.response_group
        ):
            if self._extend_unit(step, index):
                return
            self._truncate(self._unit_msg_start)  # no calls yet: re-render the small unit
        else:
            self._unit_start = index
            self._unit_msg_start = len(self._messages)
        # Tool messages come out in the order of the unit's steps that have an action.
        with_action = (i for i in range(self._unit_start, index + 1) if steps[i].action is not None)
        for message in render_unit(steps, self._unit_start, index + 1):
            self._append(message, next(with_action) if message.role == "tool" else -1)

    def _extend_unit(self, step: Step, index: int) -> bool:
        """Add ``step`` to the last unit in place; ``False`` when that unit has no calls yet."""
        messages, start = self._messages, self._unit_msg_start
        if start >= len(messages) or not messages[start].tool_calls:
            return False
        nudge: tuple[Message, int] | None = None
        if messages[-1].role == "user":  # the unit's trailing nudge
            nudge = (messages[-1], self._message_tokens[-1])
            self._truncate(len(messages) - 1)
        if step.action is not None:
            assistant = messages[start]
            self._replace(
                start, replace(assistant, tool_calls=[*assistant.tool_calls, step.action])
            )
            self._append(tool_message(step), index)
        if not is_blank(step.user_nudge):
            self._append(Message("user", content=step.user_nudge.rstrip(INVISIBLE)))
        elif nudge is not None:
            self._append(nudge[0], tokens=nudge[1])
        return True

    def _append(self, message: Message, step_index: int = -1, *, tokens: int | None = None) -> None:
        if message.role == "tool":
            self._tool_messages.append((len(self._messages), step_index))
        if tokens is None:
            tokens = self.counter.count_messages([message])
        self._messages.append(message)
        self._message_tokens.append(tokens)
        self._history_tokens += tokens

    def _replace(self, index: int, message: Message) -> None:
        tokens = self.counter.count_messages([message])
        self._history_tokens += tokens - self._message_tokens[index]
        self._messages[index] = message
        self._message_tokens[index] = tokens
        self._settled = min(self._settled, index)

    def _truncate(self, start: int) -> None:
        self._settled = min(self._settled, start)
        self._history_tokens -= sum(self._message_tokens[start:])
        del self._messages[start:]
        del self._message_tokens[start:]
        while self._tool_messages and self._tool_messages[-1][0] >= start:
            self._tool_messages.pop()
        self._prune_next = min(self._prune_next, len(self._tool_messages))

    def seed_steps(self, steps: Sequence[Step] | None) -> None:
        """Replace the history with ``steps`` (a checkpoint), dropping any compaction."""
        self._reset(list(steps or ()))

    def set_result_cache(self, cache: ToolResultCache | None) -> None:
        """Check the references masking shows against ``cache`` (the executor's result cache).

        With a cache, a masked result is referred to by its shortest unique hash prefix and the
        cached length, and only while the cache still holds it; once it is gone (evicted,
        expired, or never there in this process) the model is told to re-run the tool instead.
        Without one (the default), every ``Step.cache_hash`` is trusted.
        """
        self._refs = ResultRefs(cache)

    def build_prompt(self) -> list[Message]:
        """System prompt, task, compacted prefix, steps, and any pending interjection."""
        self._prune()
        out = [*self._base]
        if self._needs_task_stand_in():
            out.append(self._no_task)
        out += self._messages
        if not is_blank(self._interjection):
            out.append(Message("user", content=self._interjection.rstrip(INVISIBLE)))
        self._local_at_build = self._local()
        return out

    def _needs_task_stand_in(self) -> bool:
        """Whether the history would open with the assistant: no task, and no user turn first."""
        if self._has_task:
            return False
        for m in self._messages:
            if m.role != "system":
                return m.role != "user"
        return False  # nothing, or only the interjection (a user message), follows

    # --- interjections --------------------------------------------------------------------

    def set_pending_user_interjection(self, text: str) -> None:
        """A one-shot user message shown at the end of every prompt until consumed."""
        self._interjection = text
        if is_blank(text):
            self._interjection_tokens = 0
            return
        message = Message("user", content=text.rstrip(INVISIBLE))
        self._interjection_tokens = self.counter.count_messages([message])

    @property
    def pending_user_interjection(self) -> str:
        """The interjection waiting to be shown (``""`` when none)."""
        return self._interjection

    def consume_pending_user_interjection(self) -> None:
        """Retire the pending interjection (the executor calls this after a good response)."""
        if self._interjection:  # after every response: nothing to do in the usual case
            self.set_pending_user_interjection("")

    # --- accounting -----------------------------------------------------------------------

    def _local(self) -> int:
        stand_in = self._no_task_tokens if self._needs_task_stand_in() else 0
        return self._base_tokens + stand_in + self._history_tokens + self._interjection_tokens

    def _fixed(self) -> int:
        """Local tokens of what compaction never touches (the task stand-in counted always)."""
        return self._base_tokens + self._no_task_tokens + self._interjection_tokens

    def _used(self, local: int) -> int:
        """The calibrated estimate of a prompt the counter puts at ``local`` tokens."""
        anchor_local, anchor_used = self._anchor
        return max(0, anchor_used + round(self._scale * (local - anchor_local)))

    def _local_for(self, used: int) -> int:
        """The largest local size whose calibrated estimate is at most ``used``."""
        anchor_local, anchor_used = self._anchor
        return anchor_local + math.floor((used - anchor_used) / self._scale)

    def effective_max(self) -> int:
        """Tokens usable by the prompt: the window minus the output reserve and the margin."""
        return (
            self.max_tokens
            - self._output_limit
            - self.max_tokens * self.safety_margin_percent // 100
        )

    def used_tokens(self) -> int:
        """Current estimate of the prompt size, calibrated by the provider's counts."""
        return self._used(self._local())

    def fill_percent(self) -> float:
        """Prompt size as a percentage of the usable window."""
        eff = self.effective_max()
        return 100.0 if eff <= 0 else self.used_tokens() * 100 / eff

    def available_tokens(self) -> int:
        """Tokens still free in the usable window."""
        return max(0, self.effective_max() - self.used_tokens())

    def output_limit(self) -> int:
        """Most tokens the model may produce per call."""
        return self._output_limit

    def check_fill(self) -> FillCheck:
        """The fill and its status: ok, compact, warning, emergency or reject."""
        used, eff = self.used_tokens(), self.effective_max()
        if eff <= 0:
            return FillCheck(100.0, "reject", used, eff)
        percent = used * 100 / eff
        predictive, warning, emergency = self.thresholds
        if percent >= 100:
            status = "reject"
        elif percent >= emergency:
            status = "emergency"
        elif percent >= warning:
            status = "warning"
        elif percent >= predictive:
            status = "compact"
        else:
            status = "ok"
        return FillCheck(percent, status, used, eff)

    def correct_token_count(self, api_input_tokens: int) -> None:
        """Calibrate with the provider's count of the last prompt sent.

        Afterwards ``used_tokens()`` equals ``api_input_tokens`` plus whatever was added since
        that prompt was built (scaled). The count is one more sample for ``scale`` (the ratio
        of provider tokens to local ones) and ``extra`` (a fixed part such as tool
        definitions), fitted to the recent samples once their sizes differ enough; before
        that, a count above the estimate is put down to ``extra`` up to a tenth of the window,
        and to ``scale`` beyond. Non-positive counts are ignored, and so is a count below half
        the local estimate (a provider that reports cached tokens apart would otherwise hide
        the fill).
        """
        if api_input_tokens <= 0:
            return
        local = self._local_at_build if self._local_at_build is not None else self._local()
        if api_input_tokens < local * MIN_CORRECTION_RATIO:
            logger.debug(
                "ignoring a provider count of %d tokens for a prompt estimated at %d",
                api_input_tokens,
                local,
            )
            return
        self._samples.append((local, api_input_tokens))
        scale = self._fitted_scale()
        if local > 0:
            low = MIN_CORRECTION_RATIO
            if scale is None:
                guessed_extra = MAX_GUESSED_EXTRA_SHARE * max(0, self.effective_max())
                low = max(low, (api_input_tokens - guessed_extra) / local)
                scale = self._scale
            self._scale = min(max(scale, low), api_input_tokens / local)  # so extra >= 0
        self._anchor = (local, api_input_tokens)

    def _fitted_scale(self) -> float | None:
        """The least-squares slope of the samples, or ``None`` while their sizes are too close."""
        samples = self._samples
        sizes = [local for local, _ in samples]
        if len(samples) < 2 or max(sizes) - min(sizes) <= CALIBRATION_SPREAD * max(sizes):
            return None
        mean_local = sum(sizes) / len(sizes)
        mean_used = sum(used for _, used in samples) / len(samples)
        covariance = sum((lo - mean_local) * (u - mean_used) for lo, u in samples)
        variance = sum((lo - mean_local) ** 2 for lo in sizes)
        return covariance / variance

    # --- pruning --------------------------------------------------------------------------

    def _masked_message(self, step: Step) -> Message | None:
        """The tool message showing ``step``'s result masked, or ``None`` if that saves nothing."""
        stand_in = self._refs.masked(step)
        return None if stand_in is None else tool_message(step, content=stand_in)

    def _prunable(self, keep: int | None = None) -> range:
        """Entries of ``_tool_messages`` not yet pruned and outside the protected tail.

        Protected are the last ``keep`` (default ``keep_last_n``) tool results and every step
        of their response groups (groups are consecutive, so only the oldest protected group
        can reach back). The range starts at the first entry not yet pruned, even when empty.
        """
        keep = self.keep_last_n if keep is None else keep
        tms = self._tool_messages
        start = self._prune_next
        boundary = len(tms) - keep
        if keep <= 0 or boundary <= start:
            return range(start, start)
        guard = self._steps[tms[boundary][1]].response_group if boundary < len(tms) else 0
        while guard and boundary > start:
            if self._steps[tms[boundary - 1][1]].response_group != guard:
                break
            boundary -= 1
        return range(start, boundary)

    def _prune(self) -> None:
        if self.keep_last_n <= 0:
            return
        if not self._pruning:
            if self.fill_percent() < self.prune_threshold_percent:
                return
            self._pruning = True
        entries = self._prunable()
        for k in entries:
            msg_index, step_index = self._tool_messages[k]
            masked = self._masked_message(self._steps[step_index])
            if masked is not None:
                tokens = self.counter.count_messages([masked])
                self._history_tokens += tokens - self._message_tokens[msg_index]
                self._messages[msg_index] = masked
                self._message_tokens[msg_index] = tokens
        self._prune_next = max(self._prune_next, entries.stop)

    def vulnerable_outputs(self) -> list[VulnerableOutput]:
        """Tool outputs in the prompt outside the protected tail (the newest 20), oldest first.

        Those are what the next pruning replaces and what the next compaction may mask, cut,
        summarise or drop: results already pruned are listed too, since a compaction can take
        their references out of the prompt. Empty when pruning is off (``keep_last_n=0``).
        """
        keep = self.keep_last_n
        out: list[VulnerableOutput] = []
        if keep <= 0:
            return out
        protected, guard = 0, 0
        for m in reversed(self._messages):
            index = self._step_by_call.get(m.tool_call_id, -1) if m.role == "tool" else -1
            if index < 0:
                continue
            step = self._steps[index]
            if protected < keep or (guard and step.response_group == guard):
                protected += 1
                guard = step.response_group
                continue
            guard = 0
            if step.action is not None:
                out.append(VulnerableOutput(step.action.name, input_hint(step.action.input)))
                if len(out) == MAX_VULNERABLE:
                    break
        return out[::-1]

    # --- compaction -----------------------------------------------------------------------

    def set_strategy(self, strategy: CompactionStrategy) -> None:
        """Use ``strategy`` for later compactions."""
        self.strategy = strategy

    async def compact(self) -> CompactionResult | None:
        """Replace the history by a compacted prefix that fits; ``None`` with no steps to compact.

        Without a strategy (or when it fails or returns an invalid history) the current prompt
        is compacted: old tool results masked, turns that cannot fit dropped. A strategy is
        shown the newest steps that could fit the window even with their results masked
        (a :class:`~sp4rk.memory.compaction.StepRange`); older ones become a note, or a rolling
        summary. Its output is used when it leaves the fill at most 70 % of the compact
        threshold (and, when compacting again with no step in between — the provider still
        overflowed — at most half the previous history). Otherwise the history degrades toward
        half the threshold: cutting, then dropping the oldest turns, summaries last
        (:func:`~sp4rk.memory.fit.shrink`). Results the prefix keeps in full stay subject to
        pruning, like any other.

        The cost is bounded by what can end up in the prompt, not by the length of the run.

        Raises:
            ContextWindowExceededError: when even the minimal prompt (system prompt, task, a
                note and the last turn cut down) does not fit the window.
        """
        fixed = self._fixed()
        if not self._steps:
            self._check_fits(fixed)
            return None
        before = self.fill_percent()
        accept, goal = self._targets(fixed)
        prefix = None
        if self.strategy is not None:
            prefix = await self._strategy_prefix(self.strategy, goal)
        if prefix is None:
            self._compact_prompt(fixed, accept, goal)
        else:
            self._compact_to(prefix, fixed, accept, goal)
        self._compacted_through = len(self._steps)
        self._compactions_in_a_row += 1
        return CompactionResult(before, self.fill_percent())

    def _check_fits(self, local: int) -> None:
        """Raise when the smallest prompt compaction can make (``local`` tokens) overflows."""
        hard = self.effective_max()
        used = self._used(local)
        if used <= hard:
            return
        raise ContextWindowExceededError(
            f"the context window cannot hold even the minimal prompt: {used} tokens (system "
            f"prompt and task: {self._base_tokens}) of {max(0, hard)} usable ({self.max_tokens} "
            f"window - {self._output_limit} output - {self.safety_margin_percent}% margin). "
            "Shorten the system prompt or task, or use a model with a larger window."
        )

    def _targets(self, fixed: int) -> tuple[int, int]:
        """``(accept, goal)``: history tokens a strategy may leave, and what fallbacks aim at.

        Both are local tokens of the history alone (``fixed`` is the rest of the prompt). When
        compacting again with no step in between, both are at most half the current history.
        """
        threshold = self.effective_max() * self.thresholds[0] / 100
        accept = self._local_for(int(threshold * ACCEPT_RATIO)) - fixed
        goal = self._local_for(int(threshold * FIT_TARGET_RATIO)) - fixed
        if self._compactions_in_a_row:
            half = self._history_tokens // 2
            accept, goal = min(accept, half), min(goal, half)
        return accept, goal

    # The prompt, compacted in place (no strategy, or its fallback) ------------------------

    def _compact_prompt(self, fixed: int, accept: int, goal: int) -> None:
        """Mask old results in the current prompt and, if that is not enough, fit it to ``goal``.

        The same as masking every step and fitting the result, without the cost: turns that a
        fit would drop are cut first, messages a previous fit shrank are not looked at again,
        and results are masked from where pruning stopped.
        """
        old = self._messages
        sized = Sized(old, self.counter, self._message_tokens)
        cut = self._prompt_horizon(sized, accept)
        sized.cut(0, cut)
        removed = len(old) - len(sized.messages)
        tms = self._tool_messages
        masking = self._prunable(self.keep_last_n or FALLBACK_KEEP_LAST)
        for k in range(max(masking.start, bisect_left(tms, (cut, -1))), masking.stop):
            msg_index, step_index = tms[k]
            masked = self._masked_message(self._steps[step_index])
            if masked is not None:
                sized.put(msg_index - removed, masked)
        self._drop_stale_references(sized)
        settled = max(0, self._settled - removed)
        if sized.total > accept:
            settled = shrink(sized, goal, self._by_call, self._refs, settled=settled)
        self._check_fits(fixed + sized.total)
        # Every result before the protected tail is masked now; only the tail can be pruned.
        protected = tms[masking.stop][0] if masking.stop < len(tms) else len(old)
        scan_from = max(0, protected - (len(old) - len(sized.messages)))
        self._set_messages(sized.messages, sized.tokens, scan_from=scan_from, settled=settled)

    def _drop_stale_references(self, sized: Sized) -> None:
        """Replace references to results the cache no longer holds (known cache only).

        Pruning keeps what it showed (a stable prompt prefix), so a reference can outlive its
        cache entry; a compaction rewrites the prompt anyway and shows the re-run placeholder
        instead. Costs one look-up per masked result in the prompt.
        """
        if self._refs.cache is None:
            return
        for i, m in enumerate(sized.messages):
            index = self._step_by_call.get(m.tool_call_id, -1) if m.role == "tool" else -1
            if index < 0 or EVICTED_MARK not in m.content[:EVICTED_MARK_WITHIN]:
                continue
            step = self._steps[index]
            if self._refs.reference(step) is None:
                masked = self._masked_message(step)
                sized.put(i, masked if masked is not None else tool_message(step))

    def _prompt_horizon(self, sized: Sized, budget: int) -> int:
        """Index of the oldest turn of the prompt that a fit to ``budget`` could keep (or 0).

        Walks back from the last turn adding what each message takes at its smallest; once the
        turns behind a point take more than ``budget`` even so, the prompt cannot be kept as it
        is, and a fit would drop every turn before that point.
        """
        messages, tokens = sized.messages, sized.tokens
        i = last_turn_start(messages)
        total = 0
        while i > self._settled:
            i -= 1
            total += smallest_tokens(
                messages[i], tokens[i], self.counter, self._by_call, self._refs
            )
            if total > budget and messages[i].role != "tool":
                return i
        if total + sum(tokens[:i]) <= budget:
            return 0
        while i > 0:  # already as small as it gets
            i -= 1
            total += tokens[i]
            if total > budget and messages[i].role != "tool":
                return i
        return 0

    # A strategy's compaction of the newest steps -----------------------------------------

    async def _strategy_prefix(
        self, strategy: CompactionStrategy, budget: int
    ) -> list[Message] | None:
        """``strategy``'s compaction of the steps that could fit, or ``None`` when it failed.

        The steps before those are a rolling summary when the strategy keeps one, else a note.
        """
        start = self._horizon()
        lead: list[Message] = []
        if conforms(strategy, RollingSummarizer):
            start, lead = await self._roll_up(strategy, start)
        else:
            self._rolling = None
        if start and not lead:
            lead = [Message("system", OMITTED_NOTE)]
        budget -= self.counter.count_messages(lead)
        try:
            prefix = await strategy.compact(StepRange(self._steps[start:], start), max(1, budget))
        except Exception:
            logger.warning(
                "compaction strategy %s failed; masking old tool results instead",
                type(strategy).__name__,
                exc_info=True,
            )
            return None
        problems = _prefix_problems(prefix)
        if problems:
            logger.warning(
                "compaction strategy %s returned an invalid history; masking old tool "
                "results instead. Problems: %s",
                type(strategy).__name__,
                "; ".join(problems[:5]),
            )
            return None
        return [*lead, *self._adopt(prefix)]

    async def _roll_up(self, strategy: RollingSummarizer, start: int) -> tuple[int, list[Message]]:
        """Fold the steps that left the strategy's range into the rolling summary.

        Only steps the strategy was shown before are folded (their block summaries are
        memoised), so the cost is bounded by one range; a window that starts its first
        strategy compaction late (a resumed run) keeps a note for what came before.

        Returns:
            Where the strategy's range starts (never inside the summary), and the messages
            that stand for the steps before it.
        """
        rolling = self._rolling
        if rolling is None:
            rolling = self._rolling = _Rolling(start, start)
        elif start > rolling.through:
            segment = StepRange(self._steps[rolling.through : start], rolling.through)
            try:
                text = await strategy.roll_up(segment, rolling.text)
            except Exception as exc:
                logger.warning(
                    "the rolling summary of steps %d-%d failed (%s: %s); noting the gap",
                    rolling.through + 1,
                    start,
                    type(exc).__name__,
                    exc,
                )
                gap = f"[Steps {rolling.through + 1}-{start}: no summary (summarizer failed).]"
                text = f"{rolling.text}\n{gap}" if rolling.text else gap
            if text is None:  # no summarizer: nothing to carry
                self._rolling = None
                return start, []
            rolling.text = text
            rolling.sources.update(untrusted_sources(segment))
            rolling.through = start
        start = max(start, rolling.through)
        lead = [Message("system", OMITTED_NOTE)] if rolling.first else []
        if rolling.text:
            label = f"[Summary of steps {rolling.first + 1}-{rolling.through}]"
            lead.append(summary_message(label, rolling.text, sorted(rolling.sources)))
        return start, lead

    def _horizon(self) -> int:
        """First step shown to a strategy: the older ones cannot fit the window.

        Walks back from the newest response, adding what each unit takes at its smallest
        (results masked, as a fit leaves them); the steps behind the point where that exceeds
        the usable window are all a prompt could ever show of the run.
        """
        steps, budget = self._steps, self._local_for(self.effective_max())
        i = unit_start(steps, len(steps) - 1)  # the newest unit is always shown
        total = 0
        while i > 0:
            start = unit_start(steps, i - 1)
            total += self._floor(start, i)
            if total > budget:
                return unit_start(steps, start // HORIZON_QUANTUM * HORIZON_QUANTUM)
            i = start
        return 0

    def _floor(self, start: int, end: int) -> int:
        """Tokens the unit ``steps[start:end]`` takes at its smallest (computed once)."""
        cached = self._floors.get(start)
        if cached is not None and cached[0] == end:
            return cached[1]
        count = self.counter.count_messages
        tokens = sum(
            smallest_tokens(m, count([m]), self.counter, self._by_call, self._refs)
            for m in render_unit(self._steps, start, end, observe=self._refs.observe)
        )
        self._floors[start] = (end, tokens)
        return tokens

    def _adopt(self, prefix: list[Message]) -> list[Message]:
        """``prefix`` with references checked against the cache and untrusted results wrapped.

        A strategy masks without knowing the cache: its references are replaced by the
        window's (shortest unique prefix, or the re-run placeholder once the entry is gone).
        Every untrusted step's result ends up inside its boundary exactly once.
        """
        out = []
        checked = self._refs.cache is not None
        for m in prefix:
            step = self._by_call.get(m.tool_call_id) if m.role == "tool" else None
            if step is not None:
                content = m.content
                generic = masked_observation(step) if checked else None
                if generic is not None and content in (generic, wrap_for(step, generic)):
                    content = self._refs.masked(step) or step.observation.rstrip(INVISIBLE)
                content = wrap_for(step, content)
                if content != m.content:
                    m = replace(m, content=content)
            out.append(m)
        return out

    def _compact_to(self, prefix: list[Message], fixed: int, accept: int, goal: int) -> None:
        """Install ``prefix``, fitted to ``goal`` first when it leaves more than ``accept``.

        The leading system messages (notes and summaries) are dropped only after every other
        turn but the last has been masked, cut or dropped.
        """
        sized = Sized(prefix, self.counter)
        settled = 0
        if sized.total > accept:
            head = next((i for i, m in enumerate(prefix) if m.role != "system"), len(prefix))
            settled = shrink(sized, goal, self._by_call, self._refs, head=head)
        self._check_fits(fixed + sized.total)
        for m in sized.messages:
            for call in m.tool_calls:
                self._ids.reserve(call.id)
        self._set_messages(sized.messages, sized.tokens, settled=settled)


class _StepsByCall(Mapping[str, Step]):
    """The step behind each tool call id, read through the window's index (nothing copied)."""

    def __init__(self, index: dict[str, int], steps: list[Step]) -> None:
        self._index = index
        self._steps = steps

    def __getitem__(self, call_id: str) -> Step:
        return self._steps[self._index[call_id]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def _prefix_problems(prefix: Sequence[Message]) -> list[str]:
    """What makes ``prefix`` unfit to follow the task message (it may end on any turn)."""
    if not isinstance(prefix, list) or not all(isinstance(m, Message) for m in prefix):
        return ["the strategy did not return a list of Message"]
    return history_problems([Message("user", "(task)"), *prefix], partial=True)


def _base_messages(system_prompt: str, task: str | Sequence[ContentBlock]) -> list[Message]:
    out = [
        Message("system", content=part.strip(INVISIBLE))
        for part in system_prompt.split(CACHE_BREAK)
        if not is_blank(part)
    ]
    if isinstance(task, str):
        if not is_blank(task):
            out.append(Message("user", content=task))
    elif task:
        out.append(Message("user", content_blocks=list(task)))
    return out
