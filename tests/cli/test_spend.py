"""Budgets and spend through the real command: ``--max-cost``, ``--max-tokens``, ``--max-time``,
``--max-tool-calls``; spend shown live, in ``--json``, ``runs`` and ``show``; unknown costs
shown as unknown, never as $0."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sp4rk.llm import ChatResponse, Message, TokenUsage, ToolCall
from sp4rk.store import SQLiteRunStore
from tests.cli.helpers import Sp4rk, call, done, events, reply
from tests.llm.fakeserver import FakeServer
from tests.llm.wire import Turn, chat_sse


def globs(n: int, usage: tuple[int, int] = (0, 0)) -> list[dict[str, Any]]:
    """``n`` replies, each one call of ``glob`` with a fresh pattern."""
    used = {"input_tokens": usage[0], "output_tokens": usage[1]}
    return [{**reply(call("glob", pattern=f"*.{i}")), "usage": used} for i in range(n)]


def of(lines: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [e for e in lines if e["event"] == event]


def test_the_tool_call_budget_ends_the_run_unfinished_and_resume_raises_it(sp4rk: Sp4rk) -> None:
    assert sp4rk.run([*globs(3), *done()], "--max-tool-calls", "2", "--json") == 4
    result = sp4rk.result()
    assert result["exit_reason"] == "budget_exhausted" and not result["finished"]
    assert result["exhausted_limit"] == "max_tool_calls"
    run_id = result["run_id"]
    first = of(events(sp4rk.out), "run")[0]
    assert first["budget"] == {"max_tool_calls": 2}
    shown = sp4rk.shown(run_id)
    assert shown["run"]["status"] == "stopped"
    assert [s["action"]["name"] for s in shown["steps"] if s["action"]] == ["glob", "glob"]
    assert shown["spent"]["tool_calls"] == 2 and shown["spent"]["exhausted"] == "max_tool_calls"
    assert shown["budget"] == {"max_tool_calls": 2}

    # The whole run may make 10 calls now: the 2 already made count.
    assert sp4rk("resume", run_id, "--max-tool-calls", "10", "--json") == 0, sp4rk.out
    assert sp4rk.result()["finished"]
    shown = sp4rk.shown(run_id)
    assert shown["budget"] == {"max_tool_calls": 10}
    assert shown["spent"]["tool_calls"] == 3  # the third glob; finish is not a tool call


def test_a_call_cut_short_by_a_crash_is_counted_and_priced_on_resume(sp4rk: Sp4rk) -> None:
    assert sp4rk.run([*globs(3), *done()], "--max-tool-calls", "1", "--json") == 4
    run_id = sp4rk.result()["run_id"]
    # The process dies while the next response's call runs: the response and the call's
    # start are durable, nothing after them (what a kill -9 there leaves in the store).
    store = SQLiteRunStore(sp4rk.store)
    state = store.state(run_id)
    assert state is not None and state.budget.tool_calls == 1
    group, step = state.response_groups + 1, state.iteration + 1
    cut = ToolCall("cut", "glob", '{"pattern": "*.cut"}')
    response = ChatResponse(
        message=Message("assistant", tool_calls=[cut]), model="scripted", usage=TokenUsage(7, 3)
    )
    store.record_response(run_id, group, step, response)
    store.record_call_start(run_id, group, 0, step, cut)
    store.close()

    assert sp4rk("resume", run_id, "--max-tool-calls", "10", "--json") == 0, sp4rk.out
    result = sp4rk.result()
    assert result["finished"] and result["cost_usd"] == 0.0  # the scripted model is free
    spent = sp4rk.shown(run_id)["spent"]
    ran = [s["action"]["input"] for s in sp4rk.shown(run_id)["steps"] if s["action"]]
    assert ran[:3] == ['{"pattern": "*.0"}', '{"pattern": "*.cut"}', '{"pattern": "*.2"}']
    assert spent["tool_calls"] == 3  # the one the crash cut short counts too
    assert spent["unpriced_calls"] == 0 and spent["input_tokens"] == 7


def test_the_plain_view_names_the_budget_and_how_to_go_on(sp4rk: Sp4rk) -> None:
    assert sp4rk.run([*globs(3), *done()], "--max-tool-calls", "1") == 4
    run_id = SQLiteRunStore(sp4rk.store).get_run("last").id
    assert "budget: 1 tool calls" in sp4rk.err
    assert "the tool-call budget: stop" in sp4rk.err  # no terminal: the limit is not extended
    assert "the tool-call budget is used up" in sp4rk.err
    assert f"sp4rk resume {run_id} and a larger --max-tool-calls" in sp4rk.err
    assert sp4rk("show", run_id) == 0
    assert "budget: 1 tool calls" in sp4rk.out
    assert "the tool-call budget was used up" in sp4rk.out
    assert "1 tool calls" in sp4rk.out.split("spent:")[1].splitlines()[0]


def test_the_token_budget_stops_before_a_call_that_could_cross_it(sp4rk: Sp4rk) -> None:
    # A window of 8000 tokens reserves 1000 for the output: each call is checked as its
    # prompt (about 1000 tokens, as the script reports) plus 1000, so the fourth does not fit.
    (sp4rk.workspace / "sp4rk.toml").write_text("context_tokens = 8000\n")
    replies = [*globs(8, usage=(1000, 100)), *done()]
    assert sp4rk.run(replies, "--max-tokens", "5000", "--json") == 4
    result = sp4rk.result()
    assert result["exhausted_limit"] == "max_total_tokens"
    assert (result["input_tokens"], result["output_tokens"]) == (3000, 300)  # three calls
    usage = of(events(sp4rk.out), "usage")
    assert [u["input_tokens"] for u in usage] == [1000, 2000, 3000]
    assert usage[-1]["limits"]["max_total_tokens"] == {"spent": 3300, "max": 5000}
    assert usage[-1]["used_percent"] == 66.0
    assert "3,000 in + 300 out tokens" in usage[-1]["summary"]
    assert "3,300 of 5,000 tokens (66%)" in usage[-1]["budget"]


def test_the_cost_budget_prices_calls_with_the_configured_price(sp4rk: Sp4rk) -> None:
    (sp4rk.workspace / "sp4rk.toml").write_text(
        "context_tokens = 1000\nprice = { input = 1000.0, output = 1000.0 }\n"
    )  # $0.001 a token; a call of 100 + 10 tokens costs $0.11
    replies = [*globs(5, usage=(100, 10)), *done()]
    assert sp4rk.run(replies, "--max-cost", "0.25", "--json") == 4
    result = sp4rk.result()
    assert result["exhausted_limit"] == "max_cost_usd"
    assert result["cost_usd"] == pytest.approx(0.11)
    assert sp4rk("runs", "--json") == 0
    assert json.loads(sp4rk.out)[0]["cost_usd"] == pytest.approx(0.11)


def test_a_time_budget_is_taken_as_a_duration(sp4rk: Sp4rk) -> None:
    assert sp4rk.run([*globs(1), *done()], "--max-time", "10m", "--json") == 0
    assert of(events(sp4rk.out), "run")[0]["budget"] == {"max_seconds": 600.0}
    assert sp4rk.run([*done()], "--max-time", "soon") == 2
    assert "--max-time must be seconds or a duration like 90s, 10m or 1h" in sp4rk.err


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--max-cost", "0"), ("--max-tokens", "-5"), ("--max-tool-calls", "0"), ("--max-time", "0")],
)
def test_a_budget_must_be_positive(sp4rk: Sp4rk, flag: str, value: str) -> None:
    assert sp4rk.run(done(), flag, value) == 2
    assert f"{flag} must be" in sp4rk.err and "above 0" in sp4rk.err
    assert not sp4rk.store.exists()  # refused before the store was opened


def test_budget_settings_in_the_workspace_file_are_checked(sp4rk: Sp4rk) -> None:
    (sp4rk.workspace / "sp4rk.toml").write_text('max_tokens = "lots"\n')
    assert sp4rk.run(done()) == 1
    assert "max_tokens must be a whole number above 0" in sp4rk.err
    (sp4rk.workspace / "sp4rk.toml").write_text('max_time = "2m"\nmax_tool_calls = 5\n')
    assert sp4rk.run(done(), "--json") == 0
    assert of(events(sp4rk.out), "run")[0]["budget"] == {"max_seconds": 120.0, "max_tool_calls": 5}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


def serve(server: FakeServer, *turns: Turn) -> None:
    server.queue("/v1/chat/completions", *(chat_sse(t) for t in turns))


def test_an_unpriced_model_has_an_unknown_cost_never_zero(sp4rk: Sp4rk, server: FakeServer) -> None:
    serve(
        server,
        Turn(calls=[("c1", "glob", '{"pattern": "*"}')], usage=(120, 8)),
        Turn(calls=[("c2", "finish", '{"answer": "ok"}')], usage=(150, 5)),
    )
    model = ("--model", "openai-compatible:test-model", "--base-url", f"{server.url}/v1")
    assert sp4rk("run", "go", "-w", str(sp4rk.workspace), *model, "--json") == 0, sp4rk.out
    result = sp4rk.result()
    assert result["cost_usd"] is None and (result["input_tokens"], result["output_tokens"]) == (
        270,
        13,
    )
    usage = of(events(sp4rk.out), "usage")
    assert [u["cost_usd"] for u in usage] == [None, None]
    assert "cost unknown" in usage[0]["summary"]
    run_id = result["run_id"]

    assert sp4rk("runs") == 0
    row = next(line for line in sp4rk.out.splitlines() if line.startswith(run_id))
    assert "unknown" in row and "$0" not in row
    assert sp4rk("show", run_id) == 0
    assert "cost unknown" in sp4rk.out.splitlines()[0] and "$0" not in sp4rk.out
    assert sp4rk("runs", "--json") == 0
    assert json.loads(sp4rk.out)[0]["cost_usd"] is None

    # A cost budget needs the price: refused before anything is sent or stored.
    runs = len(SQLiteRunStore(sp4rk.store).list_runs())
    requests = len(server.received)
    assert sp4rk("run", "go", "-w", str(sp4rk.workspace), *model, "--max-cost", "1") == 2
    assert "--max-cost needs the price of openai-compatible:test-model" in sp4rk.err
    assert "price = { input = USD, output = USD }" in sp4rk.err
    assert len(server.received) == requests
    assert len(SQLiteRunStore(sp4rk.store).list_runs()) == runs


def test_a_configured_price_applies_whatever_name_the_server_reports(
    sp4rk: Sp4rk, server: FakeServer
) -> None:
    (sp4rk.workspace / "sp4rk.toml").write_text("price = { input = 2.0, output = 10.0 }\n")
    serve(server, Turn(calls=[("c1", "finish", '{"answer": "ok"}')], usage=(1000, 100)))
    model = ("--model", "openai-compatible:my-model", "--base-url", f"{server.url}/v1")
    assert sp4rk("run", "go", "-w", str(sp4rk.workspace), *model, "--json") == 0, sp4rk.out
    assert sp4rk.result()["cost_usd"] == pytest.approx(0.003)  # 1000 × $2/M + 100 × $10/M


def test_a_free_model_costs_zero_and_the_view_shows_spend_after_each_call(
    sp4rk: Sp4rk, tmp_path: Path
) -> None:
    assert sp4rk.run([*globs(1, usage=(50, 5)), *done()]) == 0
    assert "Σ 50 in + 5 out tokens · $0.00 · " in sp4rk.err
    assert "finished (finished)" in sp4rk.err and "$0.0000" in sp4rk.err.splitlines()[-1]
