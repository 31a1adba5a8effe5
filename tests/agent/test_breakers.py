"""Circuit breakers: each nudges and aborts at exactly its configured counts (decisions #7, #8)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sp4rk.agent import (
    CircuitBreakerConfig,
    ExitReason,
    NudgeKind,
    StepLimitResponse,
)
from sp4rk.agent.breakers import compact_json
from sp4rk.llm.testing import finish_response, tool_calls_response
from sp4rk.tools import Registry, ToolTraits, tool

from .helpers import Reprieve, echo_tools, nudges, only, run


def same_search(n: int) -> list[Any]:
    return [tool_calls_response(("search", {"q": "same"})) for _ in range(n)]


# --- repeat -------------------------------------------------------------------------------


def test_repeat_defaults_run_two_nudge_one_abort_on_the_fourth() -> None:
    calls: list[tuple[str, str]] = []
    result, _, events = run(same_search(4), tools=echo_tools(calls))
    assert len(calls) == 2
    assert [d["repeat_count"] for d in events.diagnostics("repeated_tool_call_nudge")] == [3]
    assert events.diagnostics("repeated_tool_call_abort") == [{"tool": "search", "repeat_count": 4}]
    assert result.exit_reason is ExitReason.REPEAT_ABORT and not result.finished
    assert result.output.startswith("Aborted:") and "4 times" in result.output


def test_an_identical_call_whose_result_changes_is_polling_not_a_repeat() -> None:
    progress = iter(range(0, 100, 10))

    @tool
    def status(job: str) -> str:
        """The job's progress."""
        return f"{job}: {next(progress)}% done"

    script = [tool_calls_response(("status", {"job": "build"})) for _ in range(8)]
    result, _, events = run([*script, finish_response("built")], tools=Registry([status]))
    assert result.finished
    assert events.diagnostics("repeated_tool_call_nudge") == []


def test_a_pollable_tool_may_repeat_unchanged() -> None:
    @tool(traits=ToolTraits(pollable=True))
    def status(job: str) -> str:
        """The job's status."""
        return "running"

    script = [tool_calls_response(("status", {"job": "build"})) for _ in range(8)]
    result, _, _ = run([*script, finish_response("built")], tools=Registry([status]), max_steps=20)
    assert result.finished
    assert not [s for s in result.steps if s.nudge_kind in (NudgeKind.BREAKER, NudgeKind.REPRIEVE)]


def test_repeat_counts_whitespace_variants_as_identical() -> None:
    script = [
        tool_calls_response(("search", raw))
        for raw in ['{"q":"same"}', '{ "q" : "same" }', '{"q":\n"same"}']
    ]
    _, _, events = run(
        script, circuit_breaker=only(repeat_nudge_threshold=2, repeat_abort_threshold=3)
    )
    assert len(events.diagnostics("repeated_tool_call_nudge")) == 1
    assert len(events.diagnostics("repeated_tool_call_abort")) == 1


def test_repeat_nudged_calls_do_not_run_and_answer_the_call() -> None:
    calls: list[tuple[str, str]] = []
    result, _, _ = run([*same_search(3), finish_response("x")], tools=echo_tools(calls))
    assert len(calls) == 2
    nudged = result.steps[2]
    assert nudged.is_error and nudged.observation.startswith("Not executed")


def test_repeat_reacts_one_call_earlier_when_the_call_fails() -> None:
    calls: list[tuple[str, str]] = []
    script = [tool_calls_response(("fail", {"q": "x"})) for _ in range(3)]
    result, _, _ = run(
        script,
        tools=echo_tools(calls),
        circuit_breaker=only(repeat_nudge_threshold=3, repeat_abort_threshold=4),
    )
    assert len(calls) == 1  # nudged at the 2nd identical call, aborted at the 3rd
    assert "will fail again" in result.steps[1].observation
    assert result.exit_reason is ExitReason.REPEAT_ABORT


@pytest.mark.parametrize("answer", [StepLimitResponse.ALLOW_ONCE, StepLimitResponse.ALLOW_MORE])
def test_repeat_abort_reprieve_resets_the_counter(answer: StepLimitResponse) -> None:
    hitl = Reprieve(answer)
    cfg = only(repeat_nudge_threshold=3, repeat_abort_threshold=4)
    calls: list[tuple[str, str]] = []
    result, _, events = run(
        [*same_search(6), finish_response("x")],
        circuit_breaker=cfg,
        hitl=hitl,
        max_steps=10,
        tools=echo_tools(calls),
    )
    assert hitl.reasons == ["repeat"]
    assert result.finished
    expected = "let you continue" if answer is StepLimitResponse.ALLOW_MORE else "one more chance"
    assert any(expected in n for n in nudges(result))
    # counter reset: calls 5 and 6 count 1 and 2, below the nudge threshold, so they run
    assert len(events.diagnostics("repeated_tool_call_nudge")) == 1
    assert len(calls) == 4


