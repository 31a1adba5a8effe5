"""Finishing: the finish guard, the mutation gate and the checklist sub-gates, then acceptance.

Explicit ``finish`` calls and text replies accepted after the nudges both come here, so the
same gates apply to both. Each gate rejects at most once per run (soft gates), except the
mutation gate, whose second rejection ends the run unfinished.
"""

from __future__ import annotations

from typing import Any

from sp4rk._internal.aio import call_host
from sp4rk.agent._loop import checklist, nudges, state
from sp4rk.agent._loop.state import Flow, Run
from sp4rk.agent._loop.steps import is_successful_mutation
from sp4rk.agent._loop.verification import attach_note, verification_note
from sp4rk.agent.types import ExecutorResult, ExitReason, Step
from sp4rk.llm.types import ToolCall


async def attempt_finish(
    run: Run,
    answer: str,
    *,
    call: ToolCall | None,
    call_idx: int,
    head: dict[str, Any],
    tokens: int,
    group: int,
) -> Flow | ExecutorResult:
    """Run the gates on a finish attempt; accept it or record why not.

    ``call`` is ``None`` for a text reply accepted as an implicit finish; ``head`` holds the
    response's thought and reasoning when this is its first call.
    """
    implicit = call is None
    guard = run.s.finish_guard
    if guard is not None and not run.guard_rejected:
        reason = await _ask_guard(run)
        if reason:
            run.guard_rejected = True
            _reject(run, reason, call, head, tokens, group)
            run.diag("finish_guard_rejected", reason=reason)
            return Flow.COMPLETED

    run.emit("finishing", run.step, answer)

    if run.s.mutation_required and not (
        run.mutated or any(map(is_successful_mutation, run.pending))
    ):
        if not run.mutation_nudged:
            run.mutation_nudged = True
            _reject(run, nudges.MUTATION_REQUIRED, call, head, tokens, group)
            run.diag("mutation_gate_nudge", reason="finish_without_mutation")
            return Flow.COMPLETED
        run.diag("mutation_gate_rejected", reason="finish_without_mutation_after_nudge")
        return await _accept(
            run, answer, call, call_idx, head, tokens, group, ExitReason.MUTATION_REQUIRED
        )

    gate = checklist.finish_nudge(run)
    if gate is not None:
        text, event, details = gate
        _reject(run, text, call, head, tokens, group)
        run.diag(event, **details)
        return Flow.COMPLETED

    exit_reason = ExitReason.IMPLICIT_FINISH if implicit else ExitReason.FINISHED
    return await _accept(run, answer, call, call_idx, head, tokens, group, exit_reason)


async def _ask_guard(run: Run) -> str:
    """The guard's reason to reject (``""`` accepts); a failure or a hang is a reason too."""
    assert run.s.finish_guard is not None
    try:
        reason = await call_host(run.s.finish_guard, run.ctx, state.HOST_CALLBACK_TIMEOUT)
    except TimeoutError:
        run.log.warning(
            "finish guard did not answer in %ss; rejecting", state.HOST_CALLBACK_TIMEOUT
        )
        return f"the finish guard did not answer within {state.HOST_CALLBACK_TIMEOUT:g} seconds"
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


def _reject(
    run: Run, reason: str, call: ToolCall | None, head: dict[str, Any], tokens: int, group: int
) -> None:
    text = nudges.FINISH_REJECTED.format(reason=reason)
    if call is None:
        run.record(Step(**head, user_nudge=text, tokens_used=tokens, response_group=group))
        return
    run.record(
        Step(
            **head,
            action=call,
            observation=text,
            tokens_used=tokens,
            response_group=group,
        )
    )


async def _accept(
    run: Run,
    answer: str,
    call: ToolCall | None,
    call_idx: int,
    head: dict[str, Any],
    tokens: int,
    group: int,
    exit_reason: ExitReason,
) -> ExecutorResult:
    note = await verification_note(run)
    if note:
        attach_note(run, note)
        answer = f"{answer}\n\n{note}"
    run.commit()
    # The finish step joins the trajectory but not the prompt history: the run is over.
    run.all_steps.append(Step(**head, action=call, tokens_used=tokens, response_group=group))
    if call is not None:
        run.emit("tool_result", run.step, call_idx, len(answer), answer, False)
    return run.result(answer, exit_reason, finished=exit_reason is not ExitReason.MUTATION_REQUIRED)
