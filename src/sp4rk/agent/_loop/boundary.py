"""Step boundaries: the step budget, the cooperative pause, and live user messages."""

from __future__ import annotations

from sp4rk._internal.aio import call_host
from sp4rk._internal.text import has_visible_content
from sp4rk.agent._loop import nudges, state
from sp4rk.agent._loop.state import Run
from sp4rk.agent.hitl import StepLimitResponse
from sp4rk.agent.types import ExecutorResult, ExitReason


async def step_limit_reached(run: Run) -> ExecutorResult | None:
    """At the budget, ask the HITL handler for more steps; return the final result on deny."""
    if not run.past_budget():
        return None
    answer = await run.s.hitl.on_step_limit(run.ctx, run.step, run.eff_max, "")
    if answer is StepLimitResponse.ALLOW_ONCE:
        run.eff_max += 1
        run.record_nudge(nudges.budget_extended(1))
    elif answer is StepLimitResponse.ALLOW_MORE:
        granted = max(run.s.max_steps, 1)
        run.eff_max += granted
        run.record_nudge(nudges.budget_extended(granted))
    elif answer is StepLimitResponse.ALLOW_ALWAYS:
        run.unlimited = True
        run.record_nudge(nudges.budget_extended(None))
    else:
        return run.result(
            f"Stopped: the step budget of {run.eff_max} steps is used up.",
            ExitReason.STEP_LIMIT,
            finished=False,
        )
    return None


async def pause_requested(run: Run) -> bool:
    """Whether the host's pause checker asks the run to stop at this boundary."""
    checker = run.s.pause_checker
    if checker is None:
        return False
    try:
        return bool(await call_host(checker, run.ctx, state.HOST_CALLBACK_TIMEOUT))
    except TimeoutError:
        run.log.warning(
            "pause checker did not answer in %ss; not pausing", state.HOST_CALLBACK_TIMEOUT
        )
        return False


async def deliver_live_message(run: Run) -> None:
    """Drain at most one live user message into the trajectory, as a nudge-only step."""
    source = run.s.user_message_source
    if source is None:
        return
    try:
        message = await call_host(source, run.ctx, state.HOST_CALLBACK_TIMEOUT)
    except TimeoutError:
        run.log.warning(
            "message source did not answer in %ss; no message", state.HOST_CALLBACK_TIMEOUT
        )
        return
    if not isinstance(message, str):
        raise TypeError(
            f"user_message_source must return a str ('' when empty), got {type(message).__name__}"
        )
    if has_visible_content(message):
        run.record_nudge(message)
        run.diag("live_user_message", length=len(message))
