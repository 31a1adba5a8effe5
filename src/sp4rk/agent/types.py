"""What the loop produces: steps, results, exit reasons, and context-fill reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from sp4rk._core.context import CompactionResult, FillCheck, VulnerableOutput
from sp4rk._core.trajectory import NudgeKind, Step
from sp4rk._internal.serde import Serializable
from sp4rk.agent.exit_reason import ExitReason
from sp4rk.agent.state import RunState

__all__ = [
    "CompactionResult",
    "ExecutorResult",
    "ExitReason",
    "FillCheck",
    "NudgeKind",
    "Step",
    "VulnerableOutput",
]


@dataclass(slots=True)
class ExecutorResult(Serializable):
    """The outcome of ``Executor.run``.

    ``output`` is the final answer when ``finished``; otherwise why the run stopped (empty
    when paused). ``steps`` is the whole trajectory, resumed steps included. ``state`` is the
    executor's state at the end: save it with the steps (``save_checkpoint(path, result)``)
    to resume exactly where the run stopped.
    """

    output: str
    steps: list[Step]
    finished: bool
    paused: bool = field(default=False, kw_only=True)
    exit_reason: ExitReason = field(kw_only=True)
    state: RunState | None = field(default=None, kw_only=True)
