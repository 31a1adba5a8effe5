"""Sub-agents: one task on a fresh executor, or many in parallel with results in input order."""

from __future__ import annotations

import asyncio

import pytest

from sp4rk.agent import (
    Executor,
    RecordingEvents,
    SubAgentTask,
    run_sub_agent,
    run_sub_agents_parallel,
)
from sp4rk.llm import ChatRequest, ChatResponse, LLMError
from sp4rk.llm.testing import FunctionLLM, ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry

from .helpers import echo_tools


def task(
    step_id: str,
    llm: object,
    tools: Registry,
    events: RecordingEvents | None = None,
    max_steps: int = 5,
) -> SubAgentTask:
    return SubAgentTask(
        step_id,
        Executor(llm, tools, max_steps),
        ContextWindow(task=step_id),  # type: ignore[arg-type]
        tools.list(),
        f"do {step_id}",
        events=events,
    )


async def test_a_finished_sub_agent_succeeds_and_fires_both_events() -> None:
    events = RecordingEvents()
    result = await run_sub_agent(
        task("s1", ScriptedLLM([finish_response("42")]), echo_tools(), events)
    )
    assert result.success and result.output == "42" and result.error is None
    assert events.of("sub_agent_launch") == [("s1", "do s1")]
    assert events.of("sub_agent_complete")[0][:2] == ("s1", True)


async def test_budget_exhaustion_and_llm_errors_are_reported_not_raised() -> None:
    tools = echo_tools()
    exhausted = await run_sub_agent(
        task(
            "s2",
            ScriptedLLM([tool_calls_response(("search", {"q": str(i)})) for i in range(3)]),
            tools,
            max_steps=2,
        )
    )
    assert not exhausted.success and "step budget" in str(exhausted.error)
    failed = await run_sub_agent(task("s3", ScriptedLLM([LLMError("down")]), tools))
    assert not failed.success and isinstance(failed.error, LLMError) and failed.step_id == "s3"


async def test_printed_tool_call_syntax_in_the_answer_is_not_a_success() -> None:
    events = RecordingEvents()
    result = await run_sub_agent(
        task("s4", ScriptedLLM([finish_response("```bash_exec\nls\n```")]), echo_tools(), events)
    )
    assert not result.success and "tool-call syntax" in str(result.error)
    assert events.of("sub_agent_complete")[0][1] is False


async def test_parallel_sub_agents_run_concurrently_and_keep_input_order() -> None:
    started: set[str] = set()
    both = asyncio.Event()

    async def model(request: ChatRequest) -> ChatResponse:
        name = request.messages[0].content
        started.add(name)
        if len(started) == 2:
            both.set()
        await both.wait()  # only completes if both sub-agents are in flight at once
        return finish_response(f"answer from {name}")

    tools = echo_tools()
    results = await asyncio.wait_for(
        run_sub_agents_parallel(
            [task("first", FunctionLLM(model), tools), task("second", FunctionLLM(model), tools)]
        ),
        10,
    )
    assert [r.output for r in results] == ["answer from first", "answer from second"]
    assert await run_sub_agents_parallel([]) == []


async def test_two_tasks_may_not_share_an_executor() -> None:
    tools = echo_tools()
    shared = Executor(ScriptedLLM([]), tools, 5)
    tasks = [SubAgentTask(s, shared, ContextWindow(), tools.list(), s) for s in ("a", "b")]
    with pytest.raises(ValueError, match="own Executor"):
        await run_sub_agents_parallel(tasks)


def test_the_window_was_called_cm_and_that_name_still_works_with_a_warning() -> None:
    tools = echo_tools()
    window = ContextWindow(task="old name")
    executor = Executor(ScriptedLLM([finish_response("ok")]), tools, 5)
    with pytest.warns(DeprecationWarning, match="call it window"):
        old = SubAgentTask("s", executor, tools=tools.list(), description="d", cm=window)
    assert old.window is window
    with pytest.warns(DeprecationWarning, match="call it window"):
        assert old.cm is window
    assert asyncio.run(run_sub_agent(old)).output == "ok"


def test_a_task_without_its_window_says_which_argument_is_missing() -> None:
    executor = Executor(ScriptedLLM([]), echo_tools(), 5)
    with pytest.raises(TypeError, match="needs window="):
        SubAgentTask("s", executor)
    with (
        pytest.warns(DeprecationWarning, match="call it window"),
        pytest.raises(TypeError, match="both window= and cm="),
    ):
        SubAgentTask("s", executor, ContextWindow(), cm=ContextWindow())


async def test_a_typed_sub_agent_hands_back_its_validated_answer() -> None:
    from pydantic import BaseModel

    class Capital(BaseModel):
        country: str
        city: str

    tools = echo_tools()
    llm = ScriptedLLM([finish_response({"country": "France", "city": "Paris"})])
    sub = SubAgentTask(
        "s1",
        Executor(llm, tools, 5, output_type=Capital),
        ContextWindow(task="capital of France"),
        tools.list(),
        "find the capital",
    )
    result = await run_sub_agent(sub)
    assert result.success and result.output_data == Capital(country="France", city="Paris")
