"""Approvals in the terminal: tool calls that need a human, and the run's limits.

``--approve ask`` (the default) asks at the terminal: approve, deny, or edit the arguments
of a call that needs confirmation (``USER_CONFIRM`` tools, shell commands the rule set
flagged, risky calls after untrusted content), with the reason it needs one; and at the step
limit, a budget limit or a breaker abort, whether to go on. ``auto`` approves every such call
(the run says so loudly); limits still stop the run. ``never`` denies them. Without a
terminal, ``ask`` behaves as ``never`` and the model is told why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import cast

from sp4rk.agent import BudgetAccount, HITLHandler, HITLToolDecision, StepLimitResponse
from sp4rk.agent.budget import LABELS, ONCE_SECONDS, LimitName, format_amount
from sp4rk.cli.config import Approve
from sp4rk.cli.terminal import LineInput
from sp4rk.cli.view import TAINT_NOTE, LiveStatus, View, limit_text, one_line
from sp4rk.tools import RunContext, ToolPolicy

#: What each breaker means, for the question at a breaker abort.
BREAKERS = {
    "repeat": "the model repeated the same call with the same arguments",
    "truncation": "the model's replies kept being cut at the output limit",
    "parse_error": "the model's tool arguments kept failing to parse",
    "fruitless": "calls kept returning nothing useful",
    "same_tool": "the model kept calling one tool with varied arguments and similar results",
}


class TerminalApprovals(HITLHandler):
    """The human at the terminal decides (or ``--approve auto``/``never`` does).

    Args:
        mode: ``ask``, ``auto`` or ``never``.
        view: where questions and decisions are shown.
        lines: the terminal's lines; ``None`` when there is no terminal.
        status: the step budget shown in the view (updated on a grant).
        pausing: whether the human asked to pause (questions are then not asked).
    """

    def __init__(
        self,
        mode: Approve,
        view: View,
        lines: LineInput | None,
        status: LiveStatus,
        pausing: Callable[[], bool],
    ) -> None:
        self.mode = mode
        self.view = view
        self.lines = lines
        self.status = status
        self.pausing = pausing

    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        """Ask about calls that need a human; let every other call run unchanged."""
        if ctx.tool_policy is not ToolPolicy.USER_CONFIRM:
            return None
        reason = ctx.tool_review or f"{tool_name} asks for confirmation before it runs"
        if self.mode == "auto":
            return self._decided(tool_name, reason, "approved", "--approve auto", True)
        if self.mode == "never":
            return self._decided(
                tool_name,
                reason,
                "denied",
                "--approve never",
                False,
                "approvals are switched off for this run (--approve never); find another way "
                "or explain in your answer why this call is needed",
            )
        if self.lines is None:
            return self._decided(
                tool_name,
                reason,
                "denied",
                "no terminal",
                False,
                "no one is at a terminal to approve it (sp4rk runs without one); find another "
                "way or explain in your answer why this call is needed",
            )
        return await self._ask_call(tool_name, input, reason)

    async def _ask_call(self, tool: str, arguments: str, reason: str) -> HITLToolDecision:
        assert self.lines is not None
        self.view.emit("approval_needed", tool=tool, arguments=arguments, reason=reason)
        self.view.question(
            f"\n? {tool} needs your approval: {reason}\n{_taint_warning(reason)}"
            f"  {one_line(arguments, 400)}\n"
            "  [y] approve  [n] deny  [e] edit the arguments > "
        )
        while True:
            answer = None if self.pausing() else await self.lines.ask()
            if answer is None:
                return self._decided(
                    tool,
                    reason,
                    "denied",
                    "paused",
                    False,
                    "the user paused the run before deciding; ask again after the resume if "
                    "it is still needed",
                )
            choice = answer.strip().lower()
            if choice in ("y", "yes"):
                return self._decided(tool, reason, "approved", "you", True)
            if choice in ("n", "no"):
                self.view.question("  reason for the model (Enter to skip) > ")
                why = (await self.lines.ask() or "").strip()
                return self._decided(
                    tool, reason, "denied", "you", False, why or "the user denied this call"
                )
            if choice in ("e", "edit"):
                edited = await self._edit(arguments)
                if edited is not None:
                    decision = HITLToolDecision(allow=True, modified_input=edited)
                    self.view.emit(
                        "approval",
                        tool=tool,
                        decision="approved with edits",
                        by="you",
                        reason=reason,
                        arguments=edited,
                    )
                    return decision
            self.view.question("  type y, n or e > ")

    async def _edit(self, arguments: str) -> str | None:
        assert self.lines is not None
        self.view.question(
            f"  new arguments as one line of JSON (Enter keeps them):\n  {arguments}\n  > "
        )
        while True:
            line = await self.lines.ask()
            if line is None:
                return None
            if not line.strip():
                return arguments
            try:
                value = json.loads(line)
            except ValueError as exc:
                self.view.question(f"  not JSON ({exc}); try again > ")
                continue
            if not isinstance(value, dict):
                self.view.question("  the arguments must be a JSON object {...}; try again > ")
                continue
            return json.dumps(value, ensure_ascii=False)

    def _decided(
        self, tool: str, reason: str, decision: str, by: str, allow: bool, told: str = ""
    ) -> HITLToolDecision:
        self.view.emit("approval", tool=tool, decision=decision, by=by, reason=reason)
        return HITLToolDecision(allow=allow, reason=told)

    async def on_step_limit(
        self, ctx: RunContext, current_step: int, max_steps: int, reason: str
    ) -> StepLimitResponse:
        """At the step limit, a budget limit or a breaker abort: go on? (``ask`` only)."""
        budget = ctx.budget if isinstance(ctx.budget, BudgetAccount) else None
        if reason in LABELS and budget is not None:
            what, options = _budget_question(budget, reason)
        else:
            what = (
                f"the {reason} breaker stopped the run: {BREAKERS.get(reason, reason)}"
                if reason
                else f"the step budget of {max_steps} steps is used up"
            )
            steps = self.status.max_steps
            options = ("allow once", f"allow {steps} more steps", "allow always")
        if self.mode != "ask" or self.lines is None or self.pausing():
            self.view.emit("limit", step=current_step, reason=reason, decision="stop")
            return StepLimitResponse.DENY
        once, more, always = options
        self.view.question(f"\n? {what}.\n  [o] {once}  [m] {more}  [a] {always}  [s] stop > ")
        answers = {
            "o": StepLimitResponse.ALLOW_ONCE,
            "m": StepLimitResponse.ALLOW_MORE,
            "a": StepLimitResponse.ALLOW_ALWAYS,
            "s": StepLimitResponse.DENY,
        }
        while True:
            line = await self.lines.ask()
            choice = "s" if line is None or self.pausing() else (line.strip().lower()[:1] or "?")
            if choice in answers:
                answer = answers[choice]
                if not reason:
                    self._grant(answer)
                self.view.emit("limit", step=current_step, reason=reason, decision=answer.value)
                return answer
            self.view.question("  type o, m, a or s > ")

    def _grant(self, answer: StepLimitResponse) -> None:
        if answer is StepLimitResponse.ALLOW_ONCE:
            self.status.granted += 1
        elif answer is StepLimitResponse.ALLOW_MORE:
            self.status.granted += self.status.max_steps
        elif answer is StepLimitResponse.ALLOW_ALWAYS:
            self.status.unlimited = True


def _taint_warning(reason: str) -> str:
    """A line for a call asked about because the run read untrusted content (else ``""``)."""
    source = reason.partition(TAINT_NOTE)[2]
    if not source:
        return ""
    return (
        f"  ! the run has read untrusted content from {source}: an instruction hidden in it "
        "(a prompt injection) may have asked for this call\n"
    )


def _budget_question(account: BudgetAccount, name: str) -> tuple[str, tuple[str, str, str]]:
    """What to ask at budget limit ``name``: the question, and the three ways to go on."""
    limit = cast(LimitName, name)
    report = account.report()
    spent, top = report.limits.get(limit, (0.0, 0.0))
    used = f"{format_amount(limit, spent)} of {format_amount(limit, top)}"
    state = "is used up" if spent >= top else "could be crossed by the next call"
    what = f"{limit_text(limit)} {state} ({used}); spent so far: {report.summary()}"
    base = getattr(account.budget, limit) or 0
    if limit == "max_seconds":
        once = f"allow {format_amount(limit, min(ONCE_SECONDS, base))} more"
    elif limit == "max_tool_calls":
        once = "allow one more tool call"
    else:
        once = "allow enough for the next model call"
    more = f"allow {format_amount(limit, base)} more"
    if limit == "max_total_tokens":
        more += " tokens"
    elif limit == "max_tool_calls":
        more += " tool call" if base == 1 else " tool calls"
    always = f"no {LABELS[limit]} limit for this run"
    return what, (once, more, always)
