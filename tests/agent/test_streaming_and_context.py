"""Streaming events (decisions #5) and the executor's use of the context manager."""

from __future__ import annotations

import pytest

from sp4rk.agent import Executor, FillCheck, RecordingEvents, VulnerableOutput
from sp4rk.llm import ContextWindowExceededError, TokenUsage
from sp4rk.llm.testing import (
    ScriptedStreamingLLM,
    finish_response,
    text_response,
    tool_calls_response,
)
from sp4rk.memory import ContextWindow

from .helpers import FakeContext, echo_tools, run


def test_a_streaming_caller_fires_one_chunk_per_delta() -> None:
    tools = echo_tools()
    events = RecordingEvents()
    llm = ScriptedStreamingLLM(
        [
            tool_calls_response(
                ("search", {"q": "a"}), thought="let me look this up", usage=TokenUsage(10, 5)
            ),
            finish_response("done"),
        ]
    )
    Executor(llm, tools, 5, events=events).run_sync(tools.list(), ContextWindow())
    chunks = [a[0] for a in events.of("assistant_chunk")]
    assert chunks == ["let", " me", " look", " this", " up"]
    assert events.of("assistant_done") == [("let me look this up", 10, 5), ("", 0, 0)]


def test_a_plain_caller_delivers_the_text_as_one_chunk() -> None:
    _, _, events = run(
        [tool_calls_response(("search", {"q": "a"}), thought="hello there"), finish_response("d")]
    )
    assert events.of("assistant_chunk") == [("hello there",)]
    assert len(events.of("assistant_done")) == 2


def test_suppression_hides_only_the_assistant_events() -> None:
    result, _, events = run(
        [text_response("a"), text_response("b"), text_response("c")], suppress_assistant_events=True
    )
    assert events.of("assistant_chunk") == [] and events.of("assistant_done") == []
    assert result.output == "c" and len(events.diagnostics("executor_finish_nudge")) == 2


@pytest.mark.parametrize("status", ["compact", "warning", "emergency"])
def test_post_step_fill_above_a_threshold_compacts(status: str) -> None:
    ok = FillCheck(40.0, "ok", 40, 100)
    cw = FakeContext(fill=[ok, FillCheck(90.0, status, 90, 100), ok])  # before the call, after
    result, _, events = run(
        [tool_calls_response(("search", {"q": "a"})), finish_response("d")],
        cw=cw,
        setup=lambda ex: ex.set_plan_context("plan-7", 1, 3),
    )
    assert cw.compactions == 1 and result.finished
    assert events.of("context_fill") == [(90.0, 90, 100, status, "plan-7")]
    assert events.of("context_compaction") == [(90.0, 40.0, "plan-7")]


def test_reject_that_survives_compaction_raises_a_clear_error() -> None:
    cw = FakeContext(fill=[FillCheck(120.0, "reject", 120, 100)])
    with pytest.raises(ContextWindowExceededError, match="full even after compaction"):
        run([tool_calls_response(("search", {"q": "a"})), finish_response("d")], cw=cw)


def test_reject_relieved_by_compaction_goes_on() -> None:
    cw = FakeContext(fill=[FillCheck(120.0, "reject", 120, 100), FillCheck(50.0, "ok", 50, 100)])
    result, _, _ = run([tool_calls_response(("search", {"q": "a"})), finish_response("d")], cw=cw)
    assert result.finished and cw.compactions == 1


def test_pre_compaction_warning_names_the_vulnerable_outputs_once() -> None:
    cw = FakeContext(
        fill=[FillCheck(82.0, "ok", 82_000, 100_000)],
        vulnerable=[VulnerableOutput("read_file", "src/app.py"), VulnerableOutput("search")],
    )
    script = [tool_calls_response(("search", {"q": str(i)})) for i in range(3)]
    result, _, events = run(
        [*script, finish_response("d")], cw=cw, setup=lambda ex: ex.set_pre_warning_percent(80)
    )
    warned = [s for s in result.steps if "will soon be pruned or dropped" in s.observation]
    assert len(warned) == 1
    assert '- read_file("src/app.py")\n- search\n' in warned[0].observation
    assert "store_fact" in warned[0].observation
    assert events.diagnostics("pre_compaction_nudge") == [
        {"fill_percent": pytest.approx(82.0, abs=0.1), "vulnerable_count": 2}
    ]
    # the warning is for the model only: the tool_result event saw the plain output
    assert all("will soon be pruned or dropped" not in e[3] for e in events.of("tool_result"))


def test_pre_warning_percent_is_validated() -> None:
    executor = Executor(ScriptedStreamingLLM([]), echo_tools(), 5)
    with pytest.raises(ValueError, match="between 0 and 100"):
        executor.set_pre_warning_percent(150)


def test_a_prompt_known_not_to_fit_is_compacted_before_it_is_sent() -> None:
    cw = FakeContext(fill=[FillCheck(130.0, "reject", 130, 100), FillCheck(40.0, "ok", 40, 100)])
    result, llm, events = run([finish_response("d")], cw=cw)
    assert cw.compactions == 1 and len(llm.requests) == 1 and result.finished
    assert events.of("context_compaction") == [(90.0, 40.0, "")]
