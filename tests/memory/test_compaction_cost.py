"""A compaction costs what can end up in the prompt, not the length of the run.

Work is measured, never timed: every message a compaction renders, masks, shrinks or installs
goes through the window's token counter, so the messages counted during ``compact()`` (and the
steps a strategy is shown) are the work it did. Each scenario runs with 1 600 and with 10 000
steps of history, and the work must be the same: the steps repeat every 7 * 5 (groups,
untrusted results) and the range shown to a strategy starts on a multiple of
``HORIZON_QUANTUM`` (240), and 10 000 - 1 600 is a multiple of all three.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from sp4rk.agent import CompactionStrategy, Step
from sp4rk.llm import Message, SimpleTokenCounter
from sp4rk.llm.types import ContentBlock
from sp4rk.memory import (
    ContextWindow,
    HierarchicalStrategy,
    ObservationMaskingStrategy,
    SlidingWindowStrategy,
    SummarizationStrategy,
    validate_history,
)
from sp4rk.memory.compaction import StepRange
from sp4rk.memory.fit import OMITTED_NOTE
from sp4rk.memory.window import HORIZON_QUANTUM

from .helpers import call_step, tokens

SHORT, LONG = 1_600, 10_000


class Meter(SimpleTokenCounter):
    """Counts the messages it is asked to count."""

    def __init__(self) -> None:
        super().__init__()
        self.messages = 0

    def count_messages(self, messages: Sequence[Message]) -> int:
        self.messages += len(messages)
        return super().count_messages(messages)


class Spy:
    """Wraps a strategy and records how many steps each compaction showed it."""

    def __init__(self, inner: CompactionStrategy) -> None:
        self.inner = inner
        self.shown: list[tuple[int, int]] = []  # (first_index, len)

    async def compact(self, steps: Sequence[Step], budget_tokens: int) -> list[Message]:
        assert isinstance(steps, StepRange)
        self.shown.append((steps.first_index, len(steps)))
        return await self.inner.compact(steps, budget_tokens)


async def summarize(text: str) -> str:
    return f"{text.count('Step ')} steps: read pages, found nothing unusual"


def step(i: int) -> Step:
    """Page-sized results, with a response group every seventh step and untrusted ones."""
    group = i // 7 + 1 if i % 7 in (3, 4) else 0
    return call_step(i, observation=f"page {i} " + "x" * 3000, group=group, untrusted=i % 5 == 0)


def window(meter: Meter, strategy: CompactionStrategy | None = None) -> ContextWindow:
    return ContextWindow(16_000, 1000, token_counter=meter, task="read", strategy=strategy)


async def compact_measured(cw: ContextWindow, meter: Meter) -> int:
    before = meter.messages
    await cw.compact()
    work = meter.messages - before
    prompt = cw.build_prompt()
    validate_history(prompt)
    assert cw.used_tokens() == tokens(prompt) <= cw.effective_max()
    return work


async def run_like_the_executor(n: int) -> tuple[list[int], int]:
    """Add ``n`` steps, compacting whenever the fill asks; the work of the last compactions."""
    meter = Meter()
    cw = window(meter)
    work: list[int] = []
    for i in range(n):
        cw.add_step(step(i))
        cw.build_prompt()
        if cw.check_fill().status != "ok":
            work.append(await compact_measured(cw, meter))
    return work[-20:], len(cw.build_prompt())


async def test_default_compaction_work_does_not_grow_with_the_run() -> None:
    short, short_prompt = await run_like_the_executor(SHORT)
    long, long_prompt = await run_like_the_executor(LONG)
    assert len(short) == len(long) == 20
    assert long_prompt <= short_prompt + 10
    # The steady state is the same however long the run: each compaction masks and fits what
    # was added since the previous one, and touches far fewer messages than the prompt holds.
    assert max(long) <= max(short)
    assert max(long) < long_prompt // 4


async def seeded(n: int, strategy: CompactionStrategy | None) -> tuple[int, ContextWindow]:
    """Work of one compaction of ``n`` steps added without any (a restored checkpoint)."""
    meter = Meter()
    cw = window(meter, strategy)
    for i in range(n):
        cw.add_step(step(i))
    return await compact_measured(cw, meter), cw


async def test_compacting_a_long_uncompacted_history_costs_what_fits() -> None:
    short, _ = await seeded(SHORT, None)
    long, cw = await seeded(LONG, None)
    assert long == short
    prompt = cw.build_prompt()
    assert prompt[1] == Message("system", OMITTED_NOTE)
    assert prompt[-1].tool_call_id == f"c{LONG - 1}"


STRATEGIES = {
    "masking": lambda: ObservationMaskingStrategy(keep_last=3),
    "sliding": lambda: SlidingWindowStrategy(keep_first=3, keep_last=10),
    "summary": lambda: SummarizationStrategy(summarize),
    "hierarchical": lambda: HierarchicalStrategy(summarize),
}


@pytest.mark.parametrize("name", list(STRATEGIES))
async def test_a_strategy_is_shown_only_the_steps_that_could_fit(name: str) -> None:
    work, shown = {}, {}
    for n in (SHORT, LONG):
        spy = Spy(STRATEGIES[name]())
        work[n], cw = await seeded(n, spy)
        ((first, count),) = spy.shown
        assert first + count == n  # the newest steps
        shown[n] = count
    assert shown[LONG] == shown[SHORT] < 200 + HORIZON_QUANTUM
    assert work[LONG] == work[SHORT]
    prompt = cw.build_prompt()
    assert prompt[1] == Message("system", OMITTED_NOTE)  # older steps are one note


async def test_summaries_of_a_long_run_are_numbered_in_the_run_and_stay_memoised() -> None:
    calls: list[str] = []

    async def recording(text: str) -> str:
        calls.append(text)
        return "summary"

    strategy = SummarizationStrategy(recording, block_size=10, keep_last=5)
    cw = ContextWindow(16_000, 1000, task="read", strategy=Spy(strategy))
    for i in range(LONG):
        cw.add_step(step(i))
    await cw.compact()
    labels = [m.content.split("\n")[0] for m in cw.build_prompt() if m.role == "system"]
    assert labels[0] == OMITTED_NOTE
    first = int(labels[1].removeprefix("[Summary of steps ").split("-")[0])
    assert first > 9000  # numbered in the run, not in the range the strategy was shown
    assert labels[1] == f"[Summary of steps {first}-{first + 9}]"
    summarized = len(calls)
    for i in range(LONG, LONG + 10):
        cw.add_step(step(i))
    await cw.compact()
    assert len(calls) - summarized <= 2  # the new block (and one the window no longer shows)


async def test_blocks_do_not_depend_on_where_the_range_starts() -> None:
    texts: list[str] = []

    async def recording(text: str) -> str:
        texts.append(text)
        return "summary"

    strategy = SummarizationStrategy(recording, block_size=4, keep_last=1)
    steps = [call_step(i, group=i // 3 + 1 if i % 5 in (1, 2) else 0) for i in range(41)]
    whole = await strategy.compact(steps, 0)
    summarized = len(texts)
    tail = await strategy.compact(StepRange(steps[20:], 20), 0)
    assert len(texts) == summarized  # every block of the tail was memoised
    assert tail == whole[-len(tail) :]


async def test_content_block_tasks_and_interjections_stay_outside_compaction() -> None:
    meter = Meter()
    cw = ContextWindow(
        16_000, 1000, token_counter=meter, task=[ContentBlock("text", text="read all")]
    )
    for i in range(SHORT):
        cw.add_step(step(i))
    cw.set_pending_user_interjection("resumed")
    await compact_measured(cw, meter)
    prompt = cw.build_prompt()
    assert prompt[0].content_blocks[0].text == "read all"
    assert prompt[-1] == Message("user", "resumed")
