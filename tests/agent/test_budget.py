"""The run's budget: each limit ends a run exactly where it would be crossed, before spending.

The context double has a fixed fill of 100 tokens and an output limit of 50, so every model
call reserves 100 input + 50 output tokens; every scripted response reports 100 + 20. With
the price table below a call reserves $0.20 and costs $0.14.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import sp4rk.agent.account as account_module
from sp4rk.agent import (
    Budget,
    BudgetAccount,
    BudgetError,
    BudgetState,
    CheckpointError,
    Events,
    Executor,
    ExecutorResult,
    ExitReason,
    FillCheck,
    HITLHandler,
    NudgeKind,
    RecordingEvents,
    RunState,
    Step,
    StepLimitResponse,
    SubAgentTask,
    load_checkpoint,
    run_sub_agent,
    run_sub_agents_parallel,
    save_checkpoint,
)
from sp4rk.agent._loop import nudges as nudge_texts
from sp4rk.llm import ChatRequest, ChatResponse, TokenUsage
from sp4rk.llm.pricing import ModelPrice, PriceTable, default_price_table
from sp4rk.llm.testing import FunctionLLM, ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import render_steps
from sp4rk.tools import Registry, RunContext, tool

from .helpers import FakeContext, echo_tools

PRICES = PriceTable({"m": ModelPrice(input=1000.0, output=2000.0)})  # $0.001 / $0.002 a token
NEED = {  # what one call reserves, per limit
    "max_total_tokens": 150,
    "max_input_tokens": 100,
    "max_output_tokens": 50,
    "max_cost_usd": 0.2,
}
BUDGET_KINDS = (NudgeKind.BUDGET_STATUS, NudgeKind.BUDGET_WRAP_UP, NudgeKind.BUDGET_EXTENDED)


def window() -> FakeContext:
    return FakeContext(fill=[FillCheck(0.1, "ok", 100, 100_000)], limit=50)


def searches(n: int, *, calls: int = 1) -> list[ChatResponse]:
    """``n`` responses, each calling ``search`` ``calls`` times and reporting 100 + 20 tokens."""
    return [
        tool_calls_response(
            *[("search", {"q": f"{i}-{j}"}) for j in range(calls)],
            thought=f"answer {i}",
            usage=TokenUsage(100, 20),
        )
        for i in range(n)
    ]


class Answers(HITLHandler):
    """Answers ``on_step_limit`` from a list (then denies) and records what it was asked."""

    def __init__(self, *answers: StepLimitResponse) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[int, int, str]] = []

    async def on_step_limit(
        self, ctx: RunContext, current_step: int, max_steps: int, reason: str
    ) -> StepLimitResponse:
        self.asked.append((current_step, max_steps, reason))
        return self.answers.pop(0) if self.answers else StepLimitResponse.DENY


def run(
    responses: list[Any],
    budget: Budget | None,
    *,
    tools: Registry | None = None,
    hitl: HITLHandler | None = None,
    events: Events | None = None,
    model: str = "m",
    max_steps: int = 50,
    **kwargs: Any,
) -> tuple[ExecutorResult, ScriptedLLM]:
    llm = ScriptedLLM(responses, model=model)
    registry = tools or echo_tools()
    executor = Executor(llm, registry, max_steps, budget=budget, hitl=hitl, events=events, **kwargs)
    return executor.run_sync(registry.list(), window()), llm


def answered_once(steps: list[Step]) -> bool:
    """Every tool call in the rendered history has exactly one result."""
    messages = render_steps(steps)
    calls = [c.id for m in messages if m.role == "assistant" for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if m.role == "tool"]
    return len(set(calls)) == len(calls) and sorted(calls) == sorted(results)


def budget_nudges(result: ExecutorResult) -> list[NudgeKind | None]:
    return [s.nudge_kind for s in result.steps if s.nudge_kind in BUDGET_KINDS]


# --- each limit -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "value", "calls"),
    [
        ("max_total_tokens", 400, 3),  # 0+150, 120+150, 240+150 fit; 360+150 does not
        ("max_input_tokens", 250, 2),  # 0+100, 100+100 fit; 200+100 does not
        ("max_output_tokens", 100, 3),  # 0+50, 20+50, 40+50 fit; 60+50 does not
        ("max_cost_usd", 0.5, 3),  # $0.20, $0.34, $0.48 fit; $0.62 does not
    ],
)
def test_each_limit_ends_the_run_before_the_call_that_would_cross_it(
    limit: str, value: float, calls: int
) -> None:
    events = RecordingEvents()
    budget = Budget(**{limit: value}, prices=PRICES)  # type: ignore[arg-type]
    result, llm = run(searches(8), budget, events=events)

    assert len(llm.requests) == calls
    assert result.exit_reason is ExitReason.BUDGET_EXHAUSTED and not result.finished
    assert result.output == f"answer {calls - 1}"  # the best answer so far
    assert result.state is not None
    spent = result.state.budget
    assert spent.exhausted == limit
    assert spent.spent(limit) <= value < spent.spent(limit) + NEED[limit]  # type: ignore[arg-type]
    assert result.usage == TokenUsage(100 * calls, 20 * calls)
    assert result.cost_usd == pytest.approx(0.14 * calls)
    assert events.diagnostics("budget_exhausted") == [
        {"limit": limit, "scope": "own", "spent": pytest.approx(spent.spent(limit)), "max": value}  # type: ignore[arg-type]
    ]
    assert answered_once(result.steps)


def test_the_tool_call_limit_stops_mid_response_and_leaves_a_valid_history() -> None:
    log: list[tuple[str, str]] = []
    result, llm = run(searches(4, calls=2), Budget(max_tool_calls=3), tools=echo_tools(log))
    assert [q for _, q in log] == ["0-0", "0-1", "1-0"]
    assert len(llm.requests) == 2
    assert result.exit_reason is ExitReason.BUDGET_EXHAUSTED and result.output == "answer 1"
    assert result.state is not None and result.state.budget.tool_calls == 3
    assert answered_once(result.steps)


def test_without_any_text_the_output_names_the_limit() -> None:
    silent = [
        tool_calls_response(("search", {"q": str(i)}), usage=TokenUsage(100, 20)) for i in range(5)
    ]
    result, _ = run(silent, Budget(max_total_tokens=200))
    # 120 spent: the next call (its prompt plus its output limit) could have crossed 200.
    assert result.output == (
        "Stopped: the next call could go 70 past the token budget (120 of 200 spent), so it "
        "was not made."
    )


# --- wall-clock time ------------------------------------------------------------------------


def test_the_deadline_cuts_a_running_tool_and_answers_its_call() -> None:
    cancelled: list[bool] = []

    @tool
    async def wait_forever(q: str) -> str:
        """Never returns on its own."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "unreachable"

    responses = [tool_calls_response(("wait_forever", {"q": "x"}), thought="waiting")]
    result, llm = run(responses, Budget(max_seconds=0.3), tools=Registry([wait_forever]))
    assert cancelled == [True]
    assert result.exit_reason is ExitReason.BUDGET_EXHAUSTED and result.output == "waiting"
    assert result.state is not None and result.state.budget.exhausted == "max_seconds"
    calls = [s for s in result.steps if s.action is not None]
    assert [(s.observation, s.is_error) for s in calls] == [(nudge_texts.CUT_AT_DEADLINE, True)]
    assert len(llm.requests) == 1 and answered_once(result.steps)


