"""After a normal step: the wrap-up nudge near the budget, and compaction of a full context."""

from __future__ import annotations

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.llm_call import compact_now
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent.state import WRAP_UP_MARGIN
from sp4rk.agent.types import FillCheck, NudgeKind
from sp4rk.llm.errors import ContextWindowExceededError

#: Fill states after which the context is compacted.
COMPACTING = frozenset({"compact", "warning", "emergency", "reject"})


def wrap_up(run: RunScope) -> None:
    """Once a run, when few steps are left: ask to wrap up, or to keep going on progress."""
    flags, budget = run.state.nudges, run.state.step_budget
    limit = run.step_limit()
    if flags.wrap_up_given or budget.unlimited or limit <= WRAP_UP_MARGIN:
        return
    if run.step < limit - WRAP_UP_MARGIN:
        return
    flags.give_wrap_up()
    remaining = limit - run.step
    active = run.state.gates.mutation.recent_progress()
    run.trajectory.nudge(nudges.wrap_up(remaining, active=active), NudgeKind.WRAP_UP)
    run.diag(
        "executor_wrapup_nudge",
        remaining=remaining,
        mode="active_progress" if active else "default",
    )


def check_context_fill(run: RunScope) -> FillCheck:
    """Check the fill after a normal step and report it (``context_fill``)."""
    fill = run.cw.check_fill()
    run.events.context_fill(
        fill.percent, fill.used, fill.max, fill.status, run.settings.plan_step_id
    )
    return fill


async def compact_context(run: RunScope, fill: FillCheck) -> None:
    """Compact a context whose fill crossed a threshold.

    Raises:
        ContextWindowExceededError: when the window is still full (``reject``) after compacting.
    """
    await compact_now(run)
    if fill.status == "reject":
        after = run.cw.check_fill()
        if after.status == "reject":
            raise ContextWindowExceededError(
                f"the context window is full even after compaction ({after.percent:.1f}% of "
                f"{after.max} tokens). Raise the window's max_tokens, shorten the system prompt, "
                "or lower the tool output limits."
            )
