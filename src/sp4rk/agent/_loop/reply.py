"""One model response as the loop records it: the parts its steps share."""

from __future__ import annotations

from dataclasses import dataclass, field

from sp4rk.agent.types import Step
from sp4rk.llm.types import ChatResponse, ReasoningItem, ToolCall


@dataclass(frozen=True, slots=True)
class Reply:
    """What every step made from one model response shares."""

    thought: str
    reasoning_content: str
    reasoning_items: list[ReasoningItem] = field(default_factory=list)
    tokens: int = 0
    group: int = 0

    @classmethod
    def of(cls, response: ChatResponse, group: int) -> Reply:
        """The reply of ``response``, whose steps form response group ``group``."""
        m, usage = response.message, response.usage
        return cls(
            m.content,
            m.reasoning_content,
            list(m.reasoning_items),
            usage.input_tokens + usage.output_tokens,
            group,
        )

    def step(
        self,
        *,
        first: bool,
        action: ToolCall | None = None,
        observation: str = "",
        is_error: bool = False,
    ) -> Step:
        """A step of this response; only the ``first`` carries the thought and reasoning."""
        return Step(
            thought=self.thought if first else "",
            reasoning_content=self.reasoning_content if first else "",
            reasoning_items=list(self.reasoning_items) if first else [],
            action=action,
            observation=observation,
            is_error=is_error,
            tokens_used=self.tokens,
            response_group=self.group,
        )
