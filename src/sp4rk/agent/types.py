"""What the loop produces: steps, results, exit reasons, and context-fill reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sp4rk._core.context import CompactionResult, FillCheck, VulnerableOutput
from sp4rk._core.trajectory import NudgeKind, Step
from sp4rk._internal.serde import Serializable, to_jsonable
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
    when paused). ``output_data`` is the answer validated against the executor's
    ``output_type`` (``None`` without one, or when the run ended without an answer).
    ``steps`` is the whole trajectory, resumed steps included: one entry per tool call, nudge
    and finish, so a model response that made three calls adds three. ``model_responses``
    counts the model responses (what ``max_steps`` limits), resumed ones included. ``state`` is the
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
    output_data: Any = field(default=None, kw_only=True)
    model_responses: int = field(default=0, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """Return this result as plain JSON types (``output_data`` as its JSON form)."""
        data: dict[str, Any] = to_jsonable(self)
        if self.output_data is not None:
            from pydantic_core import to_jsonable_python

            data["output_data"] = to_jsonable_python(self.output_data)
        return data
