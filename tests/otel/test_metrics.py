"""Metrics: token usage and duration per model call, runs by exit reason, breaker trips."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from sp4rk.agent import Executor
from sp4rk.llm import LLMError
from sp4rk.llm.testing import ScriptedLLM
from sp4rk.memory import ContextWindow
from sp4rk.otel import OpenTelemetryEvents

from ..agent.helpers import echo_tools
from .story import run_story
from .telemetry import Telemetry


async def test_the_story_counts_tokens_durations_runs_and_trips(telemetry: Telemetry) -> None:
    await run_story(telemetry.events(agent_name="coder"), telemetry.events(agent_name="researcher"))

    usage = {
        p.attributes["gen_ai.token.type"]: p for p in telemetry.points("gen_ai.client.token.usage")
    }
    # 6 model calls of the run and 1 of the sub-agent reported usage (its finish did not).
    assert (usage["input"].count, usage["input"].sum) == (7, 700)
    assert (usage["output"].count, usage["output"].sum) == (7, 140)
    assert dict(usage["input"].attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "ScriptedLLM",
        "gen_ai.token.type": "input",
    }
    (duration,) = telemetry.points("gen_ai.client.operation.duration")
    assert duration.count == 8 and duration.sum > 0

    runs = {
        (p.attributes["gen_ai.agent.name"], p.attributes["sp4rk.run.exit_reason"]): p.value
        for p in telemetry.points("sp4rk.agent.runs")
    }
    assert runs == {("coder", "repeat_abort"): 1, ("researcher", "finished"): 1}
    trips = {
        (p.attributes["sp4rk.breaker"], p.attributes["sp4rk.breaker.action"]): p.value
        for p in telemetry.points("sp4rk.agent.breaker.trips")
    }
    assert trips == {("repeat", "nudge"): 1, ("repeat", "abort"): 1}


async def test_a_failed_call_is_timed_with_its_error_type(telemetry: Telemetry) -> None:
    tools = echo_tools()
    executor = Executor(ScriptedLLM([LLMError("down")]), tools, 5, events=telemetry.events())
    with pytest.raises(LLMError):
        await executor.run(tools.list(), ContextWindow())
    (duration,) = telemetry.points("gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == "sp4rk.llm.errors.LLMError"
    assert telemetry.points("gen_ai.client.token.usage") == []
    (run,) = telemetry.points("sp4rk.agent.runs")
    assert dict(run.attributes) == {
        "gen_ai.agent.name": "sp4rk",
        "sp4rk.run.exit_reason": "error",
        "error.type": "sp4rk.llm.errors.LLMError",
    }


async def test_a_sampled_out_run_is_still_counted(telemetry: Telemetry) -> None:
    sampled_out = TracerProvider(sampler=ALWAYS_OFF)
    sampled_out.add_span_processor(SimpleSpanProcessor(telemetry.exporter))
    events = OpenTelemetryEvents(sampled_out, telemetry.meter_provider)
    result = await run_story(events, events)
    assert result.exit_reason.value == "repeat_abort"
    assert telemetry.spans == ()
    assert sum(p.value for p in telemetry.points("sp4rk.agent.runs")) == 2
    assert sum(p.value for p in telemetry.points("sp4rk.agent.breaker.trips")) == 2
    (duration,) = telemetry.points("gen_ai.client.operation.duration")
    assert duration.count == 8
