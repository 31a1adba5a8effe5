"""A tripped breaker asks the human whether the run may go on (decisions #7)."""

from __future__ import annotations

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent.breakers import Breaker
from sp4rk.agent.hitl import StepLimitResponse

_ALLOWED = (
    StepLimitResponse.ALLOW_ONCE,
    StepLimitResponse.ALLOW_MORE,
    StepLimitResponse.ALLOW_ALWAYS,
)


async def ask_reprieve(run: RunScope, breaker: Breaker) -> str | None:
    """Ask ``on_step_limit`` with the breaker's name as the reason.

    Returns the nudge to record when the run may go on (the breaker is reset, and its abort
    switched off for the rest of the run on ``ALLOW_ALWAYS``), or ``None`` to abort.
    """
    answer = await run.settings.hitl.on_step_limit(
        run.ctx, run.step, run.step_limit(), breaker.name
    )
    if answer not in _ALLOWED:
        return None
    always = answer is StepLimitResponse.ALLOW_ALWAYS
    breaker.reprieve(always=always)
    run.diag("breaker_reprieve", breaker=breaker.name, response=answer.value)
    return nudges.breaker_reprieve(
        breaker.name.replace("_", " "), always=always, more=answer is StepLimitResponse.ALLOW_MORE
    )
