"""The context-manager seam: what the executor needs from whatever owns the prompt history."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sp4rk._core.trajectory import Step
from sp4rk._internal.serde import Serializable
from sp4rk.llm.types import Message


@dataclass(slots=True)
class FillCheck(Serializable):
    """How full the context window is: ``status`` is ok, compact, warning, emergency or reject."""

    percent: float
    status: str
    used: int
    max: int


@dataclass(slots=True)
class CompactionResult(Serializable):
    """Context fill before and after a compaction, in percent."""

    before_percent: float
    after_percent: float


@dataclass(slots=True)
class VulnerableOutput(Serializable):
    """A tool output the next pruning will drop from the prompt."""

    tool_name: str
    input_hint: str = ""


@runtime_checkable
class CompactionStrategy(Protocol):
    """Compresses a step history into fewer messages that fit ``budget_tokens``."""

    async def compact(self, steps: Sequence[Step], budget_tokens: int) -> list[Message]:
        """Messages that replace ``steps`` in the prompt."""
        ...


@runtime_checkable
class ContextManager(Protocol):
    """Owns the prompt history and its compaction."""

    def build_prompt(self) -> list[Message]:
        """The messages for the next LLM call."""
        ...

    def add_step(self, step: Step) -> None:
        """Record a completed step."""
        ...

    async def compact(self) -> CompactionResult | None:
        """Compact the history; ``None`` when nothing could be done."""
        ...

    def set_strategy(self, strategy: CompactionStrategy) -> None:
        """Use ``strategy`` for later compactions."""
        ...

    def check_fill(self) -> FillCheck:
        """How full the window is."""
        ...

    def correct_token_count(self, api_input_tokens: int) -> None:
        """Calibrate the local estimate with the input tokens the provider reported."""
        ...

    def fill_percent(self) -> float:
        """Fill as a percentage of the usable window."""
        ...

    def available_tokens(self) -> int:
        """Tokens still free in the usable window."""
        ...

    def output_limit(self) -> int:
        """Most tokens the model may produce per call."""
        ...

    def vulnerable_outputs(self) -> list[VulnerableOutput]:
        """Tool outputs the next pruning will drop."""
        ...


@runtime_checkable
class TrajectoryStore(Protocol):
    """A holder of the current trajectory, for tools (a reflector) to read."""

    def sync(self, steps: Sequence[Step]) -> None:
        """Replace the held steps with a snapshot of ``steps``."""
        ...

    def steps(self) -> list[Step]:
        """The held steps."""
        ...


@runtime_checkable
class IncrementalTrajectoryStore(TrajectoryStore, Protocol):
    """A :class:`TrajectoryStore` that takes only what changed at each boundary.

    The executor gives it the steps from where it last synced on, instead of the whole
    trajectory every boundary (``sync``, which costs a long run O(history) per step).
    """

    def sync_tail(self, start: int, steps: Sequence[Step]) -> None:
        """Keep the held steps before index ``start``; replace the rest with ``steps``."""
        ...


@runtime_checkable
class InterjectionConsumer(Protocol):
    """A context manager holding a one-shot user interjection (for example after a resume)."""

    def consume_pending_user_interjection(self) -> None:
        """Retire the pending interjection; called after a successful LLM response."""
        ...


@runtime_checkable
class InterjectionHolder(Protocol):
    """A context manager whose pending interjection can be read and set.

    The executor saves an interjection not yet retired in the run's state when the run
    stops, and gives it back to the context manager on resume.
    """

    @property
    def pending_user_interjection(self) -> str:
        """The interjection waiting to be shown (``""`` when none)."""
        ...

    def set_pending_user_interjection(self, text: str) -> None:
        """Show ``text`` as the last user message until it is consumed."""
        ...


class ListTrajectoryStore:
    """A minimal thread-safe :class:`IncrementalTrajectoryStore` holding a list snapshot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: list[Step] = []

    def sync(self, steps: Sequence[Step]) -> None:
        """Replace the held steps with a snapshot of ``steps``."""
        with self._lock:
            self._steps = list(steps)

    def sync_tail(self, start: int, steps: Sequence[Step]) -> None:
        """Keep the held steps before index ``start``; replace the rest with ``steps``."""
        with self._lock:
            del self._steps[start:]
            self._steps.extend(steps)

    def steps(self) -> list[Step]:
        """A copy of the held steps."""
        with self._lock:
            return list(self._steps)
