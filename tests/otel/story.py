"""One scripted run that does everything an operator wants to see in a trace.

Step 1 searches and runs a command a human approves; the context then crosses the compaction
threshold. Step 2's model call overflows once and is retried after a reactive compaction;
it delegates to a sub-agent (which searches and finishes). Steps 3-6 repeat one search until
the repeat breaker nudges, then aborts the run.
"""

from __future__ import annotations

from typing import Any

from sp4rk.agent import (
    Events,
    Executor,
    ExecutorResult,
    FillCheck,
    HITLHandler,
    HITLToolDecision,
    SubAgentTask,
    run_sub_agent,
)
from sp4rk.llm import ContextWindowExceededError, TokenUsage
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry, RunContext, ToolPolicy, tool

from ..agent.helpers import FakeContext, echo_tools

USAGE = TokenUsage(input_tokens=100, output_tokens=20)


class Approver(HITLHandler):
    """Approves what needs approval; has no opinion on the rest."""

    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        return HITLToolDecision(allow=True) if ctx.tool_policy is ToolPolicy.USER_CONFIRM else None


class CompactsOnce(FakeContext):
    """Crosses the compaction threshold once the first step's two calls are in."""

    def check_fill(self) -> FillCheck:
        if self.compactions == 0 and len(self.steps) >= 2:
            return FillCheck(88.0, "compact", 88_000, 100_000)
        return FillCheck(30.0, "ok", 30_000, 100_000)


def story_tools(sub_events: Events) -> Registry:
    """``echo_tools`` plus ``delegate``, which hands its task to a sub-agent."""
    registry = echo_tools()

    @tool
    async def delegate(task: str) -> str:
        """Hand a task to a sub-agent."""
        sub_tools = echo_tools()
        llm = ScriptedLLM(
            [
                tool_calls_response(("search", {"q": "deeper"}), usage=USAGE),
                finish_response("found it"),
            ]
        )
        result = await run_sub_agent(
            SubAgentTask(
                "research",
                Executor(llm, sub_tools, 5, events=sub_events),
                ContextWindow(task=task),
                sub_tools.list(),
                task,
                events=sub_events,
            )
        )
        return result.output

    registry.register(delegate)
    return registry


def script() -> list[Any]:
    same = tool_calls_response(("search", {"q": "same"}), usage=USAGE)
    return [
        tool_calls_response(
            ("search", {"q": "x"}), ("bash_exec", {"command": "ls"}), thought="look", usage=USAGE
        ),
        ContextWindowExceededError("prompt too long"),
        tool_calls_response(("delegate", {"task": "dig deeper"}), usage=USAGE),
        same,
        same,
        same,
        same,
    ]


async def run_story(events: Events, sub_events: Events) -> ExecutorResult:
    tools = story_tools(sub_events)
    executor = Executor(ScriptedLLM(script()), tools, 10, events=events, hitl=Approver())
    return await executor.run(tools.list(), CompactsOnce())
