"""Finishing: the finish guard, the mutation gate and the checklist sub-gates, then acceptance.

Explicit ``finish`` calls and text replies accepted after the nudges both come here, so the
same gates apply to both.
"""

from __future__ import annotations

from sp4rk._internal.aio import call_host
from sp4rk.agent._loop import nudges, settings
from sp4rk.agent._loop.outcomes import COMPLETED, EndRun, NextStep
from sp4rk.agent._loop.reply import Reply
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent._loop.verification import attach_note, verification_note
from sp4rk.agent.gates import Rejection
from sp4rk.agent.types import ExitReason, NudgeKind
from sp4rk.llm.types import ToolCall


async def attempt_finish(
    run: RunScope, answer: str, reply: Reply, *, call: ToolCall | None, call_idx: int
) -> NextStep | EndRun:
    """Run the gates on a finish attempt; accept it or record why not.

    ``call`` is ``None`` for a text reply accepted as an implicit finish.
    """
    gates = run.state.gates
    if run.settings.finish_guard is not None and gates.finish_guard.should_ask():
        reason = await _ask_guard(run)
        if reason:
            gates.finish_guard.reject()
            _reject(run, reason, reply, call, call_idx)
            run.diag("finish_guard_rejected", reason=reason)
            return COMPLETED

    run.events.finishing(run.step, answer)

    if run.settings.mutation_required and gates.mutation.unmet():
        rejection = gates.mutation.check()
        if rejection is None:
            run.diag("mutation_gate_rejected", reason="finish_without_mutation_after_nudge")
            return await _accept(run, answer, reply, call, call_idx, ExitReason.MUTATION_REQUIRED)
        return _refuse(run, rejection, reply, call, call_idx)

    if run.settings.checklist_gate and run.checklist_offered:
        rejection = gates.checklist.check()
        if rejection is not None:
            return _refuse(run, rejection, reply, call, call_idx)

    exit_reason = ExitReason.IMPLICIT_FINISH if call is None else ExitReason.FINISHED
    return await _accept(run, answer, reply, call, call_idx, exit_reason)


async def _ask_guard(run: RunScope) -> str:
    """The guard's reason to reject (``""`` accepts); a failure or a hang is a reason too."""
    guard = run.settings.finish_guard
    assert guard is not None
    timeout = settings.HOST_CALLBACK_TIMEOUT
    try:
        reason = await call_host(guard, run.ctx, timeout)
    except TimeoutError:
        run.log.warning("finish guard did not answer in %ss; rejecting", timeout)
        return f"the finish guard did not answer within {timeout:g} seconds"
    except Exception as exc:
        run.log.warning("finish guard raised; treating it as a rejection", exc_info=True)
        return f"{type(exc).__name__}: {exc}"
    if reason is None:
        return ""
    if not isinstance(reason, str):
        raise TypeError(
            f"the finish guard must return a reason (str) or None, got {type(reason).__name__}"
        )
    return reason.strip()


def _refuse(
    run: RunScope, rejection: Rejection, reply: Reply, call: ToolCall | None, call_idx: int
) -> NextStep:
    _reject(run, rejection.reason, reply, call, call_idx)
    run.diag(rejection.event, **rejection.details)
    return COMPLETED


def _reject(run: RunScope, reason: str, reply: Reply, call: ToolCall | None, call_idx: int) -> None:
    """Record the refused finish: as the finish call's observation, or as a nudge."""
    text = nudges.FINISH_REJECTED.format(reason=reason)
    step = reply.step(first=call_idx == 0, action=call)
    if call is None:
        step.user_nudge, step.nudge_kind = text, NudgeKind.FINISH_REJECTED
    else:
        step.observation = text
    run.trajectory.record(step)


async def _accept(
    run: RunScope,
    answer: str,
    reply: Reply,
    call: ToolCall | None,
    call_idx: int,
    exit_reason: ExitReason,
) -> EndRun:
    note = await verification_note(run)
    if note:
        attach_note(run, note)
        answer = f"{answer}\n\n{note}"
    # The finish step joins the trajectory but not the prompt history: the run is over.
    run.trajectory.close(reply.step(first=call_idx == 0, action=call))
    if call is not None:
        run.events.tool_done(run.step, call_idx, call, answer)
    return EndRun(answer, exit_reason, step_complete=True)
