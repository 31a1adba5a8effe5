"""Approvals in a batch: nobody is there to ask, so the batch's setting decides every call.

``never`` (the default) denies every call that needs a human — writes through
``USER_CONFIRM`` tools, shell commands the rule set flagged, risky calls after untrusted
content — and tells the model why. ``auto`` approves them all: each run works on its own copy
of its workspace, but a flagged shell command still runs on this machine, so pass it only for
tasks you trust. Limits are never extended: at a step limit, a breaker or a budget limit the
run stops, and its result line says which.
"""

from __future__ import annotations

from typing import Literal

from sp4rk.agent import HITLHandler, HITLToolDecision
from sp4rk.tools import RunContext, ToolPolicy

Approve = Literal["auto", "never"]
APPROVE_MODES: tuple[Approve, ...] = ("never", "auto")

DENIED = (
    "approvals are switched off in this batch (--approve never), so this call did not run; "
    "find another way, or explain in your answer why this call is needed"
)


class BatchApprovals(HITLHandler):
    """Approves (``auto``) or denies (``never``) every call that needs a human."""

    def __init__(self, mode: Approve) -> None:
        if mode not in APPROVE_MODES:
            raise ValueError(f"approve must be one of {', '.join(APPROVE_MODES)}, got {mode!r}")
        self.mode = mode

    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        """Decide calls that need a human; every other call runs unchanged."""
        if ctx.tool_policy is not ToolPolicy.USER_CONFIRM:
            return None
        if self.mode == "auto":
            return HITLToolDecision(True, reason="--approve auto")
        return HITLToolDecision(False, reason=DENIED)
