"""Resuming: rebuild a run's state from the checkpoint it resumes.

The trajectory is the only state a checkpoint holds, so everything a resumed run must know is
read back from it: how many iterations were used, the budget the human granted, which one-shot
nudges already fired, and the circuit breakers' counts (the recorded calls are replayed
through the same bookkeeping the live loop uses, so pausing never resets a breaker).
"""

from __future__ import annotations

from collections.abc import Sequence

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.breakers import (
    call_key,
    check_fruitless,
    check_parse_error,
    check_repeat,
    check_same_tool,
    note_result,
    reset_breaker,
)
from sp4rk.agent._loop.state import Run
from sp4rk.agent.types import Step
from sp4rk.tools.base import PARSE_ERROR_PREFIX
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME

_REJECTED = nudges.FINISH_REJECTED.format(reason="")
_TOOL_REJECTED = "[Tool call rejected"
_CUT = nudges.TRUNCATED_CALL_OBSERVATION.split("{tool}")[0]


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
    """Set everything a resumed run continues with from the steps it resumes."""
    if not steps:
        return
    run.step = iterations_in(steps) + 1
    run.group_counter = max([run.group_counter, *(s.response_group for s in steps)])
    truncated_group = -1
    for step in steps:
        _restore_nudges(run, step)
        if step.action is None:
            continue
        if step.observation.startswith(_CUT):
            if step.response_group != truncated_group:
                run.counters.truncations += 1
                truncated_group = step.response_group
        else:
            run.counters.truncations = 0
            _replay_breakers(run, step)
        _restore_reprieve(run, step.user_nudge)


def _restore_nudges(run: Run, step: Step) -> None:
    """One-shot nudges, budget grants and gate rejections this step records."""
    nudge = step.user_nudge
    if nudge in (nudges.FINISH_EXPLICITLY, nudges.PRINTED_TOOL_CALL):
        run.text_nudges += 1
    elif nudges.WRAP_UP_PATTERN.match(nudge):
        run.wrap_up_done = True
    elif nudges.STALE_PATTERN.match(nudge):
        run.stale_nudges += 1
    elif nudge.startswith(nudges.LIFTED_PREFIX):
        run.unlimited = True
    elif granted := nudges.GRANTED_PATTERN.match(nudge):
        count = granted.group(1)
        run.eff_max += 1 if count == "exactly one" else int(count)
    if nudges.PRE_WARNING_MARKER in step.observation:
        run.pre_warning_done = True
    if step.action is None or step.tool_name == FINISH_TOOL_NAME:
        text = step.observation if step.tool_name == FINISH_TOOL_NAME else nudge
        if text.startswith(_REJECTED):
            _restore_rejection(run, text[len(_REJECTED) :])


def _restore_rejection(run: Run, reason: str) -> None:
    if reason == nudges.MUTATION_REQUIRED:
        run.mutation_nudged = True
    elif reason == nudges.CHECKLIST_MISSING:
        run.checklist_missing_nudged = True
    elif nudges.UNCHECKED_PATTERN.match(reason):
        run.checklist_unchecked_nudged = True
    else:
        run.guard_rejected = True


def _replay_breakers(run: Run, step: Step) -> None:
    """Feed one recorded call through the breakers, as the live loop did."""
    assert step.action is not None
    name, observation = step.action.name, step.observation
    if name == FINISH_TOOL_NAME:
        if observation.startswith(PARSE_ERROR_PREFIX):
            check_parse_error(run, name, True, True)
        return
    key = call_key(name, step.action.input)
    check_repeat(run, key)
    if observation.startswith((nudges.NOT_EXECUTED_PREFIX, _TOOL_REJECTED)):
        return  # intercepted or rejected before it ran
    note_result(run.counters, key, step.is_error)
    content = "" if observation == "(no output)" else observation
    check_fruitless(run, name, content, step.is_error)
    check_same_tool(run, name, key, content, step.is_error)
    check_parse_error(run, name, step.is_error and PARSE_ERROR_PREFIX in content, step.is_error)


def _restore_reprieve(run: Run, nudge: str) -> None:
    """A recorded reprieve reset its breaker (and switched its abort off on ALLOW_ALWAYS)."""
    match = nudges.REPRIEVE_PATTERN.match(nudge)
    if match is None:
        return
    name = match.group(1).replace(" ", "_")
    reset_breaker(run.counters, name)
    if match.group("off"):
        run.counters.disabled.add(name)
