"""What each phase of the loop returns: the run goes on, or it ends (one type per level)."""

from __future__ import annotations

from dataclasses import dataclass

from sp4rk.agent.exit_reason import ExitReason


@dataclass(frozen=True, slots=True)
class NextStep:
    """The step is over and the run goes on with the next model call."""

    step_complete: bool
    """``step_complete`` fires for this step."""
    post_checks: bool
    """The wrap-up and checklist nudges and the compaction check follow."""


COMPLETED = NextStep(step_complete=True, post_checks=True)
"""A normal step."""
INTERCEPTED = NextStep(step_complete=True, post_checks=False)
"""A breaker, a gate or the human cut the step short."""
NUDGED = NextStep(step_complete=False, post_checks=False)
"""A text reply was answered with a nudge."""


@dataclass(frozen=True, slots=True)
class EndRun:
    """The run ends here with this output and reason."""

    output: str
    exit_reason: ExitReason
    step_complete: bool = False
    """``step_complete`` fires before the run returns (an accepted finish)."""


StepOutcome = NextStep | EndRun


@dataclass(frozen=True, slots=True)
class NextCall:
    """One tool call is dealt with; the response's next call may follow."""

    intercepted: bool
    """The call was rejected or a breaker acted on it: no post-step checks this step."""
    skip_rest: bool
    """Drop the response's remaining calls."""


RAN = NextCall(intercepted=False, skip_rest=False)
"""The call ran (or was answered with a note); go on."""
REJECTED = NextCall(intercepted=True, skip_rest=False)
"""The human rejected the call; the response's other calls still get their turn."""
BROKE_OFF = NextCall(intercepted=True, skip_rest=True)
"""A breaker acted: the response's remaining calls are dropped."""
FINISH_REFUSED = NextCall(intercepted=False, skip_rest=True)
"""A gate refused the finish: the rest of the response is dropped, the step is normal."""

CallOutcome = NextCall | EndRun
