"""parallel_tool_calls: consecutive read-only calls of one response run concurrently."""

from __future__ import annotations

import asyncio

from sp4rk.agent import Executor, HITLHandler, HITLToolDecision
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry, RunContext, tool


def tools(log: list[str], both_running: asyncio.Event) -> Registry:
    in_flight: set[str] = set()

    @tool(read_only=True)
    async def lookup(key: str) -> str:
        """Read-only: waits until another lookup is running at the same time."""
        log.append(f"start {key}")
        in_flight.add(key)
        if len(in_flight) >= 2:
            both_running.set()
        await asyncio.wait_for(both_running.wait(), 5)
        log.append(f"end {key}")
        return f"value of {key} " + "." * 50

    @tool
    async def save(key: str) -> str:
        """Not read-only."""
        log.append(f"save {key}")
        return "saved " + "." * 50

    return Registry([lookup, save])


async def test_read_only_calls_overlap_and_results_keep_the_models_order() -> None:
    log: list[str] = []
    registry = tools(log, asyncio.Event())
    llm = ScriptedLLM(
        [
            tool_calls_response(
                ("lookup", {"key": "a"}), ("lookup", {"key": "b"}), ("save", {"key": "c"})
            ),
            finish_response("done"),
        ]
    )
    executor = Executor(llm, registry, 5, parallel_tool_calls=True)
    result = await executor.run(registry.list(), ContextWindow())
    assert log[:2] == ["start a", "start b"]  # both started before either ended
    assert log[-1] == "save c"
    assert [s.observation[:10] for s in result.steps[:3]] == [
        "value of a",
        "value of b",
        "saved ....",
    ]


async def test_without_the_option_calls_run_one_after_another() -> None:
    log: list[str] = []
    ready = asyncio.Event()
    ready.set()  # lookups do not wait for a partner here
    registry = tools(log, ready)
    llm = ScriptedLLM(
        [
            tool_calls_response(("lookup", {"key": "a"}), ("lookup", {"key": "b"})),
            finish_response("done"),
        ]
    )
    await Executor(llm, registry, 5).run(registry.list(), ContextWindow())
    assert log == ["start a", "end a", "start b", "end b"]


class RejectB(HITLHandler):
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        self.asked.append(input)
        return HITLToolDecision(allow=False, reason="no b") if '"b"' in input else None


async def test_approval_is_still_per_call_in_order() -> None:
    log: list[str] = []
    ready = asyncio.Event()
    ready.set()
    registry = tools(log, ready)
    hitl = RejectB()
    llm = ScriptedLLM(
        [
            tool_calls_response(
                ("lookup", {"key": "a"}), ("lookup", {"key": "b"}), ("lookup", {"key": "c"})
            ),
            finish_response("done"),
        ]
    )
    executor = Executor(llm, registry, 5, parallel_tool_calls=True, hitl=hitl)
    result = await executor.run(registry.list(), ContextWindow())
    assert hitl.asked == ['{"key": "a"}', '{"key": "b"}', '{"key": "c"}']
    assert [s.observation[:12] for s in result.steps[:3]] == [
        "value of a .",
        "[Tool call r",
        "value of c .",
    ]
    assert "start b" not in log


async def test_an_intercepted_call_in_a_batch_keeps_its_place() -> None:
    from sp4rk.agent import CircuitBreakerConfig

    log: list[str] = []
    ready = asyncio.Event()
    ready.set()
    registry = tools(log, ready)
    llm = ScriptedLLM(
        [
            tool_calls_response(
                ("lookup", {"key": "a"}), ("lookup", {"key": "a"}), ("lookup", {"key": "z"})
            ),
            finish_response("done"),
        ]
    )
    cfg = CircuitBreakerConfig(repeat_nudge_threshold=2, repeat_abort_threshold=9)
    executor = Executor(llm, registry, 5, parallel_tool_calls=True, circuit_breaker=cfg)
    result = await executor.run(registry.list(), ContextWindow())
    assert [s.observation[:12] for s in result.steps[:2]] == ["value of a .", "Not executed"]
    assert result.steps[2].tool_name == "finish"  # the call after the intercept was dropped
    assert log == ["start a", "end a"]
