"""What the loop produces: steps, results, exit reasons, and context-fill reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from sp4rk._core.context import CompactionResult, FillCheck, VulnerableOutput
from sp4rk._core.trajectory import NudgeKind, Step
from sp4rk._internal.serde import Serializable
from sp4rk.agent.exit_reason import ExitReason
from sp4rk.agent.state import RunState
from sp4rk.llm.types import TokenUsage

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
    to resume exactly where the run stopped. ``usage`` and ``cost_usd`` are what the whole
    run spent (resumed parts and sub-agents that drew from its budget included); ``cost_usd``
    is ``None`` when a call's model had no price (unknown, never guessed as zero).
    """

    output: str
    steps: list[Step]
    finished: bool
    paused: bool = field(default=False, kw_only=True)
    exit_reason: ExitReason = field(kw_only=True)
    state: RunState | None = field(default=None, kw_only=True)
    usage: TokenUsage = field(default_factory=TokenUsage, kw_only=True)
    cost_usd: float | None = field(default=None, kw_only=True)
