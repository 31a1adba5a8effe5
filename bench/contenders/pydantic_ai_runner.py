"""pydantic-ai: an ``Agent`` on a ``FunctionModel`` (the library's own scripted-model double).

The final answer is a text reply (the agent's default ``str`` output). The request limit, 50 by
default, is lifted so that 500-step runs can finish.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

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
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

DISTRIBUTIONS = ("pydantic-ai-slim", "pydantic")
CONCURRENCY = "asyncio"

#: Replies report usage, as a provider's do; without it ``FunctionModel`` estimates the tokens
#: of the whole history on every call, a cost of the test double rather than of the agent.
USAGE = RequestUsage(input_tokens=1, output_tokens=1)


def prepare(spec: RunSpec, probe: Probe) -> Callable[[], Awaitable[None]]:
    """A fresh agent per run."""
    script = Script(spec.steps)

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        entered = probe.model_enter()
        if spec.latency_s:
            await asyncio.sleep(spec.latency_s)
        query = script.next_query()
        if query is None:
            reply = ModelResponse(parts=[TextPart(FINAL_ANSWER)], usage=USAGE)
        else:
            call = ToolCallPart(TOOL_NAME, {TOOL_PARAM: query}, tool_call_id=script.call_id())
            reply = ModelResponse(parts=[call], usage=USAGE)
        probe.model_leave(entered)
        return reply

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
        FunctionModel(respond),
        instructions=SYSTEM_PROMPT,
        tools=[Tool(lookup, name=TOOL_NAME, description=TOOL_DESCRIPTION)],
    )
    limits = UsageLimits(request_limit=None)

    async def run() -> None:
        result = await agent.run(TASK, usage_limits=limits)
        if result.output != FINAL_ANSWER:
            raise RuntimeError("pydantic-ai stopped before the final answer")

    return run
