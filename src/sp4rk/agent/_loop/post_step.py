"""After a normal step: the wrap-up nudge near the budget, and compaction of a full context."""

from __future__ import annotations

import itertools

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.state import Run
from sp4rk.agent._loop.steps import is_successful_mutation
from sp4rk.agent.types import FillCheck
from sp4rk.llm.errors import ContextWindowExceededError

#: Steps before the budget at which the wrap-up nudge fires.
WRAP_UP_MARGIN = 3
#: Recent tool steps inspected for progress (a successful edit) by the wrap-up nudge.
WRAP_UP_WINDOW = 5
#: Fill states after which the context is compacted.
COMPACTING = frozenset({"compact", "warning", "emergency", "reject"})


def wrap_up_nudge(run: Run) -> None:
    """Once a run, when few steps are left: ask to wrap up, or to keep going on progress."""
    if run.wrap_up_done or run.unlimited or run.eff_max <= WRAP_UP_MARGIN:
        return
    if run.step < run.eff_max - WRAP_UP_MARGIN:
        return
    run.wrap_up_done = True
    remaining = run.eff_max - run.step
    recent = itertools.islice(
        (s for s in reversed(run.all_steps) if s.action is not None), WRAP_UP_WINDOW
    )
    active = any(map(is_successful_mutation, recent))
    run.record_nudge(nudges.wrap_up(remaining, active))
    run.diag(
        "executor_wrapup_nudge",
        remaining=remaining,
        mode="active_progress" if active else "default",
    )


def check_context_fill(run: Run) -> FillCheck:
    """Check the fill after a normal step and report it (``context_fill``)."""
    fill = run.cw.check_fill()
    run.emit("context_fill", fill.percent, fill.used, fill.max, fill.status, run.s.plan_step_id)
    return fill


async def compact_context(run: Run, fill: FillCheck) -> None:
    """Compact a context whose fill crossed a threshold.

    Raises:
        ContextWindowExceededError: when the window is still full (``reject``) after compacting.
    """
    result = await run.cw.compact()
    if result is not None:
        run.emit(
            "context_compaction", result.before_percent, result.after_percent, run.s.plan_step_id
        )
        run.pre_warning_done = False
    if fill.status == "reject":
        after = run.cw.check_fill()
        if after.status == "reject":
            raise ContextWindowExceededError(
                f"the context window is full even after compaction ({after.percent:.1f}% of "
                f"{after.max} tokens). Raise the window's max_tokens, shorten the system prompt, "
                "or lower the tool output limits."
            )
