"""Typed answers (``Executor(output_type=...)``): a text reply that is not of the answer's type.

An invalid ``finish`` call is a parse error like any other tool's (see ``tool_calls``); a text
reply accepted as the answer after the text nudges must validate too, and counts toward the
same breaker when it does not, so a model that never produces a valid answer is stopped.
"""

from __future__ import annotations

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.outcomes import NUDGED, EndRun, StepOutcome
from sp4rk.agent._loop.reply import Reply
from sp4rk.agent._loop.reprieve import ask_reprieve
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent.breakers import CallResult, Verdict
from sp4rk.agent.types import NudgeKind
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME


async def refuse_text_answer(run: RunScope, reply: Reply, error: str) -> StepOutcome:
    """Tell the model why its text is no answer; stop the run when that keeps happening."""
    breaker = run.state.breakers.parse_error
    seen = CallResult(tool=FINISH_TOOL_NAME, key="", content=error, is_error=True, parse_error=True)
    verdict = breaker.observe(seen, run.settings.circuit_breaker)
    text = nudges.invalid_text_answer(error)
    if verdict is Verdict.ABORT:
        trip = breaker.trip(FINISH_TOOL_NAME)
        run.diag(trip.abort_event, **trip.details)
        reprieve = await ask_reprieve(run, breaker)
        if reprieve is None:
            run.trajectory.nudge(text, NudgeKind.INVALID_ANSWER, step=reply.step(first=True))
            return EndRun(trip.abort, trip.exit_reason)
        text = f"{text}\n\n{reprieve}"
    else:
        run.diag("parse_error_nudge", tool=FINISH_TOOL_NAME, consecutive_parse_errors=breaker.count)
    run.trajectory.nudge(text, NudgeKind.INVALID_ANSWER, step=reply.step(first=True))
    return NUDGED
