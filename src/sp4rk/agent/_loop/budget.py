"""The run's budget in the loop: told to the model, checked before spending, cut at the deadline.

- :func:`tell_budget` — at a boundary: what remains, at the budget's cadence, and once, near a
  limit, a request to wrap up.
- :func:`reserve_call` — the pre-flight before a model call: the window's token count plus the
  output limit (and their price) must fit what remains.
- :func:`send_within_budget` — the call itself, cut at the wall-clock deadline; its
  reservation is replaced by the reported usage.
- :func:`take_tool_call` / :func:`tool_within_deadline` — the same for a tool call.

A limit that would be crossed asks ``hitl.on_step_limit`` with the limit's name as the reason;
a denial ends the run with ``BUDGET_EXHAUSTED`` and the best answer so far. Nothing here runs
when no budget applies (``run.budget.limited`` is false), except counting what was spent.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable
from typing import Any, TypeVar

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.outcomes import EndRun
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent.account import Hold, Shortfall
from sp4rk.agent.budget import LABELS, format_amount
from sp4rk.agent.types import ExitReason, NudgeKind
from sp4rk.llm.types import ChatRequest, ChatResponse
from sp4rk.tools.base import ToolResult

T = TypeVar("T")


def tell_budget(run: RunScope) -> None:
    """Tell the model what remains: once near a limit (wrap up), else at the cadence."""
    account, state = run.budget, run.budget.state
    report = account.report()
    if not state.wrap_up_given and report.max_fraction >= account.budget.wrap_up_at:
        state.wrap_up_given = True
        state.last_report_step = run.step
        run.trajectory.nudge(nudges.budget_wrap_up(report.describe()), NudgeKind.BUDGET_WRAP_UP)
        run.diag("budget_wrap_up_nudge", used_percent=round(report.max_fraction * 100, 1))
        return
    every = account.budget.report_every
    if not every or not report.limits:
        return
    if state.last_report_step and run.step - state.last_report_step < every:
        return
    state.last_report_step = run.step
    run.trajectory.nudge(nudges.budget_status(report.describe()), NudgeKind.BUDGET_STATUS)
    run.diag("budget_status_nudge", used_percent=round(report.max_fraction * 100, 1))


async def reserve_call(run: RunScope) -> Hold | EndRun:
    """Reserve the next model call, asking the human at a limit; ``EndRun`` on a denial."""
    account = run.budget
    while True:
        prompt = run.cw.check_fill().used
        held = account.reserve_call(
            account.state.last_model or run.model_hint, prompt, run.cw.output_limit()
        )
        if isinstance(held, Hold):
            return held
        stop = await _at_limit(run, held, between_responses=True)
        if stop is not None:
            return stop


async def send_within_budget(
    run: RunScope, hold: Hold | None, request: ChatRequest, send: Awaitable[ChatResponse]
) -> ChatResponse | None:
    """Await the model call ``send``; settle its usage, or ``None`` when cut at the deadline.

    The reservation is released when the call fails, is cancelled or is cut: a call that
    returned nothing is charged nothing.
    """
    try:
        response = await within_deadline(run, send)
    except BaseException:
        run.budget.release(hold)
        raise
    if response is None:
        run.budget.release(hold)
        run.diag("budget_deadline_cut", during="model_call")
        return None
    if response.message.content.strip():
        run.latest_text = response.message.content
    model = response.model or request.model or run.model_hint
    run.budget.settle(hold, model, response.usage)
    if run.events.listens("usage_update"):
        run.events.usage_update(run.step, run.budget.report())
    return response


async def take_tool_call(run: RunScope) -> EndRun | None:
    """Count a tool call that is about to run, asking the human at a limit."""
    while (short := run.budget.take_tool_call()) is not None:
        stop = await _at_limit(run, short, between_responses=False)
        if stop is not None:
            return stop
    return None


async def tool_within_deadline(run: RunScope, work: Awaitable[ToolResult]) -> ToolResult:
    """Await a tool; at the deadline, stop it and answer the call with an error result."""
    result = await within_deadline(run, work)
    if result is None:
        run.diag("budget_deadline_cut", during="tool_call")
        return ToolResult(nudges.CUT_AT_DEADLINE, is_error=True)
    return result


async def within_deadline(run: RunScope, work: Awaitable[T]) -> T | None:
    """``await work``, cancelled at the run's wall-clock deadline (``None`` when it was).

    Cancellation reaches the work like any other (a shell tool's process group is killed);
    a cancellation of the run itself still propagates.
    """
    left = run.budget.time_left() if run.budget.limited else None
    if left is None:
        return await work
    timeout = asyncio.timeout(max(0.0, left))
    try:
        async with timeout:
            return await work
    except TimeoutError:
        if not timeout.expired():
            raise
        return None


async def _at_limit(run: RunScope, short: Shortfall, *, between_responses: bool) -> EndRun | None:
    """Ask the human for more at ``short``'s limit; ``None`` when granted.

    A limit of an account the run draws from (a parent's) is not this run's to extend: the
    run ends, and the parent's own check asks its human.
    """
    name = short.limit
    account = run.budget
    if short.account is not account:
        return _exhausted(run, short, scope="parent")
    answer = await run.settings.hitl.on_step_limit(run.ctx, run.step, run.step_limit(), name)
    granted = account.extend(short, answer)
    if granted is None:
        return _exhausted(run, short, scope="own")
    lifted = math.isinf(granted)
    run.diag(
        "budget_extended", limit=name, answer=answer.value, granted=None if lifted else granted
    )
    if between_responses:  # never between the calls of one response
        amount = None if lifted else format_amount(name, granted)
        run.trajectory.nudge(
            nudges.budget_limit_extended(LABELS[name], amount), NudgeKind.BUDGET_EXTENDED
        )
    return None


def _exhausted(run: RunScope, short: Shortfall, *, scope: str) -> EndRun:
    name = short.limit
    state = run.budget.state
    state.exhausted = name
    report = run.budget.report()
    spent, limit = report.limits.get(name, (0.0, 0.0))
    details: dict[str, Any] = {"limit": name, "scope": scope, "spent": spent, "max": limit}
    run.diag("budget_exhausted", **details)
    described = f"{format_amount(name, spent)} of {format_amount(name, limit)}"
    ahead = format_amount(name, short.over) if spent < limit and short.over > 0 else ""
    output = best_answer(run) or nudges.budget_exhausted(LABELS[name], described, ahead=ahead)
    return EndRun(output, ExitReason.BUDGET_EXHAUSTED)


def best_answer(run: RunScope) -> str:
    """The best answer so far: the last non-empty text the model wrote (``""`` if none).

    That is the latest response's text, even when none of its calls was recorded; in a
    resumed run that wrote none yet, the last thought of the resumed steps.
    """
    if run.latest_text:
        return run.latest_text
    for step in reversed(run.trajectory.steps):
        if step.thought.strip():
            return step.thought
    return ""
