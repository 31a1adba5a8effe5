"""Closing what a crash left open, from durable facts only.

A run that died mid-response left a response row and its ledger entries: calls that
completed (their steps are recorded), calls that started and never reported back (their
effect is unknown), and calls that never started. :func:`close_response` turns them into the
steps that answer every call exactly once — the recorded step, an "outcome unknown" step, or a
"not run" step (:func:`sp4rk.agent.interrupted_steps`) — so the history stays valid and no
call with possible effects is ever run again silently.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

from sp4rk.agent import RunState, Step, interrupted_steps
from sp4rk.llm import ChatResponse
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME


def close_response(
    response: ChatResponse,
    group: int,
    recorded: Mapping[int, Step],
    started: Sequence[int],
) -> list[Step]:
    """The steps that close ``response``, in the model's call order.

    Args:
        response: the response whose calls were running.
        group: its response group.
        recorded: recorded steps by call position.
        started: positions of the calls that had started.

    Calls are matched by position, not by id: models may repeat or omit ids within one
    response, and each call still gets its own answer (repeated ids get a ``#position``
    suffix in the closing steps; the history renderer makes ids unique anyway).
    """
    response = copy.deepcopy(response)
    calls = response.message.tool_calls
    ids = [c.id for c in calls]
    if len(set(ids)) != len(ids) or not all(ids):
        for position, call in enumerate(calls):
            call.id = f"{call.id or 'call'}#{position}"
    steps: list[Step] = []
    for position, step in recorded.items():
        if 0 <= position < len(calls) and step.action is not None:
            step = copy.deepcopy(step)
            step.action = calls[position]
            steps.append(step)
    started_ids = [calls[p].id for p in started if 0 <= p < len(calls)]
    return interrupted_steps(response, group, steps, started_ids)


def ended_by_accepted_finish(steps: Sequence[Step]) -> bool:
    """Whether the trajectory ends with an accepted finish (the run is over).

    An accepted ``finish`` is the only step recorded with an empty observation, and an
    accepted text answer the only nudge-free step without a call; rejected finishes carry
    the rejection. A process that died right after committing its last step but before
    marking the run finished is recognised by this.
    """
    if not steps:
        return False
    last = steps[-1]
    if last.action is None:
        return not last.user_nudge and last.nudge_kind is None and bool(last.thought)
    return last.action.name == FINISH_TOOL_NAME and not last.observation and not last.is_error


def responses_with_finish(state: RunState | None) -> int | None:
    """The model responses of a run that ended with an accepted finish, from its saved state.

    The state saved at the last boundary counts the responses before the finishing one.
    """
    return None if state is None else state.iteration + 1
