"""Typed results: ``Executor(output_type=...)`` validates the answer and returns the object."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs this one on Python 3.11

from sp4rk.agent import (
    Executor,
    ExecutorResult,
    ExitReason,
    HITLHandler,
    NudgeKind,
    StepLimitResponse,
    load_checkpoint,
    save_checkpoint,
)
from sp4rk.llm.testing import ScriptedLLM, finish_response, text_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry, RunContext
from sp4rk.tools.builtins import FinishTool

from .helpers import echo_tools, run


class Weather(BaseModel):
    city: str
    celsius: float


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


def finish_with(data: dict[str, Any]) -> Any:
    return finish_response(data)


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (Weather, {"city": "Paris", "celsius": 21.5}, Weather(city="Paris", celsius=21.5)),
        (Point, {"x": 1, "y": 2}, Point(1, 2)),
        (Person, {"name": "Ada", "age": 36}, {"name": "Ada", "age": 36}),
        (list[str], {"answer": ["a", "b"]}, ["a", "b"]),
    ],
)
def test_a_valid_answer_is_returned_as_the_validated_object(
    output_type: Any, answer: dict[str, Any], expected: Any
) -> None:
    result, llm, _ = run([finish_with(answer)], output_type=output_type)
    assert result.finished and result.exit_reason is ExitReason.FINISHED
    assert result.output_data == expected
    assert json.loads(result.output) == json.loads(json.dumps(answer.get("answer", answer)))
    llm.assert_complete()


def test_the_finish_tool_offers_the_types_schema() -> None:
    _, llm, _ = run([finish_with({"city": "Oslo", "celsius": -3})], output_type=Weather)
    finish = next(t for t in llm.requests[0].tools if t.name == "finish")
    assert finish.input_schema["properties"].keys() == {"city", "celsius"}
    assert finish.input_schema["required"] == ["city", "celsius"]


def test_a_non_object_type_is_asked_for_under_answer() -> None:
    schema = FinishTool(list[int]).input_schema
    assert schema["properties"]["answer"] == {"items": {"type": "integer"}, "type": "array"}
    assert schema["required"] == ["answer"]


def test_an_invalid_answer_goes_back_to_the_model_and_the_next_one_counts() -> None:
    result, llm, events = run(
        [finish_with({"city": "Paris"}), finish_with({"city": "Paris", "celsius": "21.5"})],
        output_type=Weather,
    )
    assert result.output_data == Weather(city="Paris", celsius=21.5)
    refused = result.steps[0]
    assert refused.is_error and "celsius: Field required" in refused.observation
    told = llm.requests[1].messages[-1]
    assert told.role == "tool" and "celsius: Field required" in told.content
    assert ("parse_error_nudge", "finish") in [
        (d[1], d[2].get("tool")) for d in events.of("executor_diagnostic")
    ]
    assert result.model_responses == 2


def test_invalid_answers_are_bounded_by_the_parse_error_breaker() -> None:
    result, llm, _ = run([finish_with({"town": "Paris"})] * 3, output_type=Weather)
    assert result.exit_reason is ExitReason.PARSE_ERROR_ABORT and not result.finished
    assert result.output_data is None
    llm.assert_complete()


def test_a_text_answer_after_the_nudges_must_validate_too() -> None:
    fenced = '```json\n{"city": "Rome", "celsius": 3}\n```'
    result, _, _ = run(
        [text_response("a"), text_response("b"), text_response("sunny"), text_response(fenced)],
        output_type=Weather,
    )
    assert result.exit_reason is ExitReason.IMPLICIT_FINISH
    assert result.output_data == Weather(city="Rome", celsius=3)
    kinds = [s.nudge_kind for s in result.steps if s.nudge_kind is not None]
    assert kinds == [NudgeKind.TEXT_REPLY, NudgeKind.TEXT_REPLY, NudgeKind.INVALID_ANSWER]
    invalid = next(s for s in result.steps if s.nudge_kind is NudgeKind.INVALID_ANSWER)
    assert "must be a `finish` call" in invalid.user_nudge


def test_text_answers_that_never_validate_stop_the_run() -> None:
    replies = [text_response(str(i)) for i in range(5)]
    result, llm, _ = run(replies, output_type=Weather)
    assert result.exit_reason is ExitReason.PARSE_ERROR_ABORT
    llm.assert_complete()


def test_a_reprieve_lets_a_text_answer_try_again() -> None:
    class Reprieve(HITLHandler):
        async def on_step_limit(
            self, ctx: RunContext, current_step: int, max_steps: int, reason: str
        ) -> StepLimitResponse:
            assert reason == "parse_error"
            return StepLimitResponse.ALLOW_ONCE

    texts = [text_response(str(i)) for i in range(5)]  # 2 nudged, 3 invalid: the third trips
    valid = finish_with({"city": "Nice", "celsius": 20})
    result, llm, _ = run([*texts, valid], output_type=Weather, hitl=Reprieve())
    assert result.output_data == Weather(city="Nice", celsius=20)
    assert NudgeKind.REPRIEVE not in [s.nudge_kind for s in result.steps]  # told in the nudge
    assert "one more chance" in llm.requests[-1].messages[-1].content
    llm.assert_complete()


def test_without_an_output_type_answers_stay_text() -> None:
    result, _, _ = run([finish_response("plain")])
    assert result.output == "plain" and result.output_data is None


def test_a_gate_refusing_a_valid_answer_leaves_no_data_until_one_is_accepted() -> None:
    result, _, _ = run(
        [finish_with({"city": "A", "celsius": 1}), finish_with({"city": "B", "celsius": 2})],
        output_type=Weather,
        setup=lambda e: e.set_mutation_required(True),
    )
    # The mutation gate refuses once, then ends the run with the second answer as output.
    assert result.exit_reason is ExitReason.MUTATION_REQUIRED
    assert result.output_data == Weather(city="B", celsius=2)


def test_a_type_pydantic_cannot_validate_is_refused_at_construction() -> None:
    with pytest.raises(TypeError, match="output_type must be a type pydantic can validate"):
        Executor(ScriptedLLM([]), Registry(), 5, output_type=object())


@pytest.mark.parametrize(
    ("output_type", "says"),
    [("Weather", "not the string 'Weather'"), (object, "accepts any answer"), (Any, "accepts")],
)
def test_an_output_type_that_cannot_type_an_answer_is_refused(output_type: Any, says: str) -> None:
    with pytest.raises(TypeError, match=says):
        Executor(ScriptedLLM([]), Registry(), 5, output_type=output_type)


def test_to_dict_gives_the_answer_as_json() -> None:
    result, _, _ = run([finish_with({"city": "Paris", "celsius": 1})], output_type=Weather)
    data = result.to_dict()
    assert data["output_data"] == {"city": "Paris", "celsius": 1.0}
    json.dumps(data)
    assert ExecutorResult.from_dict(data).output_data == {"city": "Paris", "celsius": 1.0}


def test_a_paused_typed_run_resumes_and_validates_its_answer(tmp_path: Any) -> None:
    registry = echo_tools()
    replies = [
        tool_calls_response(("search", {"q": "weather"})),
        finish_with({"city": "Bern", "celsius": 12}),
    ]
    llm = ScriptedLLM(replies)
    paused = Executor(
        llm, registry, 5, output_type=Weather, pause_checker=lambda ctx: len(llm.requests) == 1
    )
    first = paused.run_sync(registry.list(), ContextWindow(task="weather"))
    assert first.paused and first.output_data is None and first.model_responses == 1
    save_checkpoint(tmp_path / "run.json", first)

    checkpoint = load_checkpoint(tmp_path / "run.json")
    window = ContextWindow(task="weather")
    window.seed_steps(checkpoint)
    resumed = Executor(llm, registry, 5, output_type=Weather, resume_steps=checkpoint)
    result = resumed.run_sync(registry.list(), window)
    assert result.finished and result.output_data == Weather(city="Bern", celsius=12)
    assert result.model_responses == 2
    llm.assert_complete()
