"""The ReAct loop, phase by phase, in the order of the reference's lifecycle list."""

from __future__ import annotations

import time

from sp4rk.agent._loop.boundary import deliver_live_message, pause_requested, step_limit_reached
from sp4rk.agent._loop.budget import tell_budget
from sp4rk.agent._loop.checklist import staleness_nudge
from sp4rk.agent._loop.llm_call import call_llm
from sp4rk.agent._loop.outcomes import EndRun
from sp4rk.agent._loop.post_step import COMPACTING, check_context_fill, compact_context, wrap_up
from sp4rk.agent._loop.replies import handle_text_reply, handle_truncated_response
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent._loop.tool_calls import run_tool_calls
from sp4rk.agent.types import ExecutorResult, ExitReason
from sp4rk.llm.types import ChatResponse


async def run_loop(run: RunScope) -> ExecutorResult:
    """Iterate Thought → Action → Observation until the run finishes, pauses or is stopped."""
    while True:
        # Trajectory sync (and the journal's commit: nothing completed is lost from here on)
        run.at_boundary()
        # Step-limit boundary
        if (stopped := await step_limit_reached(run)) is not None:
            return run.result(stopped.output, stopped.exit_reason, finished=False)
        # StepStart event (cancellation is delivered at the next await)
        run.events.step_start(run.step)
        started = time.perf_counter()
        # Cooperative pause
        if await pause_requested(run):
            return run.result("", ExitReason.PAUSED, finished=False)
        # Live user message
        await deliver_live_message(run)
        # What remains of the budget, told to the model (only when a budget applies)
        if run.budget.limited:
            tell_budget(run)
        # LLM call (budget pre-flight, reactive compaction and retry inside)
        response = await call_llm(run)
        if isinstance(response, EndRun):
            return run.result(response.output, response.exit_reason, finished=False)
        # Thought event
        _emit_thought(run, response)
        # Implicit finish check / truncation detection / tool execution
        if not response.message.tool_calls:
            outcome = await handle_text_reply(run, response)
        elif response.stop_reason == "max_tokens":
            outcome = await handle_truncated_response(run, response)
        else:
            outcome = await run_tool_calls(run, response)
        # StepComplete event
        if outcome.step_complete:
            run.events.step_complete(run.step, time.perf_counter() - started)
        if isinstance(outcome, EndRun):
            finished = outcome.exit_reason in (ExitReason.FINISHED, ExitReason.IMPLICIT_FINISH)
            return run.result(outcome.output, outcome.exit_reason, finished=finished)
        # Wrap-up and checklist-staleness nudges, then compaction
        if outcome.post_checks:
            wrap_up(run)
            staleness_nudge(run)
            if (fill := check_context_fill(run)).status in COMPACTING:
                await compact_context(run, fill)
        run.state.advance()


def _emit_thought(run: RunScope, response: ChatResponse) -> None:
    content = response.message.content
    reasoning = response.reasoning or response.message.reasoning_content
    if content or reasoning:
        run.events.thought(run.step, content, reasoning)
