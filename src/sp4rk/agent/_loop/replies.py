"""Responses without usable tool calls: text-only replies and replies cut at the token limit."""

from __future__ import annotations

import re

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.finish import attempt_finish
from sp4rk.agent._loop.outcomes import INTERCEPTED, NUDGED, EndRun, StepOutcome
from sp4rk.agent._loop.reply import Reply
from sp4rk.agent._loop.reprieve import ask_reprieve
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent.breakers import Verdict
from sp4rk.agent.types import NudgeKind
from sp4rk.llm.types import ChatResponse

#: Text replies answered with a nudge before the text is accepted as the answer.
MAX_TEXT_NUDGES = 2

_PRINTED_CALL = re.compile(
    r"^\s*```\w+_\w+|<tool_call>|<function_call>|<function=\w+", re.MULTILINE | re.ASCII
)


def looks_like_printed_tool_call(text: str) -> bool:
    """Whether ``text`` looks like a tool call written out instead of made."""
    return bool(_PRINTED_CALL.search(text))


async def handle_text_reply(run: RunScope, response: ChatResponse) -> StepOutcome:
    """A reply with no tool call: nudge twice, then accept the text through the finish gates."""
    text = response.message.content
    reply = Reply.of(response, run.state.next_response_group())
    attempt = run.state.nudges.take_text_reply_nudge(MAX_TEXT_NUDGES)
    if attempt:
        if looks_like_printed_tool_call(text):
            nudge, kind = nudges.PRINTED_TOOL_CALL, NudgeKind.PRINTED_TOOL_CALL
            run.diag("tool_call_syntax_nudge", reason="tool_call_syntax_as_text", attempt=attempt)
        else:
            nudge, kind = nudges.FINISH_EXPLICITLY, NudgeKind.TEXT_REPLY
            run.diag(
                "executor_finish_nudge", reason="implicit_finish_without_tool", attempt=attempt
            )
        run.trajectory.nudge(nudge, kind, step=reply.step(first=True))
        return NUDGED
    outcome = await attempt_finish(run, text, reply, call=None, call_idx=0)
    run.trajectory.commit()
    return outcome


async def handle_truncated_response(run: RunScope, response: ChatResponse) -> StepOutcome:
    """A tool-call response cut at the output limit: run none of its calls, record each."""
    calls = response.message.tool_calls
    reply = Reply.of(response, run.state.next_response_group())
    for idx, call in enumerate(calls):
        run.events.tool_call(run.step, idx, call.name, call.input, run.tools.source_of(call.name))
    first = calls[0].name
    breaker = run.state.breakers.truncation
    verdict = breaker.on_truncated(run.settings.circuit_breaker)
    trip = breaker.trip(first)
    nudge: str | None = trip.nudge
    kind = NudgeKind.TRUNCATED_RESPONSE
    if verdict is Verdict.ABORT:
        run.diag(trip.abort_event, **trip.details)
        nudge = await ask_reprieve(run, breaker)
        kind = NudgeKind.REPRIEVE
    else:
        run.diag(trip.nudge_event, **trip.details)
    last = len(calls) - 1
    for idx, call in enumerate(calls):
        observation = nudges.TRUNCATED_CALL_OBSERVATION.format(tool=call.name)
        run.events.tool_done(run.step, idx, call, observation, error="response_truncated")
        step = reply.step(first=idx == 0, action=call, observation=observation, is_error=True)
        if idx == last and nudge:
            step.user_nudge, step.nudge_kind = nudge, kind
        run.trajectory.record(step)
    if nudge is None:
        return EndRun(trip.abort, trip.exit_reason)
    run.trajectory.commit()
    return INTERCEPTED
