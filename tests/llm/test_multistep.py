"""The scripted task runs unchanged, and identically, over all three wire formats."""

from __future__ import annotations

from typing import Any

import pytest

from sp4rk.agent import RecordingEvents
from sp4rk.agent.types import ExitReason
from tests.llm.conftest import ProviderFactory
from tests.llm.fakeserver import FakeServer
from tests.llm.task import SCRIPT, run_task, trajectory
from tests.llm.wire import WIRES

MODES = ["call", "stream"]


def _tool_results_sent(wire: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(call id, result) pairs in a request body, whatever its wire format."""
    if wire == "chat":
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    if wire == "responses":
        return [
            (i["call_id"], i["output"])
            for i in body["input"]
            if i.get("type") == "function_call_output"
        ]
    return [
        (b["tool_use_id"], b["content"])
        for m in body["messages"]
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


async def _run(wire: str, mode: str, server: FakeServer, make_provider: ProviderFactory) -> Any:
    path, as_json, as_sse = WIRES[wire]
    encode = as_sse if mode == "stream" else as_json
    server.queue(path, *[encode(turn) for turn in SCRIPT])
    provider = make_provider(wire)
    if mode == "call":  # hide call_stream so the executor takes the non-streaming path
        provider = _CallOnly(provider)
    events = RecordingEvents()
    result = await run_task(provider, events=events)
    return result, events


class _CallOnly:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def call(self, request: Any) -> Any:
        return await self._inner.call(request)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", list(WIRES))
async def test_scripted_task_over_each_wire_format(
    wire: str, mode: str, server: FakeServer, make_provider: ProviderFactory
) -> None:
    result, events = await _run(wire, mode, server, make_provider)

    assert result.finished
    assert result.exit_reason is ExitReason.FINISHED
    assert result.output == "42"
    actions = [(s.action.name, s.action.input) for s in result.steps if s.action]
    assert actions == [(n, a) for turn in SCRIPT for _, n, a in turn.calls]
    assert [s.observation for s in result.steps[:2]] == ["41", "42"]
    assert server.pending() == 0

    bodies = server.bodies(WIRES[wire][0])
    assert _tool_results_sent(wire, bodies[1]) == [("call_1", "41")]
    assert _tool_results_sent(wire, bodies[2]) == [("call_1", "41"), ("call_2", "42")]

    chunks = [args[0] for args in events.of("assistant_chunk")]
    done = events.of("assistant_done")
    assert [d[0] for d in done] == [turn.text for turn in SCRIPT]
    assert [(d[1], d[2]) for d in done] == [turn.usage for turn in SCRIPT]
    if mode == "stream":  # one event per delta
        assert len(chunks) > len([t for t in SCRIPT if t.text])
    else:  # the whole text as one chunk
        assert chunks == [t.text for t in SCRIPT if t.text]
    assert "".join(chunks) == "".join(t.text for t in SCRIPT)


async def test_every_wire_format_gives_the_same_trajectory(
    server: FakeServer, make_provider: ProviderFactory
) -> None:
    runs = [
        trajectory((await _run(wire, mode, server, make_provider))[0])
        for wire in WIRES
        for mode in MODES
    ]
    assert all(run == runs[0] for run in runs[1:])
