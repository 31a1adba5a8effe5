"""OpenAI Agents SDK: ``Runner.run`` on an ``Agent`` whose ``Model`` is scripted, tracing off.

The SDK's own ``agents.testing.ScriptedModel`` deep-copies every call's input for its call log,
an O(history) cost per call that belongs to the double, not the runner; this minimal ``Model``
builds its replies with the same public helpers (``function_call``, ``assistant_message``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from agents import Agent, ModelSettings, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseStreamEvent
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from agents.usage import Usage
from anchors.common import (
    FINAL_ANSWER,
    SYSTEM_PROMPT,
    TASK,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_PARAM,
    Probe,
    RunSpec,
    Script,
    make_result,
)

DISTRIBUTIONS = ("openai-agents", "openai")
CONCURRENCY = "asyncio"


class ScriptedModel(Model):
    """Replies with the script's next tool call, then with the final answer as text."""

    def __init__(self, script: Script, probe: Probe, latency_s: float) -> None:
        self.script = script
        self.probe = probe
        self.latency_s = latency_s

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        entered = self.probe.model_enter()
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        query = self.script.next_query()
        if query is None:
            item = assistant_message(FINAL_ANSWER)
        else:
            item = function_call(TOOL_NAME, {TOOL_PARAM: query}, call_id=self.script.call_id())
        response = ModelResponse(output=[item], usage=Usage(), response_id=None)
        self.probe.model_leave(entered)
        return response

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the benchmark does not stream")


def prepare(spec: RunSpec, probe: Probe) -> Callable[[], Awaitable[None]]:
    """A fresh agent per run; turns allow every step, tracing is off."""
    set_tracing_disabled(True)

    @function_tool(name_override=TOOL_NAME, description_override=TOOL_DESCRIPTION)
    async def lookup(query: str) -> str:
        """Look up a record.

        Args:
            query: The record to look up.
        """
        entered = probe.tool_enter()
        result = make_result(query, spec.result_bytes)
        probe.tool_leave(entered)
        return result

    agent = Agent(
        name="bench",
        instructions=SYSTEM_PROMPT,
        tools=[lookup],
        model=ScriptedModel(Script(spec.steps), probe, spec.latency_s),
        model_settings=ModelSettings(),
    )
    config = RunConfig(tracing_disabled=True)

    async def run() -> None:
        result = await Runner.run(agent, TASK, max_turns=spec.steps + 5, run_config=config)
        if result.final_output != FINAL_ANSWER:
            raise RuntimeError("openai-agents stopped before the final answer")

    return run