def test_allow_always_switches_the_abort_off_for_this_run_only() -> None:
    cfg = only(repeat_nudge_threshold=3, repeat_abort_threshold=4)
    hitl = Reprieve(StepLimitResponse.ALLOW_ALWAYS)
    result, _, events = run(
        [*same_search(9), finish_response("x")], circuit_breaker=cfg, hitl=hitl, max_steps=12
    )
    assert hitl.reasons == ["repeat"] and result.finished
    assert len(events.diagnostics("repeated_tool_call_abort")) == 1
    again, _, _ = run(same_search(4), circuit_breaker=cfg)  # a new run: abort is back
    assert again.exit_reason is ExitReason.REPEAT_ABORT


# --- fruitless ----------------------------------------------------------------------------


def empties(n: int) -> list[Any]:
    return [tool_calls_response(("empty", {"q": str(i)})) for i in range(n)]


def test_fruitless_nudges_once_at_its_threshold() -> None:
    cfg = only(fruitless_nudge_threshold=5, fruitless_abort_threshold=8)
    result, _, events = run([*empties(6), finish_response("x")], circuit_breaker=cfg)
    assert events.diagnostics("fruitless_nudge") == [{"consecutive": 5}]
    assert result.finished
    nudged = result.steps[4]
    assert nudged.action is not None and "last 5 tool calls" in nudged.user_nudge


def test_fruitless_aborts_at_its_threshold() -> None:
    cfg = only(fruitless_nudge_threshold=5, fruitless_abort_threshold=8)
    result, _, events = run(empties(8), circuit_breaker=cfg)
    assert events.diagnostics("fruitless_abort") == [{"consecutive": 8}]
    assert result.exit_reason is ExitReason.FRUITLESS_ABORT
    assert "empty or minimal results" in result.output


def test_fruitless_is_reset_by_a_substantial_result_and_ignores_errors_and_edits() -> None:
    cfg = only(fruitless_nudge_threshold=4, fruitless_abort_threshold=6)
    script = [
        *empties(3),
        tool_calls_response(("search", {"q": "big"})),
        *empties(3),
        *[tool_calls_response(("fail", {"q": str(i)})) for i in range(3)],
        *[tool_calls_response(("edit_file", {"path": str(i)})) for i in range(5)],
        finish_response("x"),
    ]
    _, _, events = run(script, circuit_breaker=cfg, max_steps=30)
    assert events.diagnostics("fruitless_nudge") == []


def test_fruitless_abort_allow_always_never_aborts_again() -> None:
    cfg = only(fruitless_nudge_threshold=5, fruitless_abort_threshold=8)
    hitl = Reprieve(StepLimitResponse.ALLOW_ALWAYS)
    result, _, _ = run(
        [*empties(20), finish_response("x")], circuit_breaker=cfg, hitl=hitl, max_steps=30
    )
    assert hitl.reasons == ["fruitless"] and result.finished


# --- same tool ----------------------------------------------------------------------------


def _sized_tool() -> Registry:
    @tool(read_only=True)
    def probe(q: str, size: int = 50) -> str:
        """Return `size` characters: the same text whatever the query (nothing new)."""
        return "." * size

    @tool
    def other(q: str) -> str:
        """Another tool."""
        return "o" * 50

    return Registry([probe, other])


def probes(n: int, size: int = 50) -> list[Any]:
    return [tool_calls_response(("probe", {"q": f"v{i}", "size": size})) for i in range(n)]


def test_same_tool_nudges_and_aborts_at_exactly_its_thresholds() -> None:
    cfg = only(
        same_tool_repeat_nudge_threshold=8,
        same_tool_repeat_abort_threshold=12,
        same_tool_result_size_delta=64,
    )
    result, _, events = run(probes(12), tools=_sized_tool(), circuit_breaker=cfg, max_steps=20)
    assert events.diagnostics("same_tool_repeat_nudge") == [{"tool": "probe", "consecutive": 8}]
    assert events.diagnostics("same_tool_repeat_abort") == [{"tool": "probe", "consecutive": 12}]
    assert result.exit_reason is ExitReason.SAME_TOOL_ABORT
    assert "similar results" in result.output


