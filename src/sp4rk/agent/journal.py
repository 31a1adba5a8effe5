"""``RunJournal``: the hooks a crash-safe store needs to lose nothing and repeat nothing.

Events are best-effort; a journal is not. Its methods are called synchronously at the points
where durability matters, and an exception from one propagates (a run must not go on with a
journal that stopped recording):

1. ``on_boundary(new_steps, state)`` at every step boundary before the next model call, and
   once when the run ends: the steps added since the last call and the state now. Commit them
   together and a crash never loses a completed step.
2. ``on_response(step, response)`` when a model response with tool calls arrives, before any of
   its calls runs.
3. ``on_call_start(step, call)`` right before a tool call runs, and
   ``on_call_step(step, recorded)`` once its step is recorded (its observation is final).

After a crash, a call that started but never got its step is the one whose effect is unknown:
the store must not run it again silently. ``interrupted_steps`` builds the steps that close
such a response honestly, so the history sent to the model stays valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from sp4rk.agent._loop import nudges
from sp4rk.agent._loop.reply import Reply
from sp4rk.agent.state import RunState
from sp4rk.agent.types import Step
from sp4rk.llm.types import ChatResponse, ToolCall


@runtime_checkable
class RunJournal(Protocol):
    """Receives a run's durable facts as they happen (``Executor.set_journal``)."""

    def on_boundary(self, new_steps: Sequence[Step], state: RunState) -> None:
        """Steps completed since the last boundary, and the run's state now."""
        ...

    def on_response(self, step: int, response: ChatResponse) -> None:
        """A response whose tool calls are about to run."""
        ...

    def on_call_start(self, step: int, call: ToolCall) -> None:
        """A tool call is about to run (it may have effects from here on)."""
        ...

    def on_call_step(self, step: int, recorded: Step) -> None:
        """A call's step is recorded: it ran (or was refused) and its observation is final."""
        ...


def interrupted_steps(
    response: ChatResponse,
    group: int,
    recorded: Sequence[Step],
    started: Sequence[str],
) -> list[Step]:
    """The steps that close a response a crash cut short, in the model's call order.

    Args:
        response: the response whose calls were running.
        group: its response group.
        recorded: the steps recorded for its calls before the crash.
        started: ids of the calls that had started.

    Every call gets exactly one step: its recorded one, an "outcome unknown" one when it had
    started (it may have had effects: the model is told to check before repeating it), or a
    "not run" one when it never started.
    """
    done = {s.action.id: s for s in recorded if s.action is not None}
    reply = Reply.of(response, group)
    steps: list[Step] = []
    for index, call in enumerate(response.message.tool_calls):
        if call.id in done:
            steps.append(done[call.id])
            continue
        observation = (
            nudges.interrupted_call(call.name)
            if call.id in started
            else nudges.not_run_after_interruption(call.name)
        )
        steps.append(
            reply.step(first=index == 0, action=call, observation=observation, is_error=True)
        )
    return steps
