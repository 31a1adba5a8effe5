"""``ContextWindow``: the prompt history of one run, its token accounting and its compaction.

Everything is incremental. ``add_step`` renders only the new step (or re-renders the response
group it joins) and counts only its messages; ``build_prompt`` copies the message list and
prunes at most the outputs that just fell out of the protected tail. A compaction costs what can
end up in the prompt, never the whole run: without a strategy it rewrites the current prompt
(masking and fitting only what is new since the last compaction, dropping what cannot fit), and
a strategy is only shown the newest steps that could still fit the window.

Token accounting: ``used = local + offset``. ``local`` is the counter's estimate of the prompt,
kept up to date message by message; ``offset`` is how far the provider's count of the last
prompt was from ``local`` (tool definitions, tokenizer differences). A provider correction
therefore makes ``used`` exact, and the offset carries over to later prompts and compactions.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence

from sp4rk._internal.text import INVISIBLE, has_visible_content
from sp4rk.agent.protocols import CompactionStrategy
from sp4rk.agent.types import CompactionResult, FillCheck, Step, VulnerableOutput
from sp4rk.llm.errors import ContextWindowExceededError
from sp4rk.llm.tokens import SimpleTokenCounter, TokenCounter
from sp4rk.llm.types import ContentBlock, Message
from sp4rk.memory.compaction import StepRange, masked_observation
from sp4rk.memory.fit import OMITTED_NOTE, Sized, last_turn_start, shrink, smallest_tokens
from sp4rk.memory.hints import input_hint
from sp4rk.memory.render import CallIds, ensure_wrapped, render_unit, tool_message, unit_start
from sp4rk.memory.validate import history_problems

logger = logging.getLogger("sp4rk.memory")

#: System-prompt separator: each part becomes its own system message (for prompt caching).
CACHE_BREAK = "\x00CACHE_BREAK\x00"
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
#: reported apart from input tokens would otherwise make the window look empty).
MIN_CORRECTION_RATIO = 0.5
#: The first step shown to a strategy is rounded down to a multiple of this (then to the start
#: of its response group), so it moves in jumps and summaries of blocks stay memoised.
HORIZON_QUANTUM = 240


class ContextWindow:
    """The prompt history of one run: renders steps into messages and keeps them in budget.

    Args:
        max_tokens: the model's context window.
        output_limit: tokens reserved for the reply (``max_tokens`` of each request).
        token_counter: estimates tokens; calibrated by ``correct_token_count``.
        system_prompt: system text; ``CACHE_BREAK`` splits it into several system messages.
        task: the user's task (text or content blocks), the first user message. It is never
            compacted.
        strategy: how ``compact`` compresses the history. ``None`` masks old tool results in
            the current prompt. A strategy is shown the newest steps that could still fit
            (a ``StepRange``; older ones become a note). Whatever the strategy, ``compact``
            falls back to masking when it fails or returns an invalid history, and shrinks
            further (cutting, then dropping the oldest turns) when the result is still too
            large.
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
        self._set_messages([])
        self._offset = 0
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
                masked = _masked_message(self._steps[index])
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
        """Record ``step``; costs O(size of the step), never a re-render of the history."""
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
            # Same response as the previous step: re-render that unit with one more call.
            self._truncate(self._unit_msg_start)
        else:
            self._unit_start = index
            self._unit_msg_start = len(self._messages)
        # Tool messages come out in the order of the unit's steps that have an action.
        with_action = (i for i in range(self._unit_start, index + 1) if steps[i].action is not None)
        for message in render_unit(steps, self._unit_start, index + 1):
            if message.role == "tool":
                self._tool_messages.append((len(self._messages), next(with_action)))
            tokens = self.counter.count_messages([message])
            self._messages.append(message)
            self._message_tokens.append(tokens)
            self._history_tokens += tokens

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

    def build_prompt(self) -> list[Message]:
        """System prompt, task, compacted prefix, steps, and any pending interjection."""
        self._prune()
        out = [*self._base, *self._messages]
        if has_visible_content(self._interjection):
            out.append(Message("user", content=self._interjection.rstrip(INVISIBLE)))
        self._local_at_build = self._local()
        return out

    # --- interjections --------------------------------------------------------------------

    def set_pending_user_interjection(self, text: str) -> None:
        """A one-shot user message shown at the end of every prompt until consumed."""
        self._interjection = text
        visible = has_visible_content(text)
        message = Message("user", content=text.rstrip(INVISIBLE))
        self._interjection_tokens = self.counter.count_messages([message]) if visible else 0

    def consume_pending_user_interjection(self) -> None:
        """Retire the pending interjection (the executor calls this after a good response)."""
        self.set_pending_user_interjection("")

    # --- accounting -----------------------------------------------------------------------

    def _local(self) -> int:
        return self._base_tokens + self._history_tokens + self._interjection_tokens

    def effective_max(self) -> int:
        """Tokens usable by the prompt: the window minus the output reserve and the margin."""
        return (
            self.max_tokens
            - self._output_limit
            - self.max_tokens * self.safety_margin_percent // 100
        )

    def used_tokens(self) -> int:
        """Current estimate of the prompt size, calibrated by the last provider count."""
        return max(0, self._local() + self._offset)

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
        compact, warning, emergency = self.thresholds
        if percent >= 100:
            status = "reject"
        elif percent >= emergency:
            status = "emergency"
        elif percent >= warning:
            status = "warning"
        elif percent >= compact:
            status = "compact"
        else:
            status = "ok"
        return FillCheck(percent, status, used, eff)

    def correct_token_count(self, api_input_tokens: int) -> None:
        """Calibrate with the provider's count of the last prompt sent.

        Afterwards ``used_tokens()`` equals ``api_input_tokens`` plus whatever was added since
        that prompt was built, and the difference to the local estimate is kept for later
        prompts. Non-positive counts are ignored, and so is a count below half the local
        estimate (a provider that reports cached tokens apart would otherwise hide the fill).
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
        self._offset = api_input_tokens - local

    # --- pruning --------------------------------------------------------------------------

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
            masked = _masked_message(self._steps[step_index])
            if masked is not None:
                tokens = self.counter.count_messages([masked])
                self._history_tokens += tokens - self._message_tokens[msg_index]
                self._messages[msg_index] = masked
                self._message_tokens[msg_index] = tokens
        self._prune_next = max(self._prune_next, entries.stop)

    def vulnerable_outputs(self) -> list[VulnerableOutput]:
        """Tool outputs still shown in full that the next pruning will replace (newest 20).

        Empty once pruning has caught up: what it replaced stays readable through
        ``tool_result_read`` (cached results) and is no longer at risk.
        """
        out: list[VulnerableOutput] = []
        for k in reversed(self._prunable()):
            step = self._steps[self._tool_messages[k][1]]
            if step.action is not None and masked_observation(step) is not None:
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
        (a :class:`~sp4rk.memory.compaction.StepRange`); older ones become a note. Its output
        is used when it leaves the fill at most 70 % of the compact threshold (and, when
        compacting again with no step in between — the provider still overflowed — at most
        half the previous size). Otherwise the history degrades toward half the threshold:
        cutting, then dropping the oldest turns (:func:`~sp4rk.memory.fit.fit_history`).
        Results the prefix keeps in full stay subject to pruning, like any other.

        The cost is bounded by what can end up in the prompt, not by the length of the run.

        Raises:
            ContextWindowExceededError: when even the minimal prompt (system prompt, task, a
                note and the last turn cut down) does not fit the window.
        """
        fixed = self._base_tokens + self._interjection_tokens + self._offset
        if not self._steps:
            self._check_fits(fixed)
            return None
        before = self.fill_percent()
        accept, goal = self._targets()
        prefix = None
        if self.strategy is not None:
            prefix = await self._strategy_prefix(self.strategy, goal - fixed)
        if prefix is None:
            self._compact_prompt(fixed, accept, goal)
        else:
            self._compact_to(prefix, fixed, accept, goal)
        self._compacted_through = len(self._steps)
        self._compactions_in_a_row += 1
        return CompactionResult(before, self.fill_percent())

    def _check_fits(self, used: int) -> None:
        """Raise when the smallest prompt compaction can make (``used`` tokens) overflows."""
        hard = self.effective_max()
        if used <= hard:
            return
        raise ContextWindowExceededError(
            f"the context window cannot hold even the minimal prompt: {used} tokens (system "
            f"prompt and task: {self._base_tokens}) of {max(0, hard)} usable ({self.max_tokens} "
            f"window - {self._output_limit} output - {self.safety_margin_percent}% margin). "
            "Shorten the system prompt or task, or use a model with a larger window."
        )

    def _targets(self) -> tuple[int, int]:
        """``(accept, goal)``, in used tokens: what a strategy may leave, what fallbacks aim at."""
        eff = self.effective_max()
        threshold = eff * self.thresholds[0] / 100
        accept, goal = int(threshold * ACCEPT_RATIO), int(threshold * FIT_TARGET_RATIO)
        if self._compactions_in_a_row:
            progress = int(self.used_tokens() * 0.5**self._compactions_in_a_row)
            accept, goal = min(accept, progress), min(goal, progress)
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
        cut = self._prompt_horizon(sized, accept - fixed)
        sized.cut_front(cut)
        removed = len(old) - len(sized.messages)
        tms = self._tool_messages
        masking = self._prunable(self.keep_last_n or FALLBACK_KEEP_LAST)
        for k in range(max(masking.start, bisect_left(tms, (cut, -1))), masking.stop):
            msg_index, step_index = tms[k]
            masked = _masked_message(self._steps[step_index])
            if masked is not None:
                sized.put(msg_index - removed, masked)
        settled = max(0, self._settled - removed)
        if fixed + sized.total > accept:
            settled = shrink(sized, goal - fixed, self._by_call, settled)
        self._check_fits(fixed + sized.total)
        # Every result before the protected tail is masked now; only the tail can be pruned.
        protected = tms[masking.stop][0] if masking.stop < len(tms) else len(old)
        scan_from = max(0, protected - (len(old) - len(sized.messages)))
        self._set_messages(sized.messages, sized.tokens, scan_from=scan_from, settled=settled)

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
            total += smallest_tokens(messages[i], tokens[i], self.counter, self._by_call)
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
        """``strategy``'s compaction of the steps that could fit, or ``None`` when it failed."""
        start = self._horizon()
        try:
            prefix = await strategy.compact(StepRange(self._steps[start:], start), max(0, budget))
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
        if start:
            prefix = [Message("system", OMITTED_NOTE), *prefix]
        return self._wrapped(prefix)

    def _horizon(self) -> int:
        """First step shown to a strategy: the older ones cannot fit the window.

        Walks back from the newest response, adding what each unit takes at its smallest
        (results masked, as a fit leaves them); the steps behind the point where that exceeds
        the usable window are all a prompt could ever show of the run.
        """
        steps, budget = self._steps, self.effective_max()
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
            smallest_tokens(m, count([m]), self.counter, self._by_call)
            for m in render_unit(self._steps, start, end, observe=_masked_text)
        )
        self._floors[start] = (end, tokens)
        return tokens

    def _wrapped(self, prefix: list[Message]) -> list[Message]:
        """``prefix`` with every untrusted step's tool result inside its boundary (once)."""
        out = []
        for m in prefix:
            step = self._by_call.get(m.tool_call_id) if m.role == "tool" else None
            if step is not None and step.is_untrusted and step.action is not None:
                wrapped = ensure_wrapped(m.content, step.action.name)
                if wrapped != m.content:
                    m = Message("tool", wrapped, tool_call_id=m.tool_call_id)
            out.append(m)
        return out

    def _compact_to(self, prefix: list[Message], fixed: int, accept: int, goal: int) -> None:
        """Install ``prefix``, fitted to ``goal`` first when it leaves more than ``accept``."""
        sized = Sized(prefix, self.counter)
        settled = 0
        if fixed + sized.total > accept:
            settled = shrink(sized, goal - fixed, self._by_call)
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


def _masked_text(_: int, step: Step) -> str:
    return masked_observation(step) or step.observation


def _masked_message(step: Step) -> Message | None:
    """The tool message showing ``step``'s result masked, or ``None`` if masking saves nothing."""
    stand_in = masked_observation(step)
    return None if stand_in is None else tool_message(step, content=stand_in)


def _prefix_problems(prefix: Sequence[Message]) -> list[str]:
    """What makes ``prefix`` unfit to follow the task message."""
    if not isinstance(prefix, list) or not all(isinstance(m, Message) for m in prefix):
        return ["the strategy did not return a list of Message"]
    return history_problems([Message("user", "(task)"), *prefix])


def _base_messages(system_prompt: str, task: str | Sequence[ContentBlock]) -> list[Message]:
    out = [
        Message("system", content=part.strip(INVISIBLE))
        for part in system_prompt.split(CACHE_BREAK)
        if part.strip(INVISIBLE)
    ]
    if isinstance(task, str):
        if task.strip():
            out.append(Message("user", content=task))
    elif task:
        out.append(Message("user", content_blocks=list(task)))
    return out
