"""Protocol capabilities are decided alike on every Python, proxies included.

From Python 3.12, ``isinstance`` against a runtime-checkable protocol no longer sees members an
object provides through ``__getattr__``. sp4rk decides capabilities with ``conforms`` instead;
these tests pin that a forwarding proxy keeps every capability of what it wraps.
"""

from __future__ import annotations

from typing import Any

import pytest

from sp4rk._internal.conformance import conforms
from sp4rk.agent import (
    Executor,
    LLMCaller,
    RecordingEvents,
    StreamingLLMCaller,
    supports_streaming,
)
from sp4rk.agent.protocols import InterjectionConsumer
from sp4rk.llm import ChatRequest, ChatResponse, Message
from sp4rk.llm.testing import (
    ScriptedLLM,
    ScriptedStreamingLLM,
    finish_response,
    text_response,
    tool_calls_response,
)
from sp4rk.memory import ContextWindow, SummarizationStrategy
from sp4rk.tools import Registry, RunContext, Tool, ToolPolicy, ToolResult
from sp4rk.tools.base import ToolJudge

from .agent.helpers import echo_tools
from .memory.helpers import call_step


class Proxy:
    """Forwards every attribute it lacks to ``target``, the way wrappers often do."""

    def __init__(self, target: object) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class Judged:
    name = "shell"
    description = "runs commands"
    input_schema = {"type": "object"}  # noqa: RUF012
    default_policy = ToolPolicy.ALWAYS_ALLOW
    is_untrusted = False

    async def execute(self, ctx: RunContext, input: str) -> ToolResult:
        return ToolResult("ran")

    def judge(self, ctx: RunContext, input: str) -> str:
        return "it reaches the network" if "curl" in input else ""


def test_members_forwarded_through_getattr_count() -> None:
    streaming = Proxy(ScriptedStreamingLLM([]))
    assert supports_streaming(streaming) and conforms(streaming, LLMCaller)
    plain = Proxy(ScriptedLLM([]))
    assert conforms(plain, LLMCaller) and not supports_streaming(plain)
    assert conforms(Proxy(Judged()), Tool) and conforms(Proxy(Judged()), ToolJudge)
    assert conforms(Proxy(ContextWindow()), InterjectionConsumer)


def test_a_method_must_be_callable_and_inherited_members_count() -> None:
    class NoneCall:
        call = None

    class StreamOnly:
        async def call_stream(self, request: ChatRequest, on_text: Any) -> ChatResponse:
            raise AssertionError("never called")

    assert not conforms(NoneCall(), LLMCaller)
    assert not supports_streaming(StreamOnly())  # StreamingLLMCaller needs call too
    assert not conforms(object(), Tool)


def test_a_non_protocol_is_refused() -> None:
    with pytest.raises(TypeError, match="protocol class"):
        conforms(object(), len)


def test_the_executor_accepts_and_streams_through_a_proxy() -> None:
    tools = echo_tools()
    events = RecordingEvents()
    inner = ScriptedStreamingLLM(
        [tool_calls_response(("search", {"q": "a"}), thought="one two"), finish_response("ok")]
    )
    executor = Executor(Proxy(inner), tools, 5, events=events)  # type: ignore[arg-type]
    result = executor.run_sync(tools.list(), ContextWindow())
    assert result.output == "ok"
    assert [a[0] for a in events.of("assistant_chunk")] == ["one", " two"]


async def test_a_proxied_tool_keeps_its_judge() -> None:
    registry = Registry([Proxy(Judged())])  # type: ignore[list-item]
    review = registry.review(RunContext(), "shell", '{"c": "curl x"}')
    assert review is not None and review.policy is ToolPolicy.USER_CONFIRM
    refused = await registry.execute(RunContext(), "shell", '{"c": "curl x"}')
    assert refused.is_error and "because it reaches the network" in refused.content


async def test_a_proxied_llm_summarizer_is_called_as_an_llm() -> None:
    llm = ScriptedLLM([text_response("brief")])
    strategy = SummarizationStrategy(Proxy(llm), keep_last=0)  # type: ignore[arg-type]
    out = await strategy.compact([call_step(0), call_step(1)], 0)
    assert out == [Message("system", "[Summary of steps 1-2]\nbrief")]
    assert llm.requests[0].call_purpose == "compaction"


def test_streaming_protocol_agrees_with_the_helper_for_real_classes() -> None:
    for caller in (ScriptedLLM([]), ScriptedStreamingLLM([])):
        assert supports_streaming(caller) == isinstance(caller, StreamingLLMCaller)
