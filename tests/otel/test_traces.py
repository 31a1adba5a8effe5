"""Spans: names, parenting, attributes and events of scripted runs, read from the SDK in memory."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from sp4rk.agent import (
    DumpCaller,
    Executor,
    SubAgentTask,
    ToolTruncationConfig,
    compute_tool_result_hash,
    run_sub_agents_parallel,
)
from sp4rk.llm import LLMError, Router
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.otel import OpenTelemetryEvents
from sp4rk.otel.events import describe_model
from sp4rk.tools import Registry, ToolTraits, tool

from ..agent.helpers import echo_tools
from .story import run_story
from .telemetry import Telemetry


def by_start(spans: list) -> list:  # type: ignore[type-arg]
    return sorted(spans, key=lambda s: s.start_time)


async def test_one_run_is_one_trace_that_says_why_it_stopped(telemetry: Telemetry) -> None:
    result = await run_story(
        telemetry.events(agent_name="coder"), telemetry.events(agent_name="researcher")
    )
    assert result.exit_reason.value == "repeat_abort"

    root = telemetry.one("invoke_agent coder")
    assert root.parent is None
    assert len({s.context.trace_id for s in telemetry.spans}) == 1  # type: ignore[union-attr]
    assert root.status.status_code is StatusCode.ERROR
    assert root.status.description == "stopped: repeat_abort"
    attrs = root.attributes or {}
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "coder"
    assert attrs["sp4rk.run.exit_reason"] == "repeat_abort"
    assert attrs["error.type"] == "repeat_abort"
    assert attrs["sp4rk.run.finished"] is False
    assert attrs["sp4rk.run.steps"] == 6
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (600, 120)
    assert attrs["sp4rk.context.status"] == "ok" and attrs["sp4rk.context.fill_percent"] == 30.0

    assert [s.name for s in by_start(telemetry.children(root))] == [
        "chat",
        "execute_tool search",
        "execute_tool bash_exec",
        "chat",
        "execute_tool delegate",
        *["chat", "execute_tool search"] * 4,
    ]
    # Diagnostics of the run land on its span, breaker trips named by breaker and action.
    events = [(e.name, dict(e.attributes or {})) for e in root.events]
    assert events == [
        (
            "sp4rk.context_compaction",
            {"sp4rk.step": 1, "before_percent": 90.0, "after_percent": 40.0},
        ),
        (
            "sp4rk.repeated_tool_call_nudge",
            {
                "sp4rk.step": 5,
                "tool": "search",
                "repeat_count": 3,
                "sp4rk.breaker": "repeat",
                "sp4rk.breaker.action": "nudge",
            },
        ),
        (
            "sp4rk.repeated_tool_call_abort",
            {
                "sp4rk.step": 6,
                "tool": "search",
                "repeat_count": 4,
                "sp4rk.breaker": "repeat",
                "sp4rk.breaker.action": "abort",
            },
        ),
    ]
    # The blocked repeats are failed tool spans; the ones before them ran.
    searches = [s for s in by_start(telemetry.children(root)) if s.name == "execute_tool search"]
    assert [s.status.status_code for s in searches] == [StatusCode.UNSET] * 3 + [
        StatusCode.ERROR
    ] * 2
    assert searches[-1].attributes["error.type"] == "repeated_call"  # type: ignore[index]


async def test_model_call_spans_cover_the_retry_after_an_overflow(telemetry: Telemetry) -> None:
    await run_story(telemetry.events(agent_name="coder"), telemetry.events())
    root = telemetry.one("invoke_agent coder")
    chats = [s for s in by_start(telemetry.children(root)) if s.name == "chat"]
    assert [s.attributes["sp4rk.step"] for s in chats] == [1, 2, 3, 4, 5, 6]  # type: ignore[index]
    first, retried = chats[0], chats[1]
    assert first.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "ScriptedLLM",
        "sp4rk.step": 1,
        "gen_ai.request.max_tokens": 8192,
        "gen_ai.response.finish_reasons": ("tool_call",),
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
    }
    assert first.kind is trace.SpanKind.CLIENT
    # From the second step on, each call says how full the context was when it started.
    assert chats[1].attributes["sp4rk.context.fill_percent"] == 88.0  # type: ignore[index]
    assert chats[2].attributes["sp4rk.context.status"] == "ok"  # type: ignore[index]
    assert retried.attributes["sp4rk.model_call.attempts"] == 2  # type: ignore[index]
    assert [e.name for e in retried.events] == [
        "sp4rk.reactive_compaction_api_error",
        "sp4rk.context_compaction",
    ]
    assert retried.status.status_code is StatusCode.UNSET


async def test_tool_spans_carry_ids_approvals_and_how_they_ended(telemetry: Telemetry) -> None:
    await run_story(telemetry.events(agent_name="coder"), telemetry.events())
    root = telemetry.one("invoke_agent coder")
    tools = [s for s in by_start(telemetry.children(root)) if s.name.startswith("execute_tool")]
    search, bash = tools[0], tools[1]
    assert search.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call_1_0",
        "sp4rk.step": 1,
        "sp4rk.tool.call_index": 0,
        "sp4rk.tool.result_chars": 75,
    }  # flags appear only when set
    assert bash.attributes["sp4rk.tool.approved"] is True  # type: ignore[index]
    assert bash.attributes["sp4rk.tool.approval"] == "approved"  # type: ignore[index]
    (approval,) = bash.events
    assert approval.name == "sp4rk.approval"
    assert dict(approval.attributes or {}) == {
        "sp4rk.approval.decision": "approved",
        "sp4rk.approval.decided_by": "hitl:Approver",
        "sp4rk.approval.reason": "its policy asks for confirmation",
        "sp4rk.approval.arguments_sha256": approval.attributes["sp4rk.approval.arguments_sha256"],  # type: ignore[index]
    }


async def test_a_sub_agent_is_traced_under_the_tool_call_that_launched_it(
    telemetry: Telemetry,
) -> None:
    await run_story(telemetry.events(agent_name="coder"), telemetry.events(agent_name="researcher"))
    delegate = telemetry.one("execute_tool delegate")
    (sub,) = telemetry.children(delegate)
    assert sub.name == "invoke_agent researcher"
    assert sub.attributes["sp4rk.run.step_id"] == "research"  # type: ignore[index]
    assert sub.attributes["sp4rk.run.exit_reason"] == "finished"  # type: ignore[index]
    assert sub.status.status_code is StatusCode.UNSET
    assert [s.name for s in by_start(telemetry.children(sub))] == [
        "chat",
        "execute_tool search",
        "chat",
        "execute_tool finish",
    ]
    assert [e.name for e in delegate.events] == [
        "sp4rk.sub_agent_launch",
        "sp4rk.sub_agent_complete",
    ]
    assert delegate.events[1].attributes["sp4rk.sub_agent.success"] is True  # type: ignore[index]


async def test_one_sink_serves_a_run_and_its_parallel_sub_agents(telemetry: Telemetry) -> None:
    events = telemetry.events()

    @tool
    async def fan_out(n: int) -> str:
        """Start n sub-agents at once."""
        tasks = []
        for i in range(n):
            tools = echo_tools()
            llm = ScriptedLLM(
                [tool_calls_response(("search", {"q": f"s{i}"})), finish_response(f"r{i}")]
            )
            executor = Executor(llm, tools, 5, events=events)
            tasks.append(
                SubAgentTask(f"s{i}", executor, ContextWindow(task="t"), tools.list(), "t")
            )
        return ",".join(r.output for r in await run_sub_agents_parallel(tasks))

    tools = Registry([fan_out])
    llm = ScriptedLLM([tool_calls_response(("fan_out", {"n": 3})), finish_response("done")])
    result = await Executor(llm, tools, 5, events=events).run(tools.list(), ContextWindow())
    assert result.output == "done"

    runs = telemetry.named("invoke_agent sp4rk")
    (root,) = [r for r in runs if r.parent is None]
    assert [s.name for s in by_start(telemetry.children(root))] == [
        "chat",
        "execute_tool fan_out",
        "chat",
        "execute_tool finish",
    ]
    subs = telemetry.children(telemetry.one("execute_tool fan_out"))
    assert sorted(s.attributes["sp4rk.run.step_id"] for s in subs) == ["s0", "s1", "s2"]  # type: ignore[index]
    for sub in subs:  # each sub-agent's spans under its own run, none crossed over
        names = [s.name for s in by_start(telemetry.children(sub))]
        assert names == ["chat", "execute_tool search", "chat", "execute_tool finish"]
        assert sub.attributes["sp4rk.run.steps"] == 2  # type: ignore[index]
    assert root.attributes["sp4rk.run.steps"] == 2  # type: ignore[index]
    assert not trace.get_current_span().is_recording()  # the runs restored the context


async def test_concurrent_calls_each_run_under_their_own_span(telemetry: Telemetry) -> None:
    seen: dict[str, int] = {}
    ready = asyncio.Event()

    @tool(read_only=True)
    async def probe(q: str) -> str:
        """Record which span is current while running."""
        seen[q] = trace.get_current_span().get_span_context().span_id
        if len(seen) == 2:
            ready.set()
        await ready.wait()  # both calls are in flight at once
        return f"probed {q} " + "." * 60

    tools = Registry([probe])
    llm = ScriptedLLM(
        [tool_calls_response(("probe", {"q": "a"}), ("probe", {"q": "b"})), finish_response("ok")]
    )
    executor = Executor(llm, tools, 5, events=telemetry.events(), parallel_tool_calls=True)
    await executor.run(tools.list(), ContextWindow())
    spans = {
        s.attributes["sp4rk.tool.call_index"]: s.context.span_id  # type: ignore[index, union-attr]
        for s in telemetry.named("execute_tool probe")
    }
    assert seen == {"a": spans[0], "b": spans[1]}


async def test_truncated_and_cached_results_are_marked(telemetry: Telemetry) -> None:
    lines = "\n".join(f"line {i} " + "x" * 40 for i in range(5))

    @tool(traits=ToolTraits(read_only=True))
    def listing(q: str) -> str:
        """Five long lines."""
        return lines

    digest = compute_tool_result_hash("listing", lines)
    tools = Registry([listing])
    llm = ScriptedLLM(
        [
            tool_calls_response(("listing", {"q": "a"})),
            tool_calls_response(("tool_result_read", {"hash": digest})),
            finish_response("ok"),
        ]
    )
    executor = Executor(llm, tools, 5, events=telemetry.events())
    executor.set_per_tool_truncation({"listing": ToolTruncationConfig(max_lines=1)})
    await executor.run(tools.list(), ContextWindow())
    listing_span = telemetry.one("execute_tool listing")
    read = telemetry.one("execute_tool tool_result_read")
    assert listing_span.attributes["sp4rk.tool.truncated"] is True  # type: ignore[index]
    assert "sp4rk.tool.cached" not in (listing_span.attributes or {})
    assert read.attributes["sp4rk.tool.cached"] is True  # type: ignore[index]
    assert read.attributes["gen_ai.tool.name"] == "tool_result_read"  # type: ignore[index]
    assert read.status.status_code is StatusCode.UNSET


async def test_a_failed_model_call_fails_its_span_and_the_run(telemetry: Telemetry) -> None:
    tools = echo_tools()
    llm = ScriptedLLM([LLMError("provider down")])
    with pytest.raises(LLMError):
        await Executor(llm, tools, 5, events=telemetry.events()).run(tools.list(), ContextWindow())
    chat, root = telemetry.one("chat"), telemetry.one("invoke_agent sp4rk")
    for span in (chat, root):
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["error.type"] == "sp4rk.llm.errors.LLMError"  # type: ignore[index]
        (exception,) = [e for e in span.events if e.name == "exception"]
        assert exception.attributes["exception.message"] == "provider down"  # type: ignore[index]
    assert "sp4rk.run.exit_reason" not in (root.attributes or {})
    assert root.attributes["sp4rk.run.finished"] is False  # type: ignore[index]


async def test_a_paused_run_is_not_an_error(telemetry: Telemetry) -> None:
    tools = echo_tools()
    executor = Executor(
        ScriptedLLM([]), tools, 5, events=telemetry.events(), pause_checker=lambda ctx: True
    )
    result = await executor.run(tools.list(), ContextWindow())
    assert result.paused
    root = telemetry.one("invoke_agent sp4rk")
    assert root.status.status_code is StatusCode.UNSET
    assert root.attributes["sp4rk.run.exit_reason"] == "paused"  # type: ignore[index]
    assert root.attributes["sp4rk.run.steps"] == 0  # type: ignore[index]


async def test_events_outside_a_run_are_ignored(telemetry: Telemetry) -> None:
    events = telemetry.events()
    events.tool_execute_end(1, 0)
    events.executor_diagnostic(1, "nudge", {})
    events.run_end(None, None)
    assert telemetry.spans == ()


def test_the_provider_and_model_are_found_through_decorators_and_routers() -> None:
    assert describe_model(DumpCaller(Router("anthropic:claude-x"), None)) == (
        "anthropic",
        "claude-x",
    )
    assert describe_model(ScriptedLLM([])) == ("ScriptedLLM", "")


def test_bad_arguments_are_refused_with_what_to_pass() -> None:
    with pytest.raises(TypeError, match="tracer_provider must be an OpenTelemetry TracerProvider"):
        OpenTelemetryEvents(tracer_provider=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="meter_provider must be an OpenTelemetry MeterProvider"):
        OpenTelemetryEvents(meter_provider="global")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="capture_content must be a bool"):
        OpenTelemetryEvents(capture_content="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="agent_name must be a non-empty string"):
        OpenTelemetryEvents(agent_name=" ")
