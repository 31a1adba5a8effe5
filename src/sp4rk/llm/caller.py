"""What calls a model: the ``LLMCaller`` seam that providers, routers and test doubles fill."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeGuard, runtime_checkable

from sp4rk._internal.conformance import conforms
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


def supports_streaming(caller: object) -> TypeGuard[StreamingLLMCaller]:
    """Whether ``caller`` can stream: it has a callable ``call`` and ``call_stream``.

    Use this rather than ``isinstance(caller, StreamingLLMCaller)``: from Python 3.12 that
    check misses a ``call_stream`` a wrapper provides through ``__getattr__``, so the answer
    would depend on the interpreter. This one is the same on every version.
    """
    return conforms(caller, StreamingLLMCaller)
