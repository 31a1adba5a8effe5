"""Deterministic test doubles for LLM callers, shipped for users' own tests.

``ScriptedLLM`` replays a fixed list of responses; ``FunctionLLM`` computes each response from
the request. Both record every request in ``.requests`` so tests can assert on prompts::

    llm = ScriptedLLM([
        tool_calls_response(("read_file", {"path": "README.md"})),
        finish_response("done"),
    ])
    result = await Executor(llm, registry, 10).run(registry.list(), window)
    llm.assert_complete()
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

from sp4rk._internal.aio import maybe_await
from sp4rk.llm._last_told import last_observation
from sp4rk.llm.cassette import CassetteMissError, RecordingLLM, ReplayLLM
from sp4rk.llm.types import ChatRequest, ChatResponse, Message, TokenUsage, ToolCall

ScriptItem: TypeAlias = (
    ChatResponse | BaseException | Callable[[ChatRequest], ChatResponse | Awaitable[ChatResponse]]
)

__all__ = [
    "CassetteMissError",
    "FunctionLLM",
    "RecordingLLM",
    "ReplayLLM",
    "ScriptExhaustedError",
    "ScriptedLLM",
    "ScriptedStreamingLLM",
    "finish_response",
    "text_response",
    "tool_calls_response",
]


class ScriptExhaustedError(AssertionError):
    """A scripted model was called more times than it has responses."""


def tool_calls_response(
    *calls: tuple[str, dict[str, Any] | str] | ToolCall,
    thought: str = "",
    stop_reason: str = "tool_use",
    usage: TokenUsage | None = None,
) -> ChatResponse:
    """Build a response that calls tools.

    Each call is a ``ToolCall`` or a ``(name, arguments)`` pair whose arguments are a dict
    (serialised to JSON) or raw JSON text (kept verbatim, so malformed input can be scripted).
    Calls without an id get one from their position when replayed.
    """
    tool_calls = [
        c
        if isinstance(c, ToolCall)
        else ToolCall("", c[0], c[1] if isinstance(c[1], str) else json.dumps(c[1]))
        for c in calls
    ]
    return ChatResponse(
        message=Message("assistant", content=thought, tool_calls=tool_calls),
        stop_reason=stop_reason,
        usage=usage or TokenUsage(),
    )


def finish_response(answer: str | Mapping[str, Any], *, thought: str = "") -> ChatResponse:
    """Build a response that calls the ``finish`` tool with ``answer``.

    A string is a text answer (``{"answer": ...}``); a mapping is the whole input, for an
    executor with an ``output_type`` (``finish_response({"city": "Paris", "celsius": 21})``).
    """
    data = {"answer": answer} if isinstance(answer, str) else dict(answer)
    return tool_calls_response(("finish", data), thought=thought)


def text_response(text: str, *, stop_reason: str = "end_turn") -> ChatResponse:
    """Build a text-only response (no tool calls)."""
    return ChatResponse(message=Message("assistant", content=text), stop_reason=stop_reason)


class _RecordingLLM:
    def __init__(self, model: str) -> None:
        self.requests: list[ChatRequest] = []
        self.model = model
        """The model this double plays, as a provider's ``model``: responses that name none
        report it, and budgets price calls by it."""

    def _named(self, response: ChatResponse) -> ChatResponse:
        if not response.model:
            response.model = self.model
        return response

    def _record(self, request: ChatRequest) -> None:
        # Copy the lists (cheap) so later appends by the caller do not rewrite history;
        # messages themselves are treated as immutable once sent.
        r = request
        self.requests.append(
            ChatRequest(
                model=r.model,
                messages=list(r.messages),
                tools=list(r.tools),
                max_tokens=r.max_tokens,
                call_purpose=r.call_purpose,
                temperature=r.temperature,
                top_p=r.top_p,
                top_k=r.top_k,
                presence_penalty=r.presence_penalty,
                reasoning_effort=r.reasoning_effort,
            )
        )


class ScriptedLLM(_RecordingLLM):
    """Replays ``responses`` in order, one per call.

    Args:
        responses: each item is a ``ChatResponse``; an exception instance, raised on its turn
            (to script provider failures); or a callable ``request -> ChatResponse`` (sync or
            async) for responses that depend on the prompt.
        model: the model it plays (reported by responses that name none).

    Raises:
        ScriptExhaustedError: from ``call`` once every response has been used.
    """

    def __init__(self, responses: Sequence[ScriptItem], *, model: str = "") -> None:
        super().__init__(model)
        self._script: list[ScriptItem] = list(responses)
        self._next = 0

    @property
    def remaining(self) -> int:
        """Responses not yet used."""
        return len(self._script) - self._next

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Record ``request`` and return (or raise) the next scripted item."""
        self._record(request)
        if self._next >= len(self._script):
            raise ScriptExhaustedError(
                f"ScriptedLLM ran out of responses: call {self._next + 1}, but the script has "
                f"{len(self._script)}. {last_observation(request)}Add responses "
                "to the script, or check why the agent did not stop earlier."
            )
        index = self._next
        item = self._script[index]
        self._next += 1
        if isinstance(item, BaseException):
            raise item
        response = item if isinstance(item, ChatResponse) else await maybe_await(item(request))
        response = copy.deepcopy(response)
        for i, call in enumerate(response.message.tool_calls):
            if not call.id:
                call.id = f"call_{index + 1}_{i}"
        return self._named(response)

    def assert_complete(self) -> None:
        """Fail unless every scripted response was used.

        Raises:
            AssertionError: naming how many responses were left over.
        """
        if self.remaining:
            raise AssertionError(
                f"ScriptedLLM has {self.remaining} unused response(s) of {len(self._script)}: "
                "the agent stopped earlier than the script expected."
            )


class ScriptedStreamingLLM(ScriptedLLM):
    """A :class:`ScriptedLLM` that also streams: text arrives in word-sized deltas."""

    async def call_stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ChatResponse:
        """Like :meth:`call`, delivering the response text to ``on_text`` piece by piece."""
        response = await self.call(request)
        text = response.message.content
        start = 0
        while start < len(text):
            end = text.find(" ", start + 1)
            end = len(text) if end < 0 else end
            on_text(text[start:end])
            start = end
        return response


class FunctionLLM(_RecordingLLM):
    """Answers each call with ``fn(request)``, a sync or async function.

    ``model`` is the model it plays (reported by responses that name none).
    """

    def __init__(
        self,
        fn: Callable[[ChatRequest], ChatResponse | Awaitable[ChatResponse]],
        *,
        model: str = "",
    ) -> None:
        super().__init__(model)
        self._fn = fn

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Record ``request`` and return ``fn(request)``."""
        self._record(request)
        response: ChatResponse = await maybe_await(self._fn(request))
        return self._named(response) if isinstance(response, ChatResponse) else response
