"""``ContextWindow``: the prompt history of one run, its token accounting and its compaction."""

from __future__ import annotations

from collections.abc import Sequence

from sp4rk._internal.text import INVISIBLE, has_visible_content
from sp4rk._internal.untrusted import wrap_untrusted_content
from sp4rk.agent.protocols import CompactionStrategy
from sp4rk.agent.types import CompactionResult, FillCheck, Step, VulnerableOutput
from sp4rk.llm.tokens import SimpleTokenCounter, TokenCounter
from sp4rk.llm.types import ContentBlock, Message
from sp4rk.memory.hints import input_hint
from sp4rk.memory.render import render_unit, tool_message

#: System-prompt separator: each part becomes its own system message (for prompt caching).
CACHE_BREAK = "\x00CACHE_BREAK\x00"
#: Shown instead of a pruned observation that has no cached copy.
PRUNED_PLACEHOLDER = (
    "[Output pruned to save context. Use search_facts for saved findings or re-run the tool; "
    "do not guess its content.]"
)
#: Most entries ``vulnerable_outputs`` reports.
MAX_VULNERABLE = 20


def eviction_reference(short_hash: str) -> str:
    """What replaces a pruned observation whose full text is in the result cache."""
    return (
        f'[Result evicted to cache. Use tool_result_read(hash="{short_hash}", start_line=1, '
        "num_lines=200) to retrieve the full content.]"
    )


