"""Resuming a schema-1 checkpoint: steps only, written before the run state was saved.

Such a checkpoint holds no state, so this is the one place that reads the executor's old
nudge wording back. It replays the trajectory in order: breaker counts from the recorded
calls, one-shot nudges and gate rejections from the steps the executor made out of model
responses, the taint from untrusted external results. A nudge-only step (which a user's live
message also is) counts only in the place the executor puts its own: the wrap-up and
checklist nudges right after a response, the step-limit grant first at a boundary where the
budget was used up. A message elsewhere is read as a message, whatever its wording, so it
cannot grant anything. A pre-compaction warning quoted by a tool's output only suppresses
that warning. Save the checkpoint again (schema 2) to keep the full state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from sp4rk.agent._loop import nudges
from sp4rk.agent.breakers import CallResult, call_key
from sp4rk.agent.config import CircuitBreakerConfig
from sp4rk.agent.state import WRAP_UP_MARGIN, RunState
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
_GRANTED = re.compile(r"^The user granted (exactly one|\d+) more step")
_LIFTED = "The user lifted the step limit"
_REJECTED = nudges.FINISH_REJECTED.format(reason="")
_TOOL_REJECTED = "[Tool call rejected"
_CUT = nudges.TRUNCATED_CALL_OBSERVATION.split("{tool}")[0]


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
    max_steps: int,
) -> RunState:
    """The state a schema-1 checkpoint implies, as far as it can be known safely.

    Nudge-only steps are told apart by where they stand, never by wording alone: after a
    model response come the executor's post-step nudges (wrap-up, checklist staleness),
    then at the next boundary the step-limit grant (only where the budget was used up), then
    live messages. A grant is read only in its own position, so a message cannot forge it.
    """
    state = RunState(
        iteration=iterations_in(steps),
        response_groups=max([response_groups, *(s.response_group for s in steps)]),
    )
    replay = _Replay(state, traits, breaker_config, max_steps)
    for step in steps:
        replay.step(step)
    return state


class _Replay:
    """Walks a schema-1 trajectory in order, keeping count of the model responses."""

    def __init__(
        self,
        state: RunState,
        traits: Callable[[str], ToolTraits],
        cfg: CircuitBreakerConfig,
        max_steps: int,
    ) -> None:
        self.state, self.traits, self.cfg, self.max_steps = state, traits, cfg, max_steps
        self.responses = 0
        self.group = -1
        self.phase = "start"  # then "post" after a response, "boundary", "messages"
        self.truncated_group = -1

    def step(self, step: Step) -> None:
        if _from_model(step):
            self._response_step(step)
        else:
            self._nudge_only(step.user_nudge)

    def _response_step(self, step: Step) -> None:
        state = self.state
        if step.response_group == 0 or step.response_group != self.group:
            self.responses += 1
            self.group = step.response_group
        self.phase = "post"
        _restore_nudges(state, step)
        if step.action is None:
            return
        name = step.tool_name
        state.gates.observe(step, self.traits(name))
        if step.is_untrusted and self.traits(name).external:
            state.taint.observe(name, self.responses)  # restricts only: safe to restore
        if step.observation.startswith(_CUT):
            if step.response_group != self.truncated_group:
                state.breakers.truncation.on_truncated(self.cfg)
                self.truncated_group = step.response_group
        else:
            state.breakers.truncation.on_complete_response()
            _replay_breakers(state, step, self.traits, self.cfg)
        _restore_reprieve(state, step.user_nudge)

    def _nudge_only(self, nudge: str) -> None:
        state, budget = self.state, self.state.step_budget
        limit = budget.limit(self.max_steps)
        if self.phase == "post":
            if _WRAP_UP.match(nudge) and self.responses >= limit - WRAP_UP_MARGIN:
                state.nudges.wrap_up_given = True
                return
            if _STALE.match(nudge):
                state.gates.checklist.stale_nudges += 1
                return
            self.phase = "boundary"
        if self.phase in ("start", "boundary"):
            self.phase = "messages"
            if not budget.unlimited and self.responses >= limit and _grant(state, nudge):
                return
        # a live message: nothing is read from it


def _grant(state: RunState, nudge: str) -> bool:
    """Apply the step-limit grant this nudge (in the grant's position) records."""
    budget = state.step_budget
    if nudge.startswith(_LIFTED):
        budget.unlimited = True
        return True
    match = _GRANTED.match(nudge)
    if match is None:
        return False
    budget.granted += 1 if match.group(1) == "exactly one" else int(match.group(1))
    return True


def _from_model(step: Step) -> bool:
    """Whether the executor made this step from a model response (a user's message cannot)."""
    return step.action is not None or step.response_group > 0 or bool(step.thought.strip())


def _restore_nudges(state: RunState, step: Step) -> None:
    """One-shot nudges of a model response, and finish rejections the executor recorded."""
    nudge = step.user_nudge
    if nudge in (nudges.FINISH_EXPLICITLY, nudges.PRINTED_TOOL_CALL):
        state.nudges.text_replies += 1
    if step.action is not None and nudges.PRE_WARNING_MARKER in step.observation:
        state.nudges.pre_warning_given = True  # a tool quoting it only suppresses a warning
    text = step.observation if step.tool_name == FINISH_TOOL_NAME else nudge
    if step.tool_name in ("", FINISH_TOOL_NAME) and text.startswith(_REJECTED):
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
    if observation.startswith(nudges.NOT_EXECUTED_PREFIX):
        breakers.no_progress.count_unrun_repeat()  # a repeat answered instead of run
        return
    if observation.startswith(_TOOL_REJECTED):
        return  # rejected before it ran
    body = step.observation_parts()[0]
    content = "" if body == "(no output)" else body
    seen = CallResult(
        tool=name,
        key=key,
        content=content,
        is_error=step.is_error,
        parse_error=step.is_error and content.startswith(PARSE_ERROR_PREFIX),
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
