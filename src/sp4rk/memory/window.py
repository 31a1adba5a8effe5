"""``ContextWindow``: the prompt history of one run, its token accounting and its compaction.

Everything is incremental. ``add_step`` renders only the new step (or re-renders the response
group it joins) and counts only its messages; ``build_prompt`` copies the message list and
prunes at most the outputs that just fell out of the protected tail. A compaction re-renders the
raw steps once.

Token accounting: ``used = local + offset``. ``local`` is the counter's estimate of the prompt,
kept up to date message by message; ``offset`` is how far the provider's count of the last
prompt was from ``local`` (tool definitions, tokenizer differences). A provider correction
therefore makes ``used`` exact, and the offset carries over to later prompts and compactions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sp4rk._internal.text import INVISIBLE, has_visible_content
from sp4rk.agent.protocols import CompactionStrategy
from sp4rk.agent.types import CompactionResult, FillCheck, Step, VulnerableOutput
from sp4rk.llm.errors import ContextWindowExceededError
from sp4rk.llm.tokens import SimpleTokenCounter, TokenCounter
from sp4rk.llm.types import ContentBlock, Message
from sp4rk.memory.compaction import ObservationMaskingStrategy, masked_observation
from sp4rk.memory.fit import fit_history
from sp4rk.memory.hints import input_hint
from sp4rk.memory.render import CallIds, ensure_wrapped, render_unit, tool_message
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


class ContextWindow:
    """The prompt history of one run: renders steps into messages and keeps them in budget.

    Args:
        max_tokens: the model's context window.
        output_limit: tokens reserved for the reply (``max_tokens`` of each request).
        token_counter: estimates tokens; calibrated by ``correct_token_count``.
        system_prompt: system text; ``CACHE_BREAK`` splits it into several system messages.
        task: the user's task (text or content blocks), the first user message. It is never
            compacted.
        strategy: how ``compact`` compresses the history. ``None`` uses observation masking.
            Whatever the strategy, ``compact`` falls back to masking when it fails or returns
            an invalid history, and shrinks further (cutting, then dropping the oldest turns)
            when the result is still too large.
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
        self._compacted_through = 0  # steps before this index are in the compacted prefix
        self._set_messages([])
        self._offset = 0
        self._local_at_build: int | None = None
        self._compactions_in_a_row = 0
        for step in steps:
            self.add_step(step)

    def _set_messages(self, messages: list[Message]) -> None:
        """Start the rendered history over from ``messages`` (a compacted prefix, or nothing)."""
        self._messages = messages  # compacted prefix, then the steps rendered since
        self._message_tokens = [self.counter.count_messages([m]) for m in messages]
        self._history_tokens = sum(self._message_tokens)
        # (message index, step index) of every tool message that can still be pruned, so
        # pruning reaches results a compaction kept in full as well.
        self._tool_messages = []
        for i, m in enumerate(messages):
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

    def _prunable(self) -> range:
        """Entries of ``_tool_messages`` not yet pruned and outside the protected tail.

        Protected are the last ``keep_last_n`` tool results and every step of their response
        groups (groups are consecutive, so only the oldest protected group can reach back).
        """
        tms = self._tool_messages
        boundary = len(tms) - self.keep_last_n
        if self.keep_last_n <= 0 or boundary <= self._prune_next:
            return range(0)
        guard = self._steps[tms[boundary][1]].response_group if boundary < len(tms) else 0
        while guard and boundary > self._prune_next:
            if self._steps[tms[boundary - 1][1]].response_group != guard:
                break
            boundary -= 1
        return range(self._prune_next, boundary)

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

        Compaction always starts from the raw steps. The strategy's output is used when it is
        valid and leaves the fill at most 70 % of the compact threshold (and, when compacting
        again with no step in between — the provider still overflowed — at most half the
        previous size). Otherwise the history degrades toward half the threshold: masking
        instead of a failed or invalid strategy, then cutting and dropping the oldest turns
        (:func:`~sp4rk.memory.fit.fit_history`). Results the prefix keeps in full stay
        subject to pruning, like any other.

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
        steps_by_call = {call: self._steps[i] for call, i in self._step_by_call.items()}
        prefix = self._wrapped(await self._strategy_prefix(goal - fixed), steps_by_call)
        tokens = self.counter.count_messages(prefix)
        if fixed + tokens > accept:
            prefix = fit_history(prefix, goal - fixed, self.counter, steps_by_call)
            prefix = self._wrapped(prefix, steps_by_call)
            tokens = self.counter.count_messages(prefix)
        self._check_fits(fixed + tokens)
        self._install(prefix)
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

    async def _strategy_prefix(self, budget: int) -> list[Message]:
        """The strategy's compaction of the raw steps, or masking when it fails."""
        steps = list(self._steps)
        strategy = self.strategy
        if strategy is not None:
            try:
                prefix = await strategy.compact(steps, max(0, budget))
            except Exception:
                logger.warning(
                    "compaction strategy %s failed; masking old tool results instead",
                    type(strategy).__name__,
                    exc_info=True,
                )
            else:
                problems = _prefix_problems(prefix)
                if not problems:
                    return prefix
                logger.warning(
                    "compaction strategy %s returned an invalid history; masking old tool "
                    "results instead. Problems: %s",
                    type(strategy).__name__,
                    "; ".join(problems[:5]),
                )
        keep = self.keep_last_n or FALLBACK_KEEP_LAST
        return await ObservationMaskingStrategy(keep).compact(steps, budget)

    def _wrapped(self, prefix: list[Message], steps_by_call: dict[str, Step]) -> list[Message]:
        """``prefix`` with every untrusted step's tool result inside its boundary (once)."""
        out = []
        for m in prefix:
            step = steps_by_call.get(m.tool_call_id) if m.role == "tool" else None
            if step is not None and step.is_untrusted and step.action is not None:
                wrapped = ensure_wrapped(m.content, step.action.name)
                if wrapped != m.content:
                    m = Message("tool", wrapped, tool_call_id=m.tool_call_id)
            out.append(m)
        return out

    def _install(self, prefix: list[Message]) -> None:
        for m in prefix:
            for call in m.tool_calls:
                self._ids.reserve(call.id)
        self._compacted_through = len(self._steps)
        self._set_messages(prefix)
        self._compactions_in_a_row += 1


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
