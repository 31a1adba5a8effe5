"""Resuming a schema-1 checkpoint: steps only, written before the run state was saved.

Such a checkpoint holds no state, so this is the one place that reads the executor's old
nudge wording back. It rebuilds what only *restricts* the run (one-shot nudges already given,
breaker counts replayed from the recorded calls, gate rejections the executor recorded) and
never anything that *grants*: step-budget extensions and lifted limits are not restored, and
nothing is read from a step a user's message could have produced (a nudge-only step with no
model reply), so a message that copies a nudge's wording changes nothing. Save the
checkpoint again (schema 2) to keep the full state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from sp4rk.agent._loop import nudges
from sp4rk.agent.breakers import CallResult, call_key
from sp4rk.agent.config import CircuitBreakerConfig
from sp4rk.agent.state import RunState
from sp4rk.agent.types import Step
from sp4rk.tools.base import PARSE_ERROR_PREFIX, ToolTraits
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME
from sp4rk.tools.result_cache import compute_tool_result_hash

# The wording of the nudges of schema-1 checkpoints (sp4rk 0.1).
_WRAP_UP = re.compile(r"^Only \d+ step\(s\) are left in the budget")
_STALE = re.compile(r"^\d+ tool calls since your last checklist update")
_UNCHECKED = re.compile(r"^\d+ checklist item\(s\) are still unchecked")
_REPRIEVE = re.compile(
    r"^The (?:user switched off the )?(repeat|truncation|parse error|fruitless|same tool) "
    r"safeguard(?P<off> for this run)?"
)
_REJECTED = nudges.FINISH_REJECTED.format(reason="")
_TOOL_REJECTED = "[Tool call rejected"
_CUT = nudges.TRUNCATED_CALL_OBSERVATION.split("{tool}")[0]
_PRE_WARNING = "tool outputs will soon be pruned or dropped from your context"


def iterations_in(steps: Sequence[Step]) -> int:
    """Model responses recorded in ``steps``: one per response group.

    Steps without a group count one each when the model made them (an action or text);
    boundary nudges count none.
    """
    groups = {s.response_group for s in steps if s.response_group > 0}
    ungrouped = sum(
        1 for s in steps if s.response_group == 0 and (s.action is not None or s.thought.strip())
    )
    return len(groups) + ungrouped


def state_from_steps(
    steps: Sequence[Step],
    traits: Callable[[str], ToolTraits],
    breaker_config: CircuitBreakerConfig,
    response_groups: int,
) -> RunState:
    """The state a schema-1 checkpoint implies, as far as it can be known safely."""
    state = RunState(
        iteration=iterations_in(steps),
        response_groups=max([response_groups, *(s.response_group for s in steps)]),
    )
    truncated_group = -1
    for step in steps:
        _restore_nudges(state, step)
        if step.action is None:
            continue
        state.gates.observe(step, traits(step.tool_name))
        if step.observation.startswith(_CUT):
            if step.response_group != truncated_group:
                state.breakers.truncation.count += 1
                truncated_group = step.response_group
        else:
            state.breakers.truncation.on_complete_response()
            _replay_breakers(state, step, traits, breaker_config)
        _restore_reprieve(state, step.user_nudge)
    return state


def _from_model(step: Step) -> bool:
    """Whether the executor made this step from a model response (a user's message cannot)."""
    return step.action is not None or step.response_group > 0 or bool(step.thought.strip())


def _restore_nudges(state: RunState, step: Step) -> None:
    """One-shot nudges already given, and finish rejections the executor recorded."""
    nudge = step.user_nudge
    if nudge in (nudges.FINISH_EXPLICITLY, nudges.PRINTED_TOOL_CALL) and _from_model(step):
        state.nudges.text_replies += 1
    elif _WRAP_UP.match(nudge):
        state.nudges.wrap_up_given = True  # suppresses a nudge, grants nothing
    elif _STALE.match(nudge):
        state.gates.checklist.stale_nudges += 1  # likewise
    if step.action is not None and _PRE_WARNING in step.observation:
        state.nudges.pre_warning_given = True
    if step.tool_name == FINISH_TOOL_NAME:
        text = step.observation
    elif step.action is None and _from_model(step):
        text = nudge
    else:
        return
    if text.startswith(_REJECTED):
        _restore_rejection(state, text[len(_REJECTED) :])


def _restore_rejection(state: RunState, reason: str) -> None:
    gates = state.gates
    if reason == nudges.MUTATION_REQUIRED:
        gates.mutation.nudged = True
    elif reason == nudges.CHECKLIST_MISSING:
        gates.checklist.missing_nudged = True
    elif _UNCHECKED.match(reason):
        gates.checklist.unchecked_nudged = True
    else:
        gates.finish_guard.reject()


def _replay_breakers(
    state: RunState, step: Step, traits: Callable[[str], ToolTraits], cfg: CircuitBreakerConfig
) -> None:
    """Feed one recorded call through the breakers, as the live loop did."""
    assert step.action is not None
    breakers = state.breakers
    name, observation = step.action.name, step.observation
    if name == FINISH_TOOL_NAME:
        if observation.startswith(PARSE_ERROR_PREFIX):
            seen = CallResult(
                tool=name, key="", content=observation, is_error=True, parse_error=True
            )
            breakers.parse_error.observe(seen, cfg)
        return
    key = call_key(name, step.action.input)
    breakers.repeat.before_call(key, traits(name), cfg)
    if observation.startswith((nudges.NOT_EXECUTED_PREFIX, _TOOL_REJECTED)):
        return  # intercepted or rejected before it ran
    content = "" if observation == "(no output)" else observation
    seen = CallResult(
        tool=name,
        key=key,
        content=content,
        is_error=step.is_error,
        parse_error=step.is_error and PARSE_ERROR_PREFIX in content,
        traits=traits(name),
        digest=compute_tool_result_hash(name, content),  # of what was recorded: near enough
    )
    breakers.observe_result(seen, cfg)


def _restore_reprieve(state: RunState, nudge: str) -> None:
    """A recorded reprieve reset its breaker (and switched its abort off on ALLOW_ALWAYS)."""
    match = _REPRIEVE.match(nudge)
    if match is not None:
        breaker = state.breakers.named(match.group(1).replace(" ", "_"))
        breaker.reprieve(always=bool(match.group("off")))