def test_the_deadline_cuts_a_running_model_call() -> None:
    started = asyncio.Event()

    async def hang(request: ChatRequest) -> ChatResponse:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    registry = echo_tools()
    events = RecordingEvents()
    executor = Executor(
        FunctionLLM(hang), registry, 5, budget=Budget(max_seconds=0.3), events=events
    )
    result = executor.run_sync(registry.list(), window())
    assert started.is_set()
    assert result.exit_reason is ExitReason.BUDGET_EXHAUSTED
    assert result.output.startswith("Stopped: the time budget is used up")
    assert result.usage == TokenUsage() and not [s for s in result.steps if s.action]
    assert events.diagnostics("budget_deadline_cut") == [{"during": "model_call"}]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("answer", "granted"),
    [(StepLimitResponse.ALLOW_ONCE, 50 + 60.0), (StepLimitResponse.ALLOW_MORE, 50 + 100.0)],
)
def test_time_extensions_are_in_seconds_from_the_answer(
    monkeypatch: pytest.MonkeyPatch, answer: StepLimitResponse, granted: float
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(account_module, "time", clock)

    @tool
    def slow(q: str) -> str:
        """Takes 150 seconds (of the fake clock)."""
        clock.now += 150
        return "done after a long time " + "." * 40

    hitl = Answers(answer)
    responses = [tool_calls_response(("slow", {"q": "x"})), finish_response("ok")]
    result, _ = run(responses, Budget(max_seconds=100), tools=Registry([slow]), hitl=hitl)
    assert hitl.asked == [(2, 50, "max_seconds")]
    assert result.exit_reason is ExitReason.FINISHED
    assert result.state is not None and result.state.budget.granted == {"max_seconds": granted}
    assert result.state.budget.seconds == pytest.approx(150)


# --- extensions through the HITL handler ----------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "value", "answer", "calls", "granted"),
    [
        ("max_total_tokens", 400, StepLimitResponse.ALLOW_ONCE, 4, 110),  # 360+150-400
        ("max_total_tokens", 400, StepLimitResponse.ALLOW_MORE, 6, 400),  # up to 800
        ("max_output_tokens", 100, StepLimitResponse.ALLOW_ONCE, 4, 10),  # 60+50-100
        ("max_cost_usd", 0.5, StepLimitResponse.ALLOW_ONCE, 4, 0.12),  # 0.42+0.20-0.50
        ("max_cost_usd", 0.5, StepLimitResponse.ALLOW_MORE, 6, 0.5),  # up to $1.00
    ],
)
def test_extensions_are_granted_in_the_limits_unit(
    limit: str, value: float, answer: StepLimitResponse, calls: int, granted: float
) -> None:
    hitl = Answers(answer)
    budget = Budget(**{limit: value}, prices=PRICES)  # type: ignore[arg-type]
    result, llm = run(searches(10), budget, hitl=hitl)
    assert [reason for _, _, reason in hitl.asked] == [limit, limit]  # granted, then denied
    assert len(llm.requests) == calls
    assert result.exit_reason is ExitReason.BUDGET_EXHAUSTED
    assert result.state is not None
    assert result.state.budget.granted == {limit: pytest.approx(granted)}
    extended = [s.user_nudge for s in result.steps if s.nudge_kind is NudgeKind.BUDGET_EXTENDED]
    assert len(extended) == 1 and "extended" in extended[0]


