from __future__ import annotations

import pytest

from sp4rk.llm import Message, ReasoningItem, ToolCall
from sp4rk.memory import InvalidHistoryError, history_problems, validate_history


def call(id: str, name: str = "read_file") -> ToolCall:
    return ToolCall(id, name, "{}")


def good() -> list[Message]:
    return [
        Message("system", "be brief"),
        Message("user", "the task"),
        Message(
            "assistant",
            "two reads",
            tool_calls=[call("a"), call("b")],
            reasoning_items=[ReasoningItem("rs_1", "why")],
        ),
        Message("tool", "A", tool_call_id="a"),
        Message("tool", "B", tool_call_id="b"),
        Message("user", "a nudge"),
        Message("system", "[summary]"),
        Message("assistant", "", tool_calls=[call("c")]),
        Message("tool", "C", tool_call_id="c"),
        Message("assistant", "done thinking"),
        Message("user", "call a tool or finish"),
    ]


def test_a_well_formed_history_is_valid() -> None:
    assert history_problems(good()) == []
    validate_history(good())


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda h: h.insert(2, Message("robot", "x")), "unknown role 'robot'"),  # type: ignore[arg-type]
        (lambda h: h.pop(1), "first non-system message is assistant"),
        (lambda h: h.insert(9, Message("assistant", " ")), "empty assistant turn"),
        (lambda h: h[7].tool_calls.__setitem__(0, call("")), "has no id"),
        (lambda h: h[7].tool_calls.__setitem__(0, call("a")), "'a' is used twice"),
        (lambda h: h.pop(4), "missing results for b"),
        (lambda h: h.insert(4, Message("user", "hi")), "user message before the results"),
        (lambda h: h.__setitem__(slice(3, 5), [h[4], h[3]]), "'b' is out of order"),
        (lambda h: h.insert(6, Message("tool", "x", tool_call_id="z")), "answers no pending call"),
        (lambda h: h.__setitem__(8, Message("tool", "  ", tool_call_id="c")), "empty tool result"),
        (
            lambda h: h.__setitem__(8, Message("tool", "C", tool_call_id="q")),
            "unknown to that turn",
        ),
        (lambda h: h.__setitem__(5, Message("user", "x", tool_calls=[call("k")])), "carries tool"),
        (lambda h: h.__setitem__(5, Message("user", "x", tool_call_id="a")), "has a tool_call_id"),
        (lambda h: h.__setitem__(5, Message("user", "")), "empty user message"),
        (lambda h: h.__delitem__(slice(9, None)), None),  # ending on a tool result is fine
        (lambda h: h.pop(), "ends with an assistant message"),
        (lambda h: h.insert(5, Message("user", "\u00a0\u3000\u200b")), "empty user message"),
        (lambda h: h.__setitem__(9, Message("assistant", "\u3000")), "empty assistant turn"),
        (lambda h: h.__delitem__(slice(8, None)), "ends before the results for c"),
    ],
)
def test_each_rule_is_checked(mutate: object, problem: str | None) -> None:
    history = good()
    mutate(history)  # type: ignore[operator]
    problems = history_problems(history)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


def test_the_error_lists_every_problem_with_its_message_index() -> None:
    history = good()
    history.pop(4)  # b unanswered
    history.append(Message("assistant", ""))  # an empty turn, and at the end
    with pytest.raises(InvalidHistoryError) as info:
        validate_history(history)
    assert len(info.value.problems) == 3
    text = str(info.value)
    assert "3 problem(s)" in text
    assert "message 4" in text
    assert "message 10: empty assistant turn" in text
    assert "message 10: the prompt ends with an assistant message" in text
    assert isinstance(info.value, ValueError)


def test_a_partial_history_may_end_with_an_assistant_turn() -> None:
    prefix = good()[:-1]
    assert history_problems(prefix, partial=True) == []
    assert history_problems(prefix) == ["message 9: the prompt ends with an assistant message"]


def test_ids_that_collide_once_sanitised_are_flagged() -> None:
    history = [
        Message("user", "task"),
        Message("assistant", "", tool_calls=[call("toolu.1")]),
        Message("tool", "A", tool_call_id="toolu.1"),
        Message("assistant", "", tool_calls=[call("toolu_1")]),
        Message("tool", "B", tool_call_id="toolu_1"),
    ]
    assert history_problems(history) == [
        "message 3: tool call id 'toolu_1' collides with 'toolu.1' once sanitised ('toolu_1')"
    ]
