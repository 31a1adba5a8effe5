"""sp4rk: ``Executor`` with its defaults, driven by ``sp4rk.llm.testing.FunctionLLM``.

On: ``ContextWindow`` (pruning and compaction armed), both truncation stages (Stage 1 at 50 000
lines for the tool in S1-S3, never reached, and 5 000 in S4; Stage 2 the default budget), the
result cache, events (the default sink, through the executor's guarded dispatch) and every
circuit breaker but one. Off: the same-tool breaker, built to stop exactly this scenario's
pattern (one tool, fresh arguments, same-sized results) after 12 calls.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

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

from sp4rk.agent import (
    CircuitBreakerConfig,
    Events,
    Executor,
    ToolTruncationConfig,
    default_tool_truncation_config,
)
from sp4rk.llm.testing import FunctionLLM, finish_response, tool_calls_response
from sp4rk.llm.types import ChatRequest, ChatResponse, ToolCall
from sp4rk.memory import ContextWindow
from sp4rk.store import SQLiteRunStore, StoreJournal
from sp4rk.tools import Registry, tool

DISTRIBUTIONS = ("sp4rk",)
CONCURRENCY = "asyncio"

#: S1-S3: large enough that nothing is pruned or compacted, so every contender sends the same
#: full history (500 x 4 KB results fill about 5 % of it).
WINDOW_TOKENS = 10_000_000
#: S4: a common model window, so pruning, compaction and both truncation stages all work.
ENDURANCE_WINDOW_TOKENS = 128_000
#: S4's Stage 1 limit for the bench tool (the default of ripgrep, glob and list_directory).
ENDURANCE_STAGE1 = ToolTruncationConfig(max_lines=5_000)
#: S1-S3's Stage 1 limit for the bench tool: read_file's default, never reached, but measured.
STAGE1 = ToolTruncationConfig(max_lines=50_000)
BREAKERS = CircuitBreakerConfig(
    same_tool_repeat_nudge_threshold=0, same_tool_repeat_abort_threshold=0
)


def prepare(
    spec: RunSpec, probe: Probe, events: Events | None = None
) -> Callable[[], Awaitable[None]]:
    """A fresh executor and window for one run (sp4rk needs one executor per concurrent run).

    ``events`` replaces the default sink (``otel_overhead.py`` measures tracing with it).
    """
    script = Script(spec.steps)

    async def respond(request: ChatRequest) -> ChatResponse:
        llm.requests.clear()  # the double keeps a copy of every prompt: O(steps²) memory
        entered = probe.model_enter()
        if spec.latency_s:
            await asyncio.sleep(spec.latency_s)
        query = script.next_query()
        if query is None:
            response = finish_response(FINAL_ANSWER)
        else:
            arguments = json.dumps({TOOL_PARAM: query})
            response = tool_calls_response(ToolCall(script.call_id(), TOOL_NAME, arguments))
        probe.model_leave(entered)
        return response

    llm = FunctionLLM(respond)

    @tool(name=TOOL_NAME, description=TOOL_DESCRIPTION)
    async def lookup(query: str) -> str:
        """Look up a record.

        Args:
            query: The record to look up.
        """
        entered = probe.tool_enter()
        result = make_result(query, spec.result_bytes)
        probe.tool_leave(entered)
        return result

    registry = Registry([lookup])
    executor = Executor(llm, registry, spec.steps + 5, circuit_breaker=BREAKERS, events=events)
    window_tokens = ENDURANCE_WINDOW_TOKENS if spec.endurance else WINDOW_TOKENS
    stage1 = ENDURANCE_STAGE1 if spec.endurance else STAGE1
    executor.set_per_tool_truncation({**default_tool_truncation_config(), TOOL_NAME: stage1})
    window = ContextWindow(max_tokens=window_tokens, system_prompt=SYSTEM_PROMPT, task=TASK)

    async def run() -> None:
        if not spec.store:
            result = await executor.run(registry.list(), window)
        else:
            with tempfile.TemporaryDirectory(prefix="sp4rk-bench-") as folder:
                store = SQLiteRunStore(Path(folder) / "runs.db")
                record = store.create_run(task=TASK, workspace=folder, model="bench", settings={})
                executor.set_journal(StoreJournal(store, record.id))
                try:
                    result = await executor.run(registry.list(), window)
                finally:
                    store.close()
        if not result.finished:
            raise RuntimeError(f"sp4rk stopped early: {result.exit_reason}: {result.output}")

    return run
