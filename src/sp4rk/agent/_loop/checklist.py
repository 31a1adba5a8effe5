"""The checklist gate: finish sub-gates, staleness nudges and batching feedback."""

from __future__ import annotations

import json

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.state import Run
from sp4rk.agent._loop.steps import is_productive, is_successful_update
from sp4rk.agent.types import Step
from sp4rk.tools.builtins.checklist import ChecklistItem, parse_checklist

#: A task with more productive calls than this is not trivial: it needs a checklist.
TRIVIAL_THRESHOLD = 2
#: Productive calls since the last update that make the checklist stale.
STALENESS_THRESHOLD = 3
#: Most staleness nudges per run.
STALE_NUDGE_CAP = 2


def items_of(step: Step) -> list[ChecklistItem]:
    """The checklist items in an ``update_checklist`` call's ``todo_list`` argument."""
    if step.action is None:
        return []
    try:
        data = json.loads(step.action.input)
    except json.JSONDecodeError:
        return []
    todo = data.get("todo_list") if isinstance(data, dict) else None
    return parse_checklist(todo)[0] if isinstance(todo, str) else []


def gate_active(run: Run) -> bool:
    """Whether the checklist gate applies to this run."""
    return run.s.checklist_gate and run.checklist_available


def _latest_update(run: Run) -> Step | None:
    for step in reversed(run.pending):
        if is_successful_update(step):
            return step
    return run.all_steps[run.last_update_at] if run.last_update_at >= 0 else None


def finish_nudge(run: Run) -> tuple[str, str, dict[str, object]] | None:
    """A checklist nudge for a finish attempt, as ``(text, diagnostic, details)``, or ``None``."""
    if not gate_active(run):
        return None
    latest = _latest_update(run)
    if latest is None and not run.checklist_missing_nudged:
        productive = run.productive_calls + sum(map(is_productive, run.pending))
        if productive > TRIVIAL_THRESHOLD:
            run.checklist_missing_nudged = True
            return (
                nudges.CHECKLIST_MISSING,
                "checklist_gate_nudge",
                {"reason": "finish_without_checklist"},
            )
    if latest is not None and not run.checklist_unchecked_nudged:
        unchecked = sum(not i.done for i in items_of(latest))
        if unchecked > 0:
            run.checklist_unchecked_nudged = True
            return (
                nudges.checklist_unchecked(unchecked),
                "checklist_unchecked_nudge",
                {"reason": "finish_with_unchecked_checklist", "unchecked": unchecked},
            )
    return None


def batching_suffix(run: Run, step: Step) -> str:
    """Feedback on a successful update: one newly checked item is praised, several corrected."""
    if not gate_active(run) or not is_successful_update(step):
        return ""
    previous = _latest_update(run)
    if previous is None:
        return ""  # the first update initialises the checklist
    before = {i.text: i.done for i in items_of(previous)}
    newly = sum(1 for i in items_of(step) if i.done and before.get(i.text) is False)
    if newly == 1:
        return "\n\n" + nudges.CHECKLIST_ONE_CHECKED
    if newly >= 2:
        run.diag("checklist_batched_update", newly_checked=newly)
        return "\n\n" + nudges.checklist_batched(newly)
    return ""


def staleness_nudge(run: Run) -> None:
    """After a normal step: nudge when the checklist went stale (at most twice a run)."""
    if not gate_active(run) or run.stale_nudges >= STALE_NUDGE_CAP or run.last_update_at < 0:
        return
    since = run.productive_since_update
    if since >= STALENESS_THRESHOLD:
        run.stale_nudges += 1
        run.record_nudge(nudges.checklist_stale(since))
        run.diag("checklist_stale_nudge", calls_since_update=since, nudge_count=run.stale_nudges)
