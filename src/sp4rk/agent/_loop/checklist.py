"""The checklist gate inside a step: batching feedback on updates, and staleness nudges."""

from __future__ import annotations

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent.types import NudgeKind, Step


def gate_active(run: RunScope) -> bool:
    """Whether the checklist gate applies to this run."""
    return run.settings.checklist_gate and run.checklist_offered


def batching_suffix(run: RunScope, update: Step) -> str:
    """Feedback on a successful update: one newly checked item is praised, several corrected.

    Must be asked before ``update`` is recorded (it compares with the previous checklist).
    """
    if not gate_active(run):
        return ""
    newly = run.state.gates.checklist.newly_checked(update)
    if newly == 1:
        return "\n\n" + nudges.CHECKLIST_ONE_CHECKED
    if newly >= 2:
        run.diag("checklist_batched_update", newly_checked=newly)
        return "\n\n" + nudges.checklist_batched(newly)
    return ""


def staleness_nudge(run: RunScope) -> None:
    """After a normal step: nudge when the checklist went stale (at most twice a run)."""
    if not gate_active(run):
        return
    gate = run.state.gates.checklist
    calls = gate.stale_calls()
    if calls:
        run.trajectory.nudge(nudges.checklist_stale(calls), NudgeKind.CHECKLIST_STALE)
        run.diag("checklist_stale_nudge", calls_since_update=calls, nudge_count=gate.stale_nudges)
