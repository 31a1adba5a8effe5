"""smolagents: ``ToolCallingAgent`` with a scripted ``Model`` subclass, logging off.

smolagents is synchronous: S1 and S2 call ``agent.run`` directly, S3 runs each agent in its own
thread. Its final answer is a call of the built-in ``final_answer`` tool.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from anchors.common import (
    FINAL_ANSWER,
    SYSTEM_PROMPT,
    TASK,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_PARAM,
    TOOL_PARAM_DESCRIPTION,
    Probe,
    RunSpec,
    Script,
    make_result,
)
from smolagents import ChatMessage, LogLevel, Model, Tool, ToolCallingAgent
from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole
from smolagents.monitoring import TokenUsage

DISTRIBUTIONS = ("smolagents",)
CONCURRENCY = "threads"


class ScriptedModel(Model):
    """Replies with the script's next tool call, then calls ``final_answer``."""

    def __init__(self, script: Script, probe: Probe, latency_s: float) -> None:
        super().__init__(model_id="scripted")
        self.script = script
        self.probe = probe
        self.latency_s = latency_s

    def generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatMessage:
        entered = self.probe.model_enter()
        if self.latency_s:
            time.sleep(self.latency_s)
        query = self.script.next_query()
        if query is None:
            name, arguments = "final_answer", {"answer": FINAL_ANSWER}
        else:
            name, arguments = TOOL_NAME, {TOOL_PARAM: query}
        call = ChatMessageToolCall(
            function=ChatMessageToolCallFunction(name=name, arguments=arguments),
            id=self.script.call_id(),
            type="function",
        )
        reply = ChatMessage(
            role=MessageRole.ASSISTANT,
            content="",
            tool_calls=[call],
            token_usage=TokenUsage(input_tokens=0, output_tokens=0),
        )
        self.probe.model_leave(entered)
        return reply


class Lookup(Tool):
    """The bench tool."""

    name = TOOL_NAME
    description = TOOL_DESCRIPTION
    inputs = {TOOL_PARAM: {"type": "string", "description": TOOL_PARAM_DESCRIPTION}}  # noqa: RUF012
    output_type = "string"

    def __init__(self, probe: Probe, result_bytes: int) -> None:
        super().__init__()
        self.probe = probe
        self.result_bytes = result_bytes

    def forward(self, query: str) -> str:
        entered = self.probe.tool_enter()
        result = make_result(query, self.result_bytes)
        self.probe.tool_leave(entered)
        return result


def prepare(spec: RunSpec, probe: Probe) -> Callable[[], None]:
    """A fresh agent per run (an agent holds its run's memory)."""
    agent = ToolCallingAgent(
        tools=[Lookup(probe, spec.result_bytes)],
        model=ScriptedModel(Script(spec.steps), probe, spec.latency_s),
        instructions=SYSTEM_PROMPT,
        max_steps=spec.steps + 5,
        verbosity_level=LogLevel.OFF,
    )

    def run() -> None:
        if agent.run(TASK) != FINAL_ANSWER:
            raise RuntimeError("smolagents stopped before the final answer")

    return run
