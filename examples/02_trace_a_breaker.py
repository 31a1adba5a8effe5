"""A run that hits a circuit breaker, traced with OpenTelemetry and printed as a span tree.

Run it with ``python examples/02_trace_a_breaker.py`` (needs ``opentelemetry-sdk``). The model
is a ``ScriptedLLM`` standing in for Claude; the tools are small functions. The agent looks
for the cause of a failing export, runs the tests (a human approves), then keeps repeating
one identical search: the repeat breaker nudges it at the third identical call and stops the
run at the fourth. ``docs/observability.md`` shows this output and how to read it.

The spans go to an in-memory exporter so that they can be printed; in production, give the
SDK an OTLP exporter instead, and the same spans appear in Jaeger, Tempo, Honeycomb, ...
"""

from __future__ import annotations

import asyncio
import textwrap
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sp4rk.agent import Executor, HITLHandler, HITLToolDecision
from sp4rk.llm import ChatResponse, TokenUsage
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.otel import OpenTelemetryEvents
from sp4rk.tools import Registry, RunContext, ToolPolicy, tool

MODEL = "claude-sonnet-4-5"


class ScriptedClaude(ScriptedLLM):
    """A scripted model that names itself like the Anthropic provider does."""

    name = "anthropic"
    model = MODEL


class ApproveTests(HITLHandler):
    """Stands in for a human who approves every call that asks for approval."""

    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        return HITLToolDecision(allow=True) if ctx.tool_policy is ToolPolicy.USER_CONFIRM else None


@tool(read_only=True)
def search(query: str) -> str:
    """Search the code base."""
    return f"3 matches for {query!r}: export.py:41, export.py:88, retry.py:12"


@tool(read_only=True)
def read_file(path: str) -> str:
    """Read a file."""
    return f"{path}: 2026-11-30 02:00:13 ERROR export timed out after 30 s (attempt 3 of 3)"


@tool(policy=ToolPolicy.USER_CONFIRM)
def run_tests(selection: str) -> str:
    """Run the test suite (asks for approval)."""
    return f"{selection}: 41 passed, 1 failed (test_export_retries)"


def step(*calls: tuple[str, dict[str, str]], thought: str = "") -> ChatResponse:
    response = tool_calls_response(*calls, thought=thought, usage=TokenUsage(1800, 60))
    response.model = MODEL
    return response


SCRIPT = [
    step(
        ("search", {"query": "export failure"}),
        ("read_file", {"path": "logs/export.log"}),
        thought="Find the failing export first.",
    ),
    step(("run_tests", {"selection": "tests/test_export.py"})),
    *[step(("search", {"query": "timeout"})) for _ in range(4)],
    finish_response("never reached"),
]


#: Attributes the span's name or its parent already says, left out of the printout.
SAID_ELSEWHERE = {
    "gen_ai.operation.name",
    "gen_ai.agent.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.tool.name",
    "gen_ai.tool.type",
    "sp4rk.context.used_tokens",
    "sp4rk.context.max_tokens",
}


def print_tree(spans: tuple[ReadableSpan, ...]) -> None:
    """Each span under its parent, in start order, with its attributes and events."""
    by_id = {s.context.span_id: s for s in spans if s.context is not None}

    def depth(span: ReadableSpan) -> int:
        level = 0
        while span.parent is not None and span.parent.span_id in by_id:
            span, level = by_id[span.parent.span_id], level + 1
        return level

    def show(attributes: Any, skip: set[str] | None = None) -> str:
        return ", ".join(
            f"{k}={round(v, 1) if isinstance(v, float) else v!r}"
            for k, v in (attributes or {}).items()
            if k not in (skip or ())
        )

    for span in sorted(spans, key=lambda s: s.start_time or 0):
        pad = "  " * depth(span)
        status = span.status.status_code.name
        status += f": {span.status.description}" if span.status.description else ""
        print(f"{pad}{span.name}  [{status}]")
        lines = textwrap.wrap(
            show(span.attributes, SAID_ELSEWHERE), 96 - len(pad), break_long_words=False
        )
        print("".join(f"{pad}  {line}\n" for line in lines), end="")
        for event in span.events:
            event_lines = textwrap.wrap(
                f"* {event.name}: {show(event.attributes)}", 96 - len(pad), break_long_words=False
            )
            print(f"{pad}  " + f"\n{pad}    ".join(event_lines))


async def main() -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    events = OpenTelemetryEvents(tracer_provider, meter_provider, agent_name="fixer")

    tools = Registry([search, read_file, run_tests])
    executor = Executor(ScriptedClaude(SCRIPT), tools, 20, events=events, hitl=ApproveTests())
    window = ContextWindow(task="Find out why the nightly export fails.")
    result = await executor.run(tools.list(), window)
    print(f"finished={result.finished} exit={result.exit_reason.value}: {result.output}\n")
    print_tree(exporter.get_finished_spans())


if __name__ == "__main__":
    asyncio.run(main())
