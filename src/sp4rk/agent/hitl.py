"""Human-in-the-loop hooks: approve tool calls, and decide what happens at a limit.

Unlike events, these are control flow: an exception raised by a handler propagates out of
``Executor.run`` (after the trajectory is saved).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sp4rk.tools.context import RunContext


class StepLimitResponse(enum.Enum):
    """An answer to ``on_step_limit``."""

    ALLOW_ONCE = "allow_once"
    """One more step (at a breaker: one more chance)."""
    ALLOW_MORE = "allow_more"
    """Another ``max_steps`` steps (at a breaker: carry on)."""
    ALLOW_ALWAYS = "allow_always"
    """No step limit for the rest of the run (at a breaker: switch that breaker's abort off)."""
    DENY = "deny"
    """Stop the run."""


@dataclass(slots=True)
class HITLToolDecision:
    """A verdict on one tool call.

    ``allow=False`` rejects the call (the model sees ``reason``). ``allow=True`` approves it
    explicitly, which ``USER_CONFIRM`` tools require; ``modified_input`` replaces the
    arguments the tool receives.
    """

    allow: bool
    modified_input: str | None = None
    reason: str = ""


class HITLHandler:
    """Base class for human-in-the-loop handlers. The defaults keep no human in the loop."""

    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        """Approve, reject or modify a call; ``None`` lets it run unchanged (not approved)."""
        return None

    async def on_step_limit(
        self, ctx: RunContext, current_step: int, max_steps: int, reason: str
    ) -> StepLimitResponse:
        """Decide whether to go on at a limit.

        ``reason`` is ``""`` at the step budget and the breaker's name at a breaker abort:
        ``"repeat"``, ``"truncation"``, ``"parse_error"``, ``"fruitless"``, ``"same_tool"``,
        ``"cycle"`` or ``"no_progress"``. At a limit of the run's :class:`~sp4rk.agent.Budget`
        it is the limit's name (``"max_total_tokens"``, ``"max_cost_usd"``, ``"max_seconds"``,
        ``"max_tool_calls"``, ...); ``ctx.budget.report()`` says what was spent, and a grant
        is in that limit's unit (see ``BudgetAccount.extend``).
        """
        return StepLimitResponse.DENY


NoopHITLHandler = HITLHandler


def check_hitl_handler(handler: object) -> None:
    """Refuse a handler whose hooks the executor could not await.

    Raises:
        TypeError: naming the hook and how to fix it.
    """
    from sp4rk.agent.events import _check_callable

    for name in ("on_tool_call", "on_step_limit"):
        method = getattr(handler, name, None)
        if method is None:
            raise TypeError(
                f"{type(handler).__name__} has no {name}(): subclass sp4rk.agent.HITLHandler"
            )
        _check_callable(handler, name, method, getattr(HITLHandler, name), want_async=True)
