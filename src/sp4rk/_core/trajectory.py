"""The trajectory: one ``Step`` per tool call or message, and the kinds of executor nudges."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from sp4rk._internal.serde import Serializable
from sp4rk.llm.types import ReasoningItem, ToolCall


class NudgeKind(enum.Enum):
    """Who wrote a step's ``user_nudge``, and why: code reads this, never the nudge's wording."""

    USER = "user"
    """A live message from the human (or the host), delivered at a step boundary."""
    TEXT_REPLY = "text_reply"
    """The model replied with text only; it was asked to call ``finish`` explicitly."""
    PRINTED_TOOL_CALL = "printed_tool_call"
    """The model wrote a tool call as text; it was asked to make a real call."""
    BUDGET_GRANTED = "budget_granted"
    """The human granted more steps (or lifted the limit) at the step budget."""
    WRAP_UP = "wrap_up"
    """Few steps are left in the budget."""
    CHECKLIST_STALE = "checklist_stale"
    """Many calls since the last checklist update."""
    FINISH_REJECTED = "finish_rejected"
    """A finish attempt was rejected by the finish guard or a gate."""
    BREAKER = "breaker"
    """A circuit breaker nudged the model to change its approach."""
    REPRIEVE = "reprieve"
    """A breaker tripped and the human let the run go on."""
    TRUNCATED_RESPONSE = "truncated_response"
    """The response was cut at the output-token limit; none of its calls ran."""
    BUDGET_STATUS = "budget_status"
    """What the run has spent of its budget (tokens, cost, time, tool calls)."""
    BUDGET_WRAP_UP = "budget_wrap_up"
    """Most of a budget limit is used: finish with what you have."""
    BUDGET_EXTENDED = "budget_extended"
    """The human extended (or lifted) a budget limit."""
    INVALID_ANSWER = "invalid_answer"
    """A text reply taken as the answer did not match the executor's ``output_type``."""


@dataclass(slots=True)
class Step(Serializable):
    """One entry of the trajectory.

    A step with an ``action`` is a tool call and its observation. A step whose ``action`` is
    ``None`` is a *nudge-only* step: a message to the model (``user_nudge``), possibly with the
    text the model had replied. Steps sharing a non-zero ``response_group`` came from one
    response and render as one assistant message with several tool calls. ``nudge_kind`` says
    who wrote ``user_nudge`` (``None`` when there is none, or in checkpoints older than it).
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
    nudge_kind: NudgeKind | None = None
    notes_length: int = 0
    """The last ``notes_length`` characters of ``observation`` are sp4rk's own notes (how to
    read a cut result, a parse-error hint, a verification result): a context manager keeps
    them outside the untrusted wrapper, so no instruction of ours reads as the tool's."""

    def observation_parts(self) -> tuple[str, str]:
        """``(what the tool returned, sp4rk's notes on it)``, which make up ``observation``."""
        cut = len(self.observation) - self.notes_length if self.notes_length > 0 else None
        if cut is None or cut < 0:
            return self.observation, ""
        return self.observation[:cut], self.observation[cut:]

    @property
    def tool_name(self) -> str:
        """The action's tool name, or ``""`` for a nudge-only step."""
        return "" if self.action is None else self.action.name
