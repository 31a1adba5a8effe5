"""Finish gates: the soft finish guard, the mutation gate, the checklist gate and its nudges."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sp4rk.agent import ExitReason, HITLHandler, HITLToolDecision
from sp4rk.llm.testing import finish_response, tool_calls_response
from sp4rk.tools import Registry, RunContext
from sp4rk.tools.builtins import update_checklist

from .helpers import echo_tools, nudges, run


def reads(n: int, start: int = 0) -> list[Any]:
    return [tool_calls_response(("read_file", {"path": f"f{i}"})) for i in range(start, start + n)]


def checklist(*items: tuple[str, bool]) -> Any:
    todo = "\n".join(f"- [{'x' if done else ' '}] {text}" for text, done in items)
    return tool_calls_response(("update_checklist", {"todo_list": todo}))


def with_checklist() -> Registry:
    registry = echo_tools()
    registry.register(update_checklist)
    return registry


# --- finish guard -------------------------------------------------------------------------


def test_finish_guard_rejects_once_then_accepts() -> None:
    asked: list[int] = []

    def guard(ctx: RunContext) -> str:
        asked.append(1)
        return "async sub-tasks are still running"

    result, llm, events = run(
        [finish_response("early"), finish_response("later")],
        setup=lambda ex: ex.set_finish_guard(guard),
    )
    assert result.finished and result.output == "later"
    assert len(asked) == 1  # soft: the second attempt is not asked again
    assert events.diagnostics("finish_guard_rejected") == [
        {"reason": "async sub-tasks are still running"}
    ]
    rejected = result.steps[0]
    assert rejected.tool_name == "finish" and "still running" in rejected.observation
    # the model saw its finish call answered with the reason
    assert "still running" in llm.requests[1].messages[-1].content


async def test_async_guard_and_raising_guard_both_reject_with_a_reason() -> None:
    async def async_guard(ctx: RunContext) -> str | None:
        return "wait"

    def raising_guard(ctx: RunContext) -> str | None:
        raise RuntimeError("checker crashed")

    for guard, reason in [(async_guard, "wait"), (raising_guard, "RuntimeError: checker crashed")]:
        result, _, events = await _run_async([finish_response("a"), finish_response("b")], guard)
        assert events.diagnostics("finish_guard_rejected") == [{"reason": reason}]
        assert result.output == "b"


async def _run_async(script: list[Any], guard: Any) -> Any:
    from sp4rk.agent import Executor, RecordingEvents
    from sp4rk.llm.testing import ScriptedLLM
    from sp4rk.memory import ContextWindow

    events = RecordingEvents()
    tools = echo_tools()
    executor = Executor(ScriptedLLM(script), tools, 5, events=events)
    executor.set_finish_guard(guard)
    return await executor.run(tools.list(), ContextWindow()), None, events


def test_a_guard_returning_none_or_blank_accepts() -> None:
    result, _, _ = run(
        [finish_response("ok")], setup=lambda ex: ex.set_finish_guard(lambda ctx: "  ")
    )
    assert result.finished and result.output == "ok"


# --- mutation gate ------------------------------------------------------------------------


def test_mutation_gate_nudges_then_ends_unfinished() -> None:
    result, _, events = run(
        [finish_response("first"), finish_response("second")],
        setup=lambda ex: ex.set_mutation_required(True),
    )
    assert not result.finished and result.exit_reason is ExitReason.MUTATION_REQUIRED
    assert result.output == "second"
    assert [d["reason"] for d in events.diagnostics("mutation_gate_nudge")] == [
        "finish_without_mutation"
    ]
    assert events.diagnostics("mutation_gate_rejected") == [
        {"reason": "finish_without_mutation_after_nudge"}
    ]


def test_a_successful_write_satisfies_the_mutation_gate() -> None:
    result, _, _ = run(
        [
            tool_calls_response(("write_file", {"path": "a", "content": "b"})),
            finish_response("done"),
        ],
        setup=lambda ex: ex.set_mutation_required(True),
    )
    assert result.finished and result.exit_reason is ExitReason.FINISHED


class RejectWrites(HITLHandler):
    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        return HITLToolDecision(allow=False) if tool_name == "write_file" else None


def test_a_rejected_write_does_not_count_as_a_mutation() -> None:
    result, _, _ = run(
        [
            tool_calls_response(("write_file", {"path": "a", "content": "b"})),
            finish_response("x"),
            finish_response("y"),
        ],
        hitl=RejectWrites(),
        setup=lambda ex: ex.set_mutation_required(True),
    )
    assert result.exit_reason is ExitReason.MUTATION_REQUIRED


def test_mutation_in_the_same_response_as_finish_counts() -> None:
    both = tool_calls_response(
        ("write_file", {"path": "a", "content": "b"}), ("finish", {"answer": "done"})
    )
    result, _, _ = run([both], setup=lambda ex: ex.set_mutation_required(True))
    assert result.finished


# --- checklist gate -----------------------------------------------------------------------


def test_missing_checklist_is_nudged_once_on_a_non_trivial_task() -> None:
    result, _, events = run(
        [*reads(3), finish_response("a"), finish_response("b")], tools=with_checklist()
    )
    assert events.diagnostics("checklist_gate_nudge") == [{"reason": "finish_without_checklist"}]
    assert result.finished and result.output == "b"


@pytest.mark.parametrize("variant", ["trivial", "unavailable", "gate_off"])
def test_no_checklist_nudge_when_trivial_unavailable_or_off(variant: str) -> None:
    tools = echo_tools() if variant == "unavailable" else with_checklist()
    script = [*reads(1 if variant == "trivial" else 3), finish_response("a")]
    result, _, events = run(
        script,
        tools=tools,
        setup=(
            (lambda ex: ex.set_checklist_gate_enabled(False)) if variant == "gate_off" else None
        ),
    )
    assert events.diagnostics("checklist_gate_nudge") == [] and result.output == "a"


def test_unchecked_items_are_nudged_once() -> None:
    script = [
        checklist(("one", True), ("two", False), ("three", False)),
        finish_response("a"),
        finish_response("b"),
    ]
    result, _, events = run(script, tools=with_checklist())
    assert events.diagnostics("checklist_unchecked_nudge") == [
        {"reason": "finish_with_unchecked_checklist", "unchecked": 2}
    ]
    assert result.output == "b"
    assert "2 checklist item(s)" in result.steps[1].observation


def test_a_complete_checklist_finishes_without_nudges() -> None:
    script = [checklist(("one", True), ("two", True)), finish_response("a")]
    result, _, events = run(script, tools=with_checklist())
    assert result.output == "a" and events.diagnostics() == []


def test_batching_feedback_praises_one_and_corrects_several() -> None:
    script = [
        checklist(("a", False), ("b", False), ("c", False), ("d", False)),  # init: no suffix
        checklist(("a", True), ("b", False), ("c", False), ("d", False)),  # one: praise
        checklist(("a", True), ("b", True), ("c", True), ("d", False), ("e", True)),  # batch of 2
        finish_response("x"),
        finish_response("y"),  # the first finish is nudged: 'd' is unchecked
    ]
    result, _, events = run(script, tools=with_checklist())
    obs = [s.observation for s in result.steps[:3]]
    assert "[Good:" not in obs[0] and "items in one update" not in obs[0]
    assert "[Good: one item checked" in obs[1]
    assert "You checked 2 items in one update" in obs[2]  # 'e' arrived checked: not counted
    assert events.diagnostics("checklist_batched_update") == [{"newly_checked": 2}]


def test_checklist_staleness_nudges_after_three_calls_at_most_twice() -> None:
    init = checklist(("a", False), ("b", False))
    result, _, events = run(
        [init, *reads(6), finish_response("x"), finish_response("y")],
        tools=with_checklist(),
        max_steps=20,
    )
    stale = events.diagnostics("checklist_stale_nudge")
    assert [d["calls_since_update"] for d in stale] == [3, 4]
    assert [d["nudge_count"] for d in stale] == [1, 2]
    assert sum("since your last checklist update" in n for n in nudges(result)) == 2


def test_no_staleness_without_an_initial_checklist() -> None:
    _, _, events = run(
        [*reads(5), finish_response("x"), finish_response("y")],
        tools=with_checklist(),
        max_steps=20,
    )
    assert events.diagnostics("checklist_stale_nudge") == []


def test_invalid_checklist_is_an_error_and_not_an_update() -> None:
    bad = tool_calls_response(("update_checklist", {"todo_list": "- [x] a\n- [X] b"}))
    result, _, _ = run([bad, finish_response("x")], tools=with_checklist())
    assert result.steps[0].is_error and "line 2" in result.steps[0].observation


# --- wrap-up ------------------------------------------------------------------------------


def test_wrap_up_nudge_fires_once_three_steps_before_the_budget() -> None:
    result, _, events = run([*reads(5), finish_response("x")], max_steps=6)
    assert events.diagnostics("executor_wrapup_nudge") == [{"remaining": 3, "mode": "default"}]
    assert result.finished


def test_wrap_up_after_recent_edits_says_keep_going() -> None:
    script = [
        tool_calls_response(("write_file", {"path": "a", "content": "b"})),
        *reads(4),
        finish_response("x"),
    ]
    _, _, events = run(script, max_steps=6)
    assert events.diagnostics("executor_wrapup_nudge")[0]["mode"] == "active_progress"


def test_no_wrap_up_on_tiny_budgets() -> None:
    _, _, events = run([*reads(2), finish_response("x")], max_steps=3)
    assert events.diagnostics("executor_wrapup_nudge") == []


def test_checklist_todo_callback_receives_items() -> None:
    seen: list[tuple[str, list[tuple[str, bool]]]] = []
    ctx = RunContext(step_id="s1", step_todo_update=lambda sid, items: seen.append((sid, items)))
    run(
        [checklist(("a", True), ("b", False)), finish_response("x"), finish_response("y")],
        tools=with_checklist(),
        ctx=ctx,
    )
    assert seen == [("s1", [("a", True), ("b", False)])]
    assert json.dumps(seen)


def test_a_guard_returning_a_non_string_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="must return a reason"):
        run([finish_response("x")], setup=lambda ex: ex.set_finish_guard(lambda ctx: True))


async def test_a_hanging_async_guard_counts_as_a_rejection(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from sp4rk.agent._loop import settings as state

    monkeypatch.setattr(state, "HOST_CALLBACK_TIMEOUT", 0.01)

    async def hangs(ctx: RunContext) -> str | None:
        await asyncio.Event().wait()
        return None

    result, _, events = await _run_async([finish_response("a"), finish_response("b")], hangs)
    assert "did not answer" in events.diagnostics("finish_guard_rejected")[0]["reason"]
    assert result.output == "b"


def test_mutation_and_checklist_gates_apply_to_an_implicit_finish() -> None:
    from sp4rk.llm.testing import text_response

    result, _, events = run(
        [
            *reads(3),
            text_response("a"),
            text_response("b"),
            text_response("c"),
            text_response("d"),
            text_response("e"),
        ],
        tools=with_checklist(),
        setup=lambda ex: ex.set_mutation_required(True),
    )
    assert events.diagnostics("mutation_gate_nudge") == [{"reason": "finish_without_mutation"}]
    assert result.exit_reason is ExitReason.MUTATION_REQUIRED and result.output == "d"
    checked, _, events = run(
        [*reads(3), text_response("a"), text_response("b"), text_response("c"), text_response("d")],
        tools=with_checklist(),
    )
    assert events.diagnostics("checklist_gate_nudge") == [{"reason": "finish_without_checklist"}]
    assert checked.exit_reason is ExitReason.IMPLICIT_FINISH and checked.output == "d"
