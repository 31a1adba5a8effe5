"""Resuming: rebuild a run's counters from the checkpoint it resumes.

The trajectory is the only state a checkpoint holds, so everything a resumed run must know
(how many iterations were used, which one-shot nudges already fired) is read back from it.
Breaker counters start fresh: a resumed run gets a clean slate there.
"""

from __future__ import annotations

from collections.abc import Sequence

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.state import Run
from sp4rk.agent.types import Step
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME

_REJECTED = nudges.FINISH_REJECTED.format(reason="")


def iterations_in(steps: Sequence[Step]) -> int:
    """LLM responses recorded in ``steps``: one per response group.

    Steps without a group (older checkpoints) count one each when the model made them (an
    action or text); boundary nudges count none.
    """
    groups = {s.response_group for s in steps if s.response_group > 0}
    legacy = sum(
        1 for s in steps if s.response_group == 0 and (s.action is not None or s.thought.strip())
    )
    return len(groups) + legacy


def restore_from_trajectory(run: Run, steps: Sequence[Step]) -> None:
    """Set the step number, group counter and one-shot flags a resumed run continues with."""
    run.step = iterations_in(steps) + 1
    run.group_counter = max([run.group_counter, *(s.response_group for s in steps)])
    for step in steps:
        nudge = step.user_nudge
        if nudge in (nudges.FINISH_EXPLICITLY, nudges.PRINTED_TOOL_CALL):
            run.text_nudges += 1
        elif nudges.WRAP_UP_PATTERN.match(nudge):
            run.wrap_up_done = True
        elif nudges.STALE_PATTERN.match(nudge):
            run.stale_nudges += 1
        rejection = step.observation if step.tool_name == FINISH_TOOL_NAME else nudge
        if step.action is None or step.tool_name == FINISH_TOOL_NAME:
            _restore_rejection(run, rejection)


def _restore_rejection(run: Run, text: str) -> None:
    if not text.startswith(_REJECTED):
        return
    reason = text[len(_REJECTED) :]
    if reason == nudges.MUTATION_REQUIRED:
        run.mutation_nudged = True
    elif reason == nudges.CHECKLIST_MISSING:
        run.checklist_missing_nudged = True
    elif nudges.UNCHECKED_PATTERN.match(reason):
        run.checklist_unchecked_nudged = True
    else:
        run.guard_rejected = True
