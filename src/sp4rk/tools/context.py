"""``RunContext``: the values a run hands to its tools (workspace, stores, budget, ...)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from sp4rk.tools.base import ToolPolicy
from sp4rk.tools.result_cache import ToolResultCache
from sp4rk.tools.stores import AttachmentStore, FactStore, FinalResultStore, StepOutputStore
from sp4rk.tools.truncation import ToolTruncationConfig


@runtime_checkable
class TextWriter(Protocol):
    """Anything with ``write(str)``: an open text file, ``io.StringIO``, ``sys.stderr``."""

    def write(self, s: str, /) -> int:
        """Write ``s``."""
        ...


@runtime_checkable
class TrajectoryView(Protocol):
    """A holder of the executor's current steps (``sp4rk.agent.TrajectoryStore``)."""

    def sync(self, steps: Sequence[Any]) -> None:
        """Replace the held steps with ``steps``."""
        ...

    def steps(self) -> list[Any]:
        """The held steps."""
        ...


@runtime_checkable
class BudgetView(Protocol):
    """The run's live budget account (``sp4rk.agent.BudgetAccount``), as tools see it.

    A tool that starts sub-agents passes its context on (``SubAgentTask(ctx=ctx)``): their
    executors then draw from this account, so they never spend more than the run has left.
    """

    def remaining(self) -> dict[str, float]:
        """What is left of each limit that is set, in its unit (tokens, USD, seconds, calls)."""
        ...


#: Called with ``(step_id, items)`` after each successful checklist update; each item is a
#: ``(text, done)`` pair.
TodoUpdateFn = Callable[[str, list[tuple[str, bool]]], None]


@dataclass(slots=True, kw_only=True)
class RunContext:
    """Values a run shares with its tools. Every field is optional.

    Derive a changed copy with :meth:`replace`; a context is never mutated in place.
    """

    workspace: Path | None = None
    """Directory file tools are confined to (a ``str`` is turned into a ``Path``)."""
    trajectory_store: TrajectoryView | None = None
    """Receives the executor's steps at every step boundary."""
    tool_result_cache: ToolResultCache | None = None
    """Full tool results, read back by ``tool_result_read``."""
    per_tool_truncation: Mapping[str, ToolTruncationConfig] | None = None
    """Stage 1 limits; ``tool_result_read`` caps pages at a tool's ``max_lines``."""
    step_id: str = ""
    """ID of the plan step being executed, for orchestrated runs."""
    step_todo_update: TodoUpdateFn | None = None
    """Callback receiving checklist updates."""
    dump_writer: TextWriter | None = None
    """Where request/response dumps go."""
    step_output_store: StepOutputStore | None = None
    """Outputs of earlier plan steps."""
    fact_store: FactStore | None = None
    """Facts saved with ``store_fact``."""
    attachment_store: AttachmentStore | None = None
    """Files the user attached (read-only)."""
    final_result_store: FinalResultStore | None = None
    """Where an orchestrated run leaves its final answer."""
    task_description: str = ""
    """What the current (sub)agent was asked to do."""
    tool_call_approved: bool = False
    """Set by the executor while a call runs that the HITL handler explicitly approved.

    ``Registry`` runs ``USER_CONFIRM`` tools only when this is true (fail closed)."""
    tool_policy: ToolPolicy | None = None
    """Set on the context handed to ``HITLHandler.on_tool_call``: the policy for this call."""
    tool_review: str = ""
    """With it: why the call needs confirmation (a tool's judge, e.g. the shell rule set)."""
    budget: BudgetView | None = None
    """The run's budget account: set by the executor; a sub-agent run with this context
    draws from it (pass one yourself to share a budget between runs)."""

    def __post_init__(self) -> None:
        # RunContext(workspace="/path") is how most people write it: accept a str. Whether
        # the path is usable (it exists, holds no NUL byte) is checked where it is used.
        if self.workspace is not None and not isinstance(self.workspace, Path):
            if not isinstance(self.workspace, str | os.PathLike):
                raise TypeError(
                    "RunContext.workspace must be a path (str or pathlib.Path), got "
                    f"{type(self.workspace).__name__}"
                )
            self.workspace = Path(self.workspace)

    def replace(self, **changes: Any) -> RunContext:
        """A copy of this context with ``changes`` applied."""
        return dataclasses.replace(self, **changes)
