"""Chat data exchanged with models: messages, tool calls, requests and responses.

Every type round-trips through ``to_dict()`` / ``from_dict()`` as plain JSON types, which is
what dumps, cassettes and checkpoints store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sp4rk._internal.serde import Serializable as _Serializable

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(slots=True)
class ContentBlock(_Serializable):
    """One part of a multimodal message: text, or a base64 image (no ``data:`` prefix)."""

    type: Literal["text", "image"]
    text: str = ""
    image_b64: str = ""
    media_type: str = ""


@dataclass(slots=True)
class ToolCall(_Serializable):
    """A tool invocation chosen by the model. ``input`` is the raw JSON text, as produced."""

    id: str
    name: str
    input: str


@dataclass(slots=True)
class ToolDefinition(_Serializable):
    """A tool offered to the model: its name, description and JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(slots=True)
class ReasoningItem(_Serializable):
    """A structured reasoning item (OpenAI Responses API) that must round-trip by ``id``."""

    id: str
    summary: str = ""


@dataclass(slots=True)
class TokenUsage(_Serializable):
    """Tokens a provider reported for one call.

    ``input_tokens`` counts every prompt token; ``cached_input_tokens`` and
    ``cache_write_tokens`` say how many of them were read from or written to the provider's
    prompt cache (they are priced differently, see :mod:`sp4rk.llm.pricing`).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    """Of ``input_tokens``: read from the prompt cache."""
    cache_write_tokens: int = 0
    """Of ``input_tokens``: written to the prompt cache (Anthropic)."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(slots=True)
class Message(_Serializable):
    """One chat message. ``tool`` messages answer the call named by ``tool_call_id``."""

    role: Role
    content: str = ""
    content_blocks: list[ContentBlock] = field(default_factory=list)
    reasoning_content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""
    reasoning_items: list[ReasoningItem] = field(default_factory=list)


@dataclass(slots=True)
class ChatRequest(_Serializable):
    """Everything a provider needs for one call. ``None`` sampling values are not sent."""

    model: str = ""
    messages: list[Message] = field(default_factory=list)
    tools: list[ToolDefinition] = field(default_factory=list)
    max_tokens: int = 0
    call_purpose: str = ""
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    presence_penalty: float | None = None
    reasoning_effort: str = ""


StopReason = Literal["end_turn", "tool_use", "max_tokens"]


@dataclass(slots=True)
class ChatResponse(_Serializable):
    """A provider's answer. ``stop_reason`` is ``end_turn``, ``tool_use`` or ``max_tokens``."""

    model: str = ""
    message: Message = field(default_factory=lambda: Message("assistant"))
    reasoning: str = ""
    usage: TokenUsage = field(default_factory=TokenUsage)
    stop_reason: str = ""
