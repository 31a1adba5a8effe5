"""Human-in-the-loop hooks: approve tool calls, and decide what happens at a limit.

Unlike events, these are control flow: an exception raised by a handler propagates out of
``Executor.run`` (after the trajectory is saved).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    """A verdict on one tool call; build it with one of the four constructors.

    - :meth:`approve` — run the call. ``USER_CONFIRM`` tools (and risky calls after untrusted
      content) run only with an explicit approval.
    - :meth:`reject` — do not run it; the model sees ``reason``.
    - :meth:`modify` — run it with other arguments.
    - :meth:`no_opinion` — leave it to the tool's policy: an ``ALWAYS_ALLOW`` call runs, one
      that needs an approval does not. Returning ``None`` means the same.

    ``HITLToolDecision(allow, modified_input=None, reason="")`` still works:
    ``allow=False`` rejects, ``allow=True`` approves (with ``modified_input``: modifies).
    """

    allow: bool
    modified_input: str | None = None
    reason: str = ""
    abstain: bool = field(default=False, kw_only=True)
    """No opinion: the tool's policy decides (what :meth:`no_opinion` and ``None`` mean)."""

    @classmethod
    def approve(cls, reason: str = "") -> HITLToolDecision:
        """Run the call as the model made it."""
        return cls(True, reason=reason)

    @classmethod
    def reject(cls, reason: str = "rejected by user") -> HITLToolDecision:
        """Do not run the call; ``reason`` is what the model is told."""
        return cls(False, reason=reason)

    @classmethod
    def modify(cls, input: str | Mapping[str, Any], reason: str = "") -> HITLToolDecision:
        """Run the call with ``input`` instead (raw JSON text, or a mapping to serialise)."""
        if isinstance(input, Mapping):
            input = json.dumps(dict(input), ensure_ascii=False)
        elif not isinstance(input, str):
            raise TypeError(
                f"modify() takes the new arguments as JSON text or a dict, got "
                f"{type(input).__name__}"
            )
        return cls(True, modified_input=input, reason=reason)

    @classmethod
    def no_opinion(cls) -> HITLToolDecision:
        """Leave the call to its policy: it runs unless it needs an approval."""
        return cls(False, abstain=True)


class HITLHandler:
    """Base class for human-in-the-loop handlers. The defaults keep no human in the loop."""

    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        """Approve, reject or modify a call, or have no opinion on it (the default).

        ``ctx.tool_policy`` says whether the call needs an approval (``USER_CONFIRM``) and
        ``ctx.tool_review`` why. Return ``HITLToolDecision.approve()``, ``.reject(reason)``,
        ``.modify(arguments)`` or ``.no_opinion()`` (``None`` means the same as the last).
        """
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
