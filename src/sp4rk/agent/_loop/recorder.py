"""The trajectory as the loop writes it: committed steps, and the current response's steps.

A response's steps are committed together once the response is done (or the run stops), so
the context manager only ever sees whole responses. Every recorded step is shown to the
gates at once, so a finish in the same response sees the calls before it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sp4rk.agent._loop.toolbox import ToolBox
from sp4rk.agent.journal import RunJournal
from sp4rk.agent.protocols import ContextManager
from sp4rk.agent.state import RunState
from sp4rk.agent.types import NudgeKind, Step
from sp4rk.llm.tokens import TokenCounter


class Recorder:
    """Appends steps to the trajectory and the context manager, in order."""

    __slots__ = ("_cw", "_journal", "_journaled", "_state", "_tools", "pending", "steps")

    def __init__(
        self,
        cw: ContextManager,
        state: RunState,
        tools: ToolBox,
        resumed: Sequence[Step],
        journal: RunJournal | None,
    ) -> None:
        self._cw = cw
        self._state = state
        self._tools = tools
        self._journal = journal
        self.steps: list[Step] = list(resumed)
        self._journaled = len(self.steps)
        """The trajectory so far (committed steps)."""
        self.pending: list[Step] = []
        """Steps of the response being processed, not yet in the context."""

    def record(self, step: Step) -> None:
        """Add a step of the current response (committed when the response is done)."""
        self.pending.append(step)
        self._state.gates.observe(step, self._tools.traits(step.tool_name))
        if self._journal is not None and step.action is not None:
            self._journal.on_call_step(self._state.iteration + 1, step)

    def amend(self, index: int, step: Step) -> None:
        """Replace pending step ``index`` (a note added later); the journal hears it again."""
        self.pending[index] = step
        if self._journal is not None and step.action is not None:
            self._journal.on_call_step(self._state.iteration + 1, step)

    def unjournaled(self) -> list[Step]:
        """Committed steps the journal has not been given yet (and mark them given)."""
        new = self.steps[self._journaled :]
        self._journaled = len(self.steps)
        return new

    def commit(self) -> None:
        """Append the current response's steps to the trajectory and the context manager."""
        for step in self.pending:
            self.steps.append(step)
            self._cw.add_step(step)
        self.pending.clear()

    def nudge(self, text: str, kind: NudgeKind, *, step: Step | None = None) -> None:
        """Commit a nudge-only step at once (``step`` may carry the model's reply with it)."""
        self.commit()
        nudge = step if step is not None else Step()
        nudge.user_nudge, nudge.nudge_kind = text, kind
        self.steps.append(nudge)
        self._cw.add_step(nudge)

    def close(self, step: Step) -> None:
        """Append the run's last step (the accepted finish) to the trajectory only."""
        self.commit()
        self.steps.append(step)

    def pending_tokens(self, counter: TokenCounter) -> int:
        """Tokens the current response's observations will add (not yet in the context)."""
        return sum(counter.count(s.observation) for s in self.pending) if self.pending else 0
