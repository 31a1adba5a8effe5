"""What the loop produces: steps, results, exit reasons, and context-fill reports."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from sp4rk.llm.types import ReasoningItem, ToolCall, _Serializable


@dataclass(slots=True)
class Step(_Serializable):
    """One entry of the trajectory.

    A step with an ``action`` is a tool call and its observation. A step whose ``action`` is
    ``None`` is a *nudge-only* step: a message to the model (``user_nudge``), possibly with the
    text the model had replied. Steps sharing a non-zero ``response_group`` came from one
    response and render as one assistant message with several tool calls.
    """

    thought: str = ""
    reasoning_content: str = ""
    reasoning_items: list[ReasoningItem] = field(default_factory=list)
    action: ToolCall | None = None
    observation: str = ""
    is_error: bool = False
    tokens_used: int = 0
    user_nudge: str = ""
    response_group: int = 0
    is_untrusted: bool = False
    cache_hash: str = ""

    @property
    def tool_name(self) -> str:
        """The action's tool name, or ``""`` for a nudge-only step."""
        return "" if self.action is None else self.action.name


class ExitReason(enum.Enum):
    """Why ``Executor.run`` returned."""

    FINISHED = "finished"
    """The model called ``finish`` and every gate accepted it."""
    IMPLICIT_FINISH = "implicit_finish"
    """The model kept replying with text after two nudges; the text was accepted."""
    PAUSED = "paused"
    """The pause checker asked to stop; ``steps`` is a resumable checkpoint."""
    STEP_LIMIT = "step_limit"
    """The step budget ran out and the HITL handler granted no more."""
    REPEAT_ABORT = "repeat_abort"
    """The same call with the same arguments was repeated too many times."""
    TRUNCATION_ABORT = "truncation_abort"
    """Responses kept being cut at the output-token limit."""
    PARSE_ERROR_ABORT = "parse_error_abort"
    """A tool's input kept failing to parse."""
    FRUITLESS_ABORT = "fruitless_abort"
    """Calls kept returning empty or minimal results."""
    SAME_TOOL_ABORT = "same_tool_abort"
    """One tool kept being called with varied arguments but similar results."""
    MUTATION_REQUIRED = "mutation_required"
    """The run had to change files, none were changed, and the model finished anyway."""


@dataclass(slots=True)
class ExecutorResult(_Serializable):
    """The outcome of ``Executor.run``.

    ``output`` is the final answer when ``finished``; otherwise why the run stopped (empty
    when paused). ``steps`` is the whole trajectory, resumed steps included.
    """

    output: str
    steps: list[Step]
    finished: bool
    paused: bool = field(default=False, kw_only=True)
    exit_reason: ExitReason = field(kw_only=True)


@dataclass(slots=True)
class FillCheck(_Serializable):
    """How full the context window is: ``status`` is ok, compact, warning, emergency or reject."""

    percent: float
    status: str
    used: int
    max: int


@dataclass(slots=True)
class CompactionResult(_Serializable):
    """Context fill before and after a compaction, in percent."""

    before_percent: float
    after_percent: float


@dataclass(slots=True)
class VulnerableOutput(_Serializable):
    """A tool output the next pruning will drop from the prompt."""

    tool_name: str
    input_hint: str = ""
