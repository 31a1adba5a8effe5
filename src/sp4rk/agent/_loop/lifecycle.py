"""The ReAct loop, phase by phase, in the order of the reference's lifecycle list."""

from __future__ import annotations

import time

from sp4rk.agent._loop.boundary import deliver_live_message, pause_requested, step_limit_reached
from sp4rk.agent._loop.checklist import staleness_nudge
from sp4rk.agent._loop.llm_call import call_llm
from sp4rk.agent._loop.post_step import (
    COMPACTING,
    check_context_fill,
    compact_context,
    wrap_up_nudge,
)
from sp4rk.agent._loop.replies import handle_text_reply, handle_truncated_response
from sp4rk.agent._loop.state import Flow, Run
from sp4rk.agent._loop.tool_calls import run_tool_calls
from sp4rk.agent.types import ExecutorResult, ExitReason
from sp4rk.llm.types import ChatResponse


async def run_loop(run: Run) -> ExecutorResult:
    """Iterate Thought → Action → Observation until the run finishes, pauses or is stopped."""
    while True:
        # Trajectory sync
        run.sync_trajectory()
        # Step-limit boundary
        if run.past_budget() and (stopped := await step_limit_reached(run)) is not None:
            return stopped
        # StepStart event (cancellation is delivered at the next await)
        run.emit("step_start", run.step)
        started = time.perf_counter()
        # Cooperative pause
        if run.s.pause_checker is not None and await pause_requested(run):
            return run.result("", ExitReason.PAUSED, finished=False)
        # Live user message
        if run.s.user_message_source is not None:
            await deliver_live_message(run)
        # LLM call (reactive compaction and retry inside)
        response = await call_llm(run)
        # Thought event
        _emit_thought(run, response)
        # Implicit finish check / truncation detection / tool execution
        if not response.message.tool_calls:
            outcome = await handle_text_reply(run, response)
        elif response.stop_reason == "max_tokens":
            outcome = await handle_truncated_response(run, response)
        else:
            outcome = await run_tool_calls(run, response)
        if isinstance(outcome, ExecutorResult):
            if outcome.finished or outcome.exit_reason is ExitReason.MUTATION_REQUIRED:
                run.emit("step_complete", run.step, time.perf_counter() - started)
            return outcome
        # StepComplete event
        if outcome is not Flow.NUDGED:
            run.emit("step_complete", run.step, time.perf_counter() - started)
        # Compaction, after the wrap-up and checklist-staleness nudges
        if outcome is Flow.COMPLETED:
            wrap_up_nudge(run)
            staleness_nudge(run)
            if (fill := check_context_fill(run)).status in COMPACTING:
                await compact_context(run, fill)
        run.step += 1


def _emit_thought(run: Run, response: ChatResponse) -> None:
    content = response.message.content
    reasoning = response.reasoning or response.message.reasoning_content
    if content or reasoning:
        run.emit("thought", run.step, content, reasoning)
