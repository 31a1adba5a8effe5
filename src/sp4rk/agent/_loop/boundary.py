"""Step boundaries: the step budget, the cooperative pause, and live user messages."""

from __future__ import annotations

from sp4rk._internal.aio import call_host
from sp4rk._internal.text import has_visible_content
from sp4rk.agent._loop import nudges, settings
from sp4rk.agent._loop.outcomes import EndRun
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent.types import ExitReason, NudgeKind


async def step_limit_reached(run: RunScope) -> EndRun | None:
    """At the budget, ask the HITL handler for more steps; end the run on a denial."""
    budget, max_steps = run.state.step_budget, run.settings.max_steps
    if not budget.exhausted(run.step, max_steps):
        return None
    limit = budget.limit(max_steps)
    answer = await run.settings.hitl.on_step_limit(run.ctx, run.step, limit, "")
    granted = budget.extend(answer, max_steps)
    if granted is None:
        return EndRun(
            f"Stopped: the step budget of {limit} steps is used up.", ExitReason.STEP_LIMIT
        )
    run.trajectory.nudge(nudges.budget_extended(granted or None), NudgeKind.BUDGET_GRANTED)
    return None


async def pause_requested(run: RunScope) -> bool:
    """Whether the host's pause checker asks the run to stop at this boundary."""
    checker = run.settings.pause_checker
    if checker is None:
        return False
    try:
        return bool(await call_host(checker, run.ctx, settings.HOST_CALLBACK_TIMEOUT))
    except TimeoutError:
        run.log.warning(
            "pause checker did not answer in %ss; not pausing", settings.HOST_CALLBACK_TIMEOUT
        )
        return False


async def deliver_live_message(run: RunScope) -> None:
    """Deliver at most one live user message: a queued one first, else one from the source."""
    queued = run.state.take_message()
    if queued is not None:
        message = queued
    elif (source := run.settings.user_message_source) is not None:
        try:
            message = await call_host(source, run.ctx, settings.HOST_CALLBACK_TIMEOUT)
        except TimeoutError:
            run.log.warning(
                "message source did not answer in %ss; no message", settings.HOST_CALLBACK_TIMEOUT
            )
            return
        if not isinstance(message, str):
            raise TypeError(
                "user_message_source must return a str ('' when empty), got "
                f"{type(message).__name__}"
            )
    else:
        return
    if has_visible_content(message):
        run.trajectory.nudge(message, NudgeKind.USER)
        run.diag("live_user_message", length=len(message))
