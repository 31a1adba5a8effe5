"""The floor: a bare append-only loop with the same scripted model and tool, nothing else."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from anchors.common import (
    FINAL_ANSWER,
    SYSTEM_PROMPT,
    TASK,
    TOOL_NAME,
    TOOL_PARAM,
    Probe,
    RunSpec,
    Script,
    make_result,
)

DISTRIBUTIONS: tuple[str, ...] = ()
CONCURRENCY = "asyncio"

Message = dict[str, Any]


def prepare(spec: RunSpec, probe: Probe) -> Callable[[], Awaitable[None]]:
    """One run of the loop: call the model, run its tool calls, append, repeat."""
    script = Script(spec.steps)

    async def model(messages: list[Message]) -> Message:
        entered = probe.model_enter()
        if spec.latency_s:
            await asyncio.sleep(spec.latency_s)
        query = script.next_query()
        if query is None:
            reply: Message = {"role": "assistant", "content": FINAL_ANSWER, "tool_calls": []}
        else:
            arguments = json.dumps({TOOL_PARAM: query})
            call = {"id": script.call_id(), "name": TOOL_NAME, "arguments": arguments}
            reply = {"role": "assistant", "content": "", "tool_calls": [call]}
        probe.model_leave(entered)
        return reply

    async def lookup(query: str) -> str:
        entered = probe.tool_enter()
        result = make_result(query, spec.result_bytes)
        probe.tool_leave(entered)
        return result

    tools = {TOOL_NAME: lookup}

    async def run() -> None:
        messages: list[Message] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": TASK},
        ]
        while True:
            reply = await model(messages)
            messages.append(reply)
            if not reply["tool_calls"]:
                return
            for call in reply["tool_calls"]:
                result = await tools[call["name"]](**json.loads(call["arguments"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})

    return run
