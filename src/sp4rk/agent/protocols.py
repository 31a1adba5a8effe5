"""The narrow seams the executor depends on, as structural protocols."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol, TypeGuard, runtime_checkable

from sp4rk._internal.conformance import conforms
from sp4rk.agent.types import CompactionResult, FillCheck, Step, VulnerableOutput
from sp4rk.llm.types import ChatRequest, ChatResponse, Message
from sp4rk.tools.base import CacheMode, ToolResult
from sp4rk.tools.context import RunContext


@runtime_checkable
class LLMCaller(Protocol):
    """Sends one chat request; providers, routers and test doubles all satisfy it."""

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Return the model's response to ``request``."""
        ...


@runtime_checkable
class StreamingLLMCaller(LLMCaller, Protocol):
    """An ``LLMCaller`` that can also deliver the reply text as it is generated."""

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Like ``call``, calling ``on_text`` for each text delta."""
        ...


def supports_streaming(caller: object) -> TypeGuard[StreamingLLMCaller]:
    """Whether ``caller`` can stream: it has a callable ``call`` and ``call_stream``.

    Use this rather than ``isinstance(caller, StreamingLLMCaller)``: from Python 3.12 that
    check misses a ``call_stream`` a wrapper provides through ``__getattr__``, so the answer
    would depend on the interpreter. This one is the same on every version.
    """
    return conforms(caller, StreamingLLMCaller)


@runtime_checkable
class ToolExecutor(Protocol):
    """Runs tools by name and tells the executor where their output comes from."""

    async def execute(self, ctx: RunContext, name: str, input: str) -> ToolResult:
        """Run tool ``name`` on raw JSON ``input``."""
        ...

    def get_tool_source(self, name: str) -> str:
        """``"core"``, an MCP server name, or ``""`` when unknown."""
        ...

    def is_tool_untrusted(self, name: str) -> bool:
        """Whether the tool's output must be wrapped as untrusted."""
        ...

    def cache_strategy(self, ctx: RunContext, name: str, input: str) -> CacheMode:
        """How to cache the tool's result."""
        ...


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
class InterjectionConsumer(Protocol):
    """A context manager holding a one-shot user interjection (for example after a resume)."""

    def consume_pending_user_interjection(self) -> None:
        """Retire the pending interjection; called after a successful LLM response."""
        ...


class ListTrajectoryStore:
    """A minimal thread-safe :class:`TrajectoryStore` holding a list snapshot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: list[Step] = []

    def sync(self, steps: Sequence[Step]) -> None:
        """Replace the held steps with a snapshot of ``steps``."""
        with self._lock:
            self._steps = list(steps)

    def steps(self) -> list[Step]:
        """A copy of the held steps."""
        with self._lock:
            return list(self._steps)