class ContextWindow:
    """The prompt history of one run: renders steps into messages and tracks their size.

    Args:
        max_tokens: the model's context window.
        output_limit: tokens reserved for the reply (``max_tokens`` of each request).
        token_counter: estimates tokens; calibrated by ``correct_token_count``.
        system_prompt: system text; ``CACHE_BREAK`` splits it into several system messages.
        task: the user's task, sent as the first user message.
        strategy: how ``compact`` compresses the history (``None``: ``compact`` does nothing).
        keep_last_n: tool outputs always kept verbatim once pruning starts (0 = never prune).
        prune_threshold_percent: fill at which older tool outputs are pruned from the prompt
            (replaced by a cache reference when cached, else a placeholder).
        safety_margin_percent: share of the window kept free for estimation error.
        thresholds: fill percentages for ``compact``, ``warning`` and ``emergency``; at or
            above 100 % of the usable window the status is ``reject``.
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
        if not (0 < thresholds[0] <= thresholds[1] <= thresholds[2] <= 100):
            raise ValueError("thresholds must be increasing percentages, e.g. (85, 92, 98)")
        self.max_tokens = max_tokens
        self._output_limit = output_limit
        self.counter = token_counter or SimpleTokenCounter()
        self.strategy = strategy
        self.keep_last_n = keep_last_n
        self.prune_threshold_percent = prune_threshold_percent
        self.safety_margin_percent = safety_margin_percent
        self.thresholds = thresholds
        self._base = _base_messages(system_prompt, task)
        self._base_tokens = self.counter.count_messages(self._base)
        self._interjection = ""
        self._reset([])

    # --- history --------------------------------------------------------------------------

    def _reset(self, steps: Sequence[Step]) -> None:
        self._steps: list[Step] = []
        self._prefix: list[Message] = []
        self._compacted_through = 0
        self._messages: list[Message] = []
        self._tool_messages: list[tuple[int, int]] = []  # (message index, step index)
        self._unit_start = 0  # first step of the last render unit
        self._unit_msg_start = 0  # its first message
        self._known = self._base_tokens
        self._delta = 0
        for step in steps:
            self.add_step(step)

    @property
    def steps(self) -> list[Step]:
        """Every step added (compacted ones included), oldest first."""
        return list(self._steps)

    def add_step(self, step: Step) -> None:
        """Record ``step``; costs O(size of the step), never a re-render of the history."""
        steps = self._steps
        index = len(steps)
        steps.append(step)
        self._delta += self._step_tokens(step)
        last = steps[index - 1] if index > self._compacted_through else None
        if (
            last is not None
            and step.response_group > 0
            and (last.response_group == step.response_group)
        ):
            # Same response as the previous step: re-render that unit with one more call.
            del self._messages[self._unit_msg_start :]
            while self._tool_messages and self._tool_messages[-1][0] >= self._unit_msg_start:
                self._tool_messages.pop()
        else:
            self._unit_start = index
            self._unit_msg_start = len(self._messages)
        rendered = render_unit(steps, self._unit_start, index + 1)
        # Tool messages come out in the order of the unit's steps that have an action.
        with_action = iter(
            i for i in range(self._unit_start, index + 1) if steps[i].action is not None
        )
        base = self._unit_msg_start
        for offset, message in enumerate(rendered):
            if message.role == "tool":
                self._tool_messages.append((base + offset, next(with_action)))
        self._messages.extend(rendered)

    def seed_steps(self, steps: Sequence[Step] | None) -> None:
        """Replace the history with ``steps`` (a checkpoint), dropping any compaction."""
        self._reset(list(steps or ()))

    def build_prompt(self) -> list[Message]:
        """System prompt, task, compacted prefix, steps, and any pending interjection."""
        messages = self._messages
        if self._pruning_active():
            messages = self._pruned(messages)
        out = [*self._base, *self._prefix, *messages]
        if has_visible_content(self._interjection):
            out.append(Message("user", content=self._interjection))
        return out

    # --- interjections --------------------------------------------------------------------

    def set_pending_user_interjection(self, text: str) -> None:
        """A one-shot user message shown at the end of every prompt until consumed."""
        self._interjection = text

    def consume_pending_user_interjection(self) -> None:
        """Retire the pending interjection (the executor calls this after a good response)."""
        self._interjection = ""

    # --- accounting -----------------------------------------------------------------------

    def _step_tokens(self, step: Step) -> int:
        action = step.action
        text = step.thought
        if action is not None:
            text = f"{text} {action.name} {action.input}"
        return self.counter.count(f"{text} {step.observation} {step.user_nudge}")

    def effective_max(self) -> int:
        """Tokens usable by the prompt: the window minus the output reserve and the margin."""
        return (
            self.max_tokens
            - self._output_limit
            - self.max_tokens * self.safety_margin_percent // 100
        )

    def used_tokens(self) -> int:
        """Current estimate of the prompt size."""
        return self._known + self._delta

    def fill_percent(self) -> float:
        """Prompt size as a percentage of the usable window."""
        eff = self.effective_max()
        return 100.0 if eff <= 0 else self.used_tokens() / eff * 100

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
        percent = used / eff * 100
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
        """Replace the estimate with the provider's count of the last prompt."""
        if api_input_tokens > 0:
            self._known = api_input_tokens
            self._delta = 0

    # --- pruning --------------------------------------------------------------------------

    def _pruning_active(self) -> bool:
        return (
            self.keep_last_n > 0
            and bool(self._tool_messages)
            and self.fill_percent() >= self.prune_threshold_percent
        )

    def _protected_steps(self) -> set[int]:
        protected: set[int] = set()
        groups: set[int] = set()
        for _, step_index in reversed(self._tool_messages):
            if len(protected) >= self.keep_last_n:
                break
            protected.add(step_index)
            if self._steps[step_index].response_group:
                groups.add(self._steps[step_index].response_group)
        if groups:
            for _, step_index in self._tool_messages:
                if self._steps[step_index].response_group in groups:
                    protected.add(step_index)
        return protected

    def _pruned(self, messages: list[Message]) -> list[Message]:
        protected = self._protected_steps()
        out = list(messages)
        for msg_index, step_index in self._tool_messages:
            if step_index in protected:
                continue
            step = self._steps[step_index]
            text = PRUNED_PLACEHOLDER
            if step.cache_hash:
                text = eviction_reference(step.cache_hash[:12])
            out[msg_index] = tool_message(step, step_index, content=text)
        return out

    def vulnerable_outputs(self) -> list[VulnerableOutput]:
        """Tool outputs outside the protected last ``keep_last_n``: the next to be pruned."""
        if self.keep_last_n <= 0 or self._pruning_active():
            return []
        protected = self._protected_steps()
        out = []
        for _, step_index in self._tool_messages:
            if step_index not in protected:
                action = self._steps[step_index].action
                assert action is not None
                out.append(VulnerableOutput(action.name, input_hint(action.input)))
        return out[-MAX_VULNERABLE:]

    # --- compaction -----------------------------------------------------------------------

    def set_strategy(self, strategy: CompactionStrategy) -> None:
        """Use ``strategy`` for later compactions."""
        self.strategy = strategy

    async def compact(self) -> CompactionResult | None:
        """Replace the rendered history with the strategy's compressed version."""
        if self.strategy is None or not self._steps:
            return None
        before = self.fill_percent()
        prefix = await self.strategy.compact(list(self._steps), self.effective_max())
        self._prefix = self._rewrap(prefix)
        self._compacted_through = len(self._steps)
        self._messages = []
        self._tool_messages = []
        self._unit_start = self._unit_msg_start = len(self._steps)
        self._known = self.counter.count_messages([*self._base, *self._prefix])
        self._delta = 0
        return CompactionResult(before, self.fill_percent())

    def _rewrap(self, prefix: list[Message]) -> list[Message]:
        """Wrap untrusted tool results a strategy returned raw (idempotent for wrapped ones)."""
        untrusted = {
            (s.action.id or f"call_{i}"): s.action.name
            for i, s in enumerate(self._steps)
            if s.is_untrusted and s.action is not None
        }
        out = []
        for m in prefix:
            if (
                m.role == "tool"
                and m.tool_call_id in untrusted
                and not m.content.startswith("<untrusted-content ")
            ):
                wrapped = wrap_untrusted_content(m.content, untrusted[m.tool_call_id])
                m = Message("tool", wrapped, tool_call_id=m.tool_call_id)
            out.append(m)
        return out


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
