"""Verify-on-edit inside the loop: mark edits, run the check once per response, attach the note."""

from __future__ import annotations

import asyncio
import dataclasses

from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent.verify import EditVerifyResult, format_verify_note

#: Longest a verify runner may take before the edit is reported as not verified, in seconds.
RUNNER_TIMEOUT = 900.0


def note_call(run: RunScope, tool: str, *, is_error: bool) -> None:
    """A successful write or edit schedules a verification at the end of the response."""
    if run.settings.verify_runner is None or is_error:
        return
    if run.tools.traits(tool).verify_after:
        run.state.owe_verification()


async def verification_note(run: RunScope) -> str:
    """Run the pending verification (if any) and return its note, else ``""``."""
    runner = run.settings.verify_runner
    if runner is None or not run.state.settle_verification():
        return ""
    try:
        result = await asyncio.wait_for(runner(run.tool_ctx), RUNNER_TIMEOUT)
    except TimeoutError:
        result = EditVerifyResult(timed_out=True, timeout=RUNNER_TIMEOUT)
    except Exception as exc:
        run.log.warning("verify-on-edit runner raised", exc_info=True)
        result = EditVerifyResult(error=exc)
    if not isinstance(result, EditVerifyResult):
        result = EditVerifyResult(
            error=TypeError(f"the verify runner returned {type(result).__name__}")
        )
    note = format_verify_note(result, run.settings.verify_max_chars)
    run.diag("verify_on_edit", exit_code=result.exit_code, timed_out=result.timed_out, note=note)
    return note


async def flush_verification(run: RunScope) -> None:
    """Run a verification the response left pending; attach it to its last tool observation."""
    note = await verification_note(run)
    if note:
        attach_note(run, note)


def attach_note(run: RunScope, note: str) -> None:
    """Append ``note`` to the observation of the response's last successful edit.

    Used when the call that would have carried it never ran (a breaker or a finish ended
    the response early); the ``verify_on_edit`` diagnostic carries the note for events.
    """
    pending = run.trajectory.pending
    for i in range(len(pending) - 1, -1, -1):
        step = pending[i]
        if run.tools.traits(step.tool_name).verify_after and not step.is_error:
            addition = f"\n\n{note}" if step.observation else note
            run.trajectory.amend(
                i,
                dataclasses.replace(
                    step,
                    observation=step.observation + addition,
                    notes_length=step.notes_length + len(addition),
                ),
            )
            return
