"""A long run with huge outputs stays inside the context window and finishes (issue 3)."""

from __future__ import annotations

import pytest

from sp4rk.agent import CircuitBreakerConfig, Executor, ToolResultCache
from sp4rk.llm import ChatRequest, ChatResponse, SimpleTokenCounter
from sp4rk.llm.testing import FunctionLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow, validate_history
from sp4rk.tools import Registry, tool

STEPS = 10_000
MEGABYTE = 1 << 20


@pytest.mark.timeout(600)  # about a minute alone; several on a busy 2-core machine
async def test_ten_thousand_steps_with_megabyte_outputs() -> None:
    blobs = [c * MEGABYTE for c in "abcdefgh"]  # distinct contents: the cache must evict

    @tool
    async def fetch(i: int) -> str:
        """Return a 1 MB page."""
        return blobs[i % len(blobs)]

    window = ContextWindow(128_000, 4_096, task="read everything")
    counter = SimpleTokenCounter()
    largest = 0
    previous = 0  # messages in the previous prompt
    validated = 0

    def model(request: ChatRequest) -> ChatResponse:
        nonlocal largest, previous, validated
        largest = max(largest, counter.count_messages(request.messages))
        # Validating all 10 000 prompts would double the run time: every 50th, and every
        # prompt a compaction rewrote (it got shorter), where histories break if they do.
        if len(llm.requests) % 50 == 0 or len(request.messages) < previous:
            validate_history(request.messages)
            validated += 1
        previous = len(request.messages)
        n = len(llm.requests)
        return finish_response("done") if n > STEPS else tool_calls_response(("fetch", {"i": n}))

    llm = FunctionLLM(model)
    registry = Registry([fetch])
    # Same tool, varied arguments, same-size results: the same-tool breaker would (rightly)
    # stop this run; everything else stays at its default.
    breakers = CircuitBreakerConfig(
        same_tool_repeat_nudge_threshold=0, same_tool_repeat_abort_threshold=0
    )
    cache = ToolResultCache(max_bytes=4 * MEGABYTE)
    executor = Executor(llm, registry, STEPS + 1, circuit_breaker=breakers)
    executor.set_tool_cache(cache)
    result = await executor.run(registry.list(), window)
    assert result.finished and result.output == "done"
    assert sum(s.action is not None for s in result.steps) == STEPS + 1  # + the wrap-up nudge
    assert largest < window.effective_max()
    assert validated > STEPS // 50
    assert len(cache) <= 4  # bounded memory: least recently used results were dropped
    assert all(len(s.observation) < 200_000 for s in result.steps)  # Stage 2 cut every one