@pytest.mark.parametrize(
    ("answer", "ran"), [(StepLimitResponse.ALLOW_ONCE, 3), (StepLimitResponse.ALLOW_MORE, 4)]
)
def test_tool_call_extensions_count_calls(answer: StepLimitResponse, ran: int) -> None:
    log: list[tuple[str, str]] = []
    hitl = Answers(answer)
    result, _ = run(searches(6), Budget(max_tool_calls=2), tools=echo_tools(log), hitl=hitl)
    assert len(log) == ran
    assert [reason for _, _, reason in hitl.asked] == ["max_tool_calls"] * 2
    assert result.state is not None
    assert result.state.budget.granted == {"max_tool_calls": ran - 2}
    assert not [s for s in result.steps if s.nudge_kind is NudgeKind.BUDGET_EXTENDED]


def test_allow_always_lifts_the_limit_for_the_rest_of_the_run() -> None:
    hitl = Answers(StepLimitResponse.ALLOW_ALWAYS)
    responses = [*searches(6), finish_response("all done")]
    result, llm = run(responses, Budget(max_total_tokens=300), hitl=hitl)
    assert result.exit_reason is ExitReason.FINISHED and result.output == "all done"
    assert len(hitl.asked) == 1 and len(llm.requests) == 7
    assert result.state is not None and result.state.budget.lifted == ["max_total_tokens"]
    assert "lifted" in next(
        s.user_nudge for s in result.steps if s.nudge_kind is NudgeKind.BUDGET_EXTENDED
    )