def test_same_tool_resets_on_another_tool_or_a_different_size() -> None:
    cfg = only(
        same_tool_repeat_nudge_threshold=4,
        same_tool_repeat_abort_threshold=6,
        same_tool_result_size_delta=64,
    )
    script = [
        *probes(3),
        tool_calls_response(("other", {"q": "x"})),
        *probes(3),
        tool_calls_response(("probe", {"q": "big", "size": 500})),
        *probes(3),
        finish_response("x"),
    ]
    _, _, events = run(script, tools=_sized_tool(), circuit_breaker=cfg, max_steps=30)
    assert events.diagnostics("same_tool_repeat_nudge") == []


def test_same_tool_ignores_identical_arguments_and_exempt_tools() -> None:
    cfg = only(same_tool_repeat_nudge_threshold=3, same_tool_repeat_abort_threshold=5)
    script = [tool_calls_response(("probe", {"q": "v0"})) for _ in range(4)]
    script += [
        tool_calls_response(("write_file", {"path": str(i), "content": "c"})) for i in range(6)
    ]
    _, _, events = run([*script, finish_response("x")], tools=_with_writes(), circuit_breaker=cfg)
    assert events.diagnostics("same_tool_repeat_nudge") == []


def _with_writes() -> Registry:
    reg = _sized_tool()
    writes = echo_tools().get("write_file")
    assert writes is not None
    reg.register(writes)
    return reg


# --- parse errors -------------------------------------------------------------------------


def bad(tool_name: str = "search") -> Any:
    return tool_calls_response((tool_name, '{"q": '))


def test_parse_error_note_then_abort_on_the_third_in_a_row() -> None:
    raw = '{"q": ' + "z" * 2000
    result, _, events = run(
        [tool_calls_response(("search", raw)), bad(), bad()],
        circuit_breaker=only(parse_error_abort_threshold=3),
    )
    first = result.steps[0].observation
    assert first.startswith("failed to parse input")
    assert "Parse error 1 in a row" in first and "match its schema, as JSON only" in first
    assert first.count("failed to parse input") == 1  # the error is not repeated in the note
    assert "z" * 290 in first and "z" * 300 not in first  # arguments excerpt ≤ 300 chars
    assert [d["consecutive_parse_errors"] for d in events.diagnostics("parse_error_nudge")] == [
        1,
        2,
    ]
    assert result.exit_reason is ExitReason.PARSE_ERROR_ABORT
    assert "failed to parse input 3 times" in result.output
    assert "The last error: failed to parse input" in result.output  # why, not only how often


def test_parse_error_count_is_per_tool_and_reset_by_success() -> None:
    script = [
        bad(),
        bad("read_file"),
        bad(),
        tool_calls_response(("search", {"q": "ok"})),
        bad(),
        bad(),
        finish_response("x"),
    ]
    _, _, events = run(script, circuit_breaker=only(parse_error_abort_threshold=3))
    counts = [d["consecutive_parse_errors"] for d in events.diagnostics("parse_error_nudge")]
    assert counts == [1, 1, 1, 1, 2]


def test_parse_error_abort_allow_more_keeps_the_budget() -> None:
    hitl = Reprieve(StepLimitResponse.ALLOW_MORE)
    result, llm, _ = run(
        [bad(), bad(), bad(), finish_response("x")],
        hitl=hitl,
        circuit_breaker=only(parse_error_abort_threshold=3),
        max_steps=4,
    )
    assert hitl.reasons == ["parse_error"]
    assert result.finished and len(llm.requests) == 4
    assert any("let you continue" in n for n in nudges(result))


def test_bad_finish_input_is_rejected_and_counts_as_a_parse_error() -> None:
    result, _, events = run(
        [tool_calls_response(("finish", '{"answer": 42}')), finish_response("real answer")],
        circuit_breaker=only(parse_error_abort_threshold=3),
    )
    assert result.steps[0].is_error and 'string "answer"' in result.steps[0].observation
    assert events.diagnostics("parse_error_nudge")[0]["tool"] == "finish"
    assert result.output == "real answer"


# --- truncation ---------------------------------------------------------------------------


def cut(*calls: tuple[str, Any]) -> Any:
    return tool_calls_response(*calls, stop_reason="max_tokens")


def test_truncated_response_runs_none_of_its_calls_and_records_each() -> None:
    calls: list[tuple[str, str]] = []
    result, _, events = run(
        [
            cut(("write_file", {"path": "a", "content": "x" * 10}), ("search", {"q": "b"})),
            finish_response("x"),
        ],
        tools=echo_tools(calls),
    )
    assert calls == []
    assert [s.tool_name for s in result.steps[:2]] == ["write_file", "search"]
    assert all(s.is_error and "Not executed" in s.observation for s in result.steps[:2])
    assert "output-token limit" in result.steps[1].user_nudge
    assert events.diagnostics("truncation_detected") == [{"tool": "write_file", "consecutive": 1}]
    assert result.finished


