"""What calls a model: the ``LLMCaller`` seam that providers, routers and test doubles fill."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from sp4rk.llm.types import ChatRequest, ChatResponse


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