# --- the model is told what remains ---------------------------------------------------------


def test_the_model_hears_the_budget_at_a_cadence_and_once_near_the_limit() -> None:
    result, llm = run(searches(12), Budget(max_total_tokens=1000, report_every=2))
    # 120 tokens a call: 84 % after 7 calls; the 8th fits (990), the 9th does not.
    assert len(llm.requests) == 8
    assert budget_nudges(result) == [NudgeKind.BUDGET_STATUS] * 4 + [NudgeKind.BUDGET_WRAP_UP]
    first = llm.requests[0].messages[-1].content
    assert first == "Budget so far: 0 of 1,000 tokens (0%)."
    wrap_up = llm.requests[7].messages[-1].content
    assert wrap_up.startswith("Budget nearly used up: 840 of 1,000 tokens (84%).")
    assert "call `finish`" in wrap_up


def test_without_a_budget_nothing_is_checked_or_told_but_usage_is_counted() -> None:
    events = RecordingEvents()
    result, _ = run([*searches(3), finish_response("done")], None, events=events, model="gpt-4o")
    assert result.exit_reason is ExitReason.FINISHED
    assert budget_nudges(result) == []
    assert not [d for d in events.of("executor_diagnostic") if d[1].startswith("budget_")]
    assert result.usage == TokenUsage(300, 60)
    assert result.cost_usd == pytest.approx(
        default_price_table().cost("gpt-4o", TokenUsage(300, 60))
    )
    assert len(events.of("usage_update")) == 4
    step, report = events.of("usage_update")[-1]
    assert step == 4 and report.usage == TokenUsage(300, 60) and report.tool_calls == 3


def test_an_unknown_models_cost_is_unknown_not_zero() -> None:
    result, _ = run([*searches(2), finish_response("done")], None, model="my-local-model")
    assert result.usage == TokenUsage(200, 40)
    assert result.cost_usd is None
    assert result.state is not None and result.state.budget.unpriced_calls == 3


def test_a_cost_limit_without_a_price_is_a_clear_error() -> None:
    with pytest.raises(BudgetError, match="'my-local-model' has no price"):
        run(searches(2), Budget(max_cost_usd=1.0), model="my-local-model")


def test_a_duck_typed_sink_without_the_added_event_still_works() -> None:
    class Sink:
        def __getattr__(self, name: str) -> Any:
            if name == "usage_update" or name.startswith("_"):
                raise AttributeError(name)
            return lambda *args: None

    result, _ = run([finish_response("ok")], Budget(max_total_tokens=1000), events=Sink())  # type: ignore[arg-type]
    assert result.finished


# --- pause and resume -----------------------------------------------------------------------


def test_a_resumed_run_goes_on_with_what_was_left(tmp_path: Path) -> None:
    budget = Budget(max_total_tokens=400)
    first_llm = ScriptedLLM(searches(5), model="m")
    registry = echo_tools()
    paused = Executor(
        first_llm,
        registry,
        50,
        budget=budget,
        pause_checker=lambda ctx: len(first_llm.requests) >= 2,
    ).run_sync(registry.list(), window())
    assert paused.paused and paused.usage == TokenUsage(200, 40)
    save_checkpoint(tmp_path / "run.json", paused)

    checkpoint = load_checkpoint(tmp_path / "run.json")
    assert checkpoint.state is not None and checkpoint.state.budget.input_tokens == 200
    llm = ScriptedLLM(searches(5), model="m")
    resumed = Executor(llm, registry, 50, budget=budget, resume_steps=checkpoint).run_sync(
        registry.list(), window()
    )
    assert len(llm.requests) == 1  # 240 spent: one more call of 150 fits, a second does not
    assert resumed.exit_reason is ExitReason.BUDGET_EXHAUSTED
    assert resumed.usage == TokenUsage(300, 60)
    assert resumed.state is not None
    assert resumed.state.budget.seconds >= checkpoint.state.budget.seconds