def test_three_truncations_in_a_row_abort_after_asking() -> None:
    hitl = Reprieve()
    result, _, _ = run([cut(("search", {"q": str(i)})) for i in range(3)], hitl=hitl)
    assert hitl.reasons == ["truncation"]
    assert result.exit_reason is ExitReason.TRUNCATION_ABORT and "truncated" in result.output


def test_a_normal_tool_response_resets_the_truncation_count() -> None:
    script = [
        cut(("search", {"q": "1"})),
        cut(("search", {"q": "2"})),
        tool_calls_response(("search", {"q": "ok"})),
        cut(("search", {"q": "3"})),
        cut(("search", {"q": "4"})),
        finish_response("x"),
    ]
    result, _, _ = run(script)
    assert result.finished


def test_compact_json_keeps_strings_and_numbers() -> None:
    assert compact_json('{ "a" : "x  y", "b" : 1.50 }') == '{"a":"x  y","b":1.50}'
    assert compact_json('{"a": "quote \\" inside  "}') == '{"a":"quote \\" inside  "}'
    assert compact_json("not json  at all") == "notjsonatall"


def test_same_tool_abort_reprieve_resets_and_rearms_the_nudge() -> None:
    cfg = only(
        same_tool_repeat_nudge_threshold=2,
        same_tool_repeat_abort_threshold=3,
        same_tool_result_size_delta=64,
    )
    hitl = Reprieve(StepLimitResponse.ALLOW_ONCE)
    result, _, events = run(
        [*probes(6), finish_response("x")],
        tools=_sized_tool(),
        circuit_breaker=cfg,
        hitl=hitl,
        max_steps=20,
    )
    assert hitl.reasons == ["same_tool", "same_tool"]  # reprieved once, then denied
    # the reprieve re-armed the one-shot nudge: it fires again at 2
    assert [d["consecutive"] for d in events.diagnostics("same_tool_repeat_nudge")] == [2, 2]
    assert result.exit_reason is ExitReason.SAME_TOOL_ABORT
    assert any("one more chance" in n for n in nudges(result))


@pytest.mark.parametrize("answer", [StepLimitResponse.ALLOW_ONCE, StepLimitResponse.ALLOW_MORE])
def test_fruitless_abort_reprieve_resets_the_count(answer: StepLimitResponse) -> None:
    cfg = only(fruitless_nudge_threshold=2, fruitless_abort_threshold=3)
    hitl = Reprieve(answer)
    result, _, events = run([*empties(5), finish_response("x")], circuit_breaker=cfg, hitl=hitl)
    assert hitl.reasons == ["fruitless"] and result.finished
    assert [d["consecutive"] for d in events.diagnostics("fruitless_nudge")] == [2, 2]


def test_truncation_abort_reprieve_lets_the_run_go_on() -> None:
    hitl = Reprieve(StepLimitResponse.ALLOW_ONCE)
    result, _, _ = run(
        [*(cut(("search", {"q": str(i)})) for i in range(4)), finish_response("x")],
        hitl=hitl,
        circuit_breaker=only(truncation_abort_threshold=3),
    )
    assert hitl.reasons == ["truncation"] and result.finished
    assert any("truncation safeguard tripped" in n for n in nudges(result))


@pytest.mark.parametrize(
    ("field", "value", "error", "says"),
    [
        ("repeat_abort_threshold", True, TypeError, "whole number"),
        ("repeat_abort_threshold", 2.5, TypeError, "not float 2.5"),
        ("fruitless_nudge_threshold", "3", TypeError, "not str '3'"),
        ("same_tool_repeat_abort_threshold", None, TypeError, "not NoneType"),
        ("parse_error_abort_threshold", -1, ValueError, ">= 0"),
        ("cycle_max_period", 9, ValueError, "at most 8"),
    ],
)
def test_breaker_config_refuses_values_that_cannot_be_thresholds(
    field: str, value: object, error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=re.escape(says)):
        CircuitBreakerConfig(**{field: value})  # type: ignore[arg-type]


def test_no_progress_state_round_trips_without_its_index() -> None:
    from sp4rk.agent.breakers import CallResult, NoProgressBreaker

    cfg = CircuitBreakerConfig()
    breaker = NoProgressBreaker()
    seen = CallResult(tool="t", key="t:{}", content="x", is_error=False, digest="d")
    breaker.observe(seen, cfg)
    data = breaker.to_dict()
    assert "_index" not in data and len(data["seen"]) == 1
    restored = NoProgressBreaker.from_dict(data)
    restored.observe(seen, cfg)  # the index is rebuilt from ``seen``: the pair is known
    assert restored.count == 1
    restored.forget()
    restored.observe(seen, cfg)
    assert restored.count == 0