def test_the_journal_receives_the_spend_at_every_boundary() -> None:
    from .test_journal import Journal

    journal = Journal()
    registry = echo_tools()
    executor = Executor(ScriptedLLM(searches(3), model="m"), registry, 50)
    executor.set_budget(Budget(max_total_tokens=400))
    executor.set_journal(journal)
    executor.run_sync(registry.list(), window())
    assert journal.state is not None
    assert journal.state.budget.usage == TokenUsage(300, 60)
    assert journal.state.budget.exhausted == "max_total_tokens"


def test_grants_and_lifts_survive_a_checkpoint(tmp_path: Path) -> None:
    state = RunState()
    state.budget.granted["max_cost_usd"] = 0.25
    state.budget.lifted.append("max_tool_calls")
    state.budget.tool_calls = 7
    save_checkpoint(tmp_path / "c.json", [], state)
    loaded = load_checkpoint(tmp_path / "c.json").state
    assert loaded is not None and loaded.budget == state.budget


@pytest.mark.parametrize(
    "budget",
    [
        {"input_tokens": -1},
        {"cost_usd": "free"},
        {"seconds": True},
        {"granted": {"max_cost_usd": -1.0}},
        {"granted": {"max_steps": 1.0}},
        {"lifted": ["everything"]},
        {"exhausted": "patience"},
    ],
)
def test_a_hostile_budget_in_a_checkpoint_is_refused(
    tmp_path: Path, budget: dict[str, Any]
) -> None:
    path = tmp_path / "c.json"
    document = {"schema_version": 2, "steps": [], "state": {"budget": budget}}
    path.write_text(json.dumps(document))
    with pytest.raises(CheckpointError):
        load_checkpoint(path)


# --- sub-agents -----------------------------------------------------------------------------


def sub_task(step_id: str, llm: Any, ctx: RunContext, **kwargs: Any) -> SubAgentTask:
    registry = echo_tools()
    return SubAgentTask(
        step_id,
        Executor(llm, registry, 50, **kwargs),
        window(),  # type: ignore[arg-type]
        registry.list(),
        f"do {step_id}",
        ctx=ctx,
    )


def test_concurrent_sub_agents_never_overspend_the_shared_budget() -> None:
    shared = BudgetAccount(Budget(max_total_tokens=1000))

    def endless(name: str) -> FunctionLLM:
        count = 0

        async def answer(request: ChatRequest) -> ChatResponse:
            nonlocal count
            count += 1
            for _ in range(3):  # let the other sub-agents reserve while this call is "running"
                await asyncio.sleep(0)
            return tool_calls_response(
                ("search", {"q": f"{name}-{count}"}), thought=name, usage=TokenUsage(100, 20)
            )

        return FunctionLLM(answer, model="m")

    tasks = [sub_task(f"s{i}", endless(f"s{i}"), RunContext(budget=shared)) for i in range(6)]
    results = asyncio.run(run_sub_agents_parallel(tasks))

    spent = shared.state.input_tokens + shared.state.output_tokens
    assert spent <= 1000  # without reservations, six calls in flight at once overspend it
    assert spent + 150 > 1000  # and the budget was used: no call that fitted was refused
    assert shared.remaining() == {"max_total_tokens": pytest.approx(1000 - spent)}  # released
    assert sum(len(t.executor.last_steps) > 0 for t in tasks) == 6
    assert all(not r.success for r in results)
    assert all("used up its budget (max_total_tokens)" in str(r.error) for r in results)


def test_a_sub_agent_spends_from_its_parent_and_stops_at_the_parents_limit() -> None:
    child_hitl = Answers(StepLimitResponse.ALLOW_ALWAYS)  # must never be asked
    child_llm = ScriptedLLM(searches(10), model="m")

    @tool
    async def delegate(ctx: RunContext, what: str) -> str:
        """Hand the task to a sub-agent."""
        done = await run_sub_agent(sub_task("child", child_llm, ctx, hitl=child_hitl))
        return f"sub-agent said: {done.output} ({done.error})"

    responses = [
        tool_calls_response(
            ("delegate", {"what": "x"}), thought="delegating", usage=TokenUsage(100, 20)
        ),
        finish_response("never reached"),
    ]
    events = RecordingEvents()
    result, llm = run(
        responses, Budget(max_total_tokens=600), tools=Registry([delegate]), events=events
    )

    # The parent spent 120, the child 3 × 120 (480 + 150 > 600), then the parent stopped.
    assert len(child_llm.requests) == 3 and child_hitl.asked == []
    assert result.usage == TokenUsage(400, 80)
    assert result.exit_reason is ExitReason.BUDGET_EXHAUSTED and len(llm.requests) == 1
    observation = next(s.observation for s in result.steps if s.action is not None)
    assert observation.startswith("sub-agent said: answer 2")
    assert events.diagnostics("budget_exhausted")[0]["scope"] == "own"


def test_a_sub_agents_own_budget_applies_as_well() -> None:
    shared = BudgetAccount(Budget(max_total_tokens=10_000))
    llm = ScriptedLLM(searches(10), model="m")
    done = asyncio.run(
        run_sub_agent(
            sub_task("s", llm, RunContext(budget=shared), budget=Budget(max_tool_calls=2))
        )
    )
    assert done.output == "answer 2" and shared.state.tool_calls == 2
    assert shared.report().usage == TokenUsage(300, 60)


# --- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_total_tokens": 0}, ValueError),
        ({"max_cost_usd": -1.0}, ValueError),
        ({"max_seconds": float("inf")}, ValueError),
        ({"max_tool_calls": 2.5}, TypeError),
        ({"max_input_tokens": True}, TypeError),
        ({"max_cost_usd": "1"}, TypeError),
        ({"report_every": -1}, ValueError),
        ({"wrap_up_at": 0}, ValueError),
        ({"prices": {"m": 1}}, TypeError),
    ],
)
def test_bad_budgets_are_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        Budget(**kwargs)


def test_from_limits_is_what_the_command_line_builds() -> None:
    budget = Budget.from_limits(max_cost_usd=2, max_tokens=50_000, max_seconds=600)
    assert budget.limits() == {"max_total_tokens": 50_000, "max_cost_usd": 2, "max_seconds": 600}
    assert budget.limited and not Budget().limited


def test_the_executor_refuses_what_is_not_a_budget() -> None:
    with pytest.raises(TypeError, match="Budget"):
        Executor(ScriptedLLM([]), echo_tools(), 5, budget={"max_cost_usd": 1})  # type: ignore[arg-type]
    executor = Executor(ScriptedLLM([]), echo_tools(), 5)
    with pytest.raises(TypeError, match="Budget"):
        executor.set_budget(5)  # type: ignore[arg-type]


def test_set_budget_applies_to_the_next_run() -> None:
    registry = echo_tools()
    llm = ScriptedLLM(searches(5), model="m")
    executor = Executor(llm, registry, 50)
    executor.set_budget(Budget(max_tool_calls=1))
    result = executor.run_sync(registry.list(), window())
    assert result.exit_reason is ExitReason.BUDGET_EXHAUSTED and len(llm.requests) == 2


def test_a_report_describes_and_summarises() -> None:
    account = BudgetAccount(
        Budget(max_total_tokens=1000, max_cost_usd=2.0, max_tool_calls=10, prices=PRICES)
    )
    account.settle(None, "m", TokenUsage(300, 50))
    assert account.take_tool_call() is None
    report = account.report()
    assert report.describe() == (
        "350 of 1,000 tokens (35%); $0.4000 of $2.00 spent (20%); 1 of 10 tool calls (10%)"
    )
    assert report.summary().startswith("300 in + 50 out tokens · $0.4000 · ")
    assert report.remaining("max_tool_calls") == 9 and report.remaining("max_seconds") is None
    assert BudgetState.from_dict(account.state.to_dict()) == account.state
