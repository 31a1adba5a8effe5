"""What the local provider shows a small model: the one worked example that fits the task."""

from __future__ import annotations

import pytest

from sp4rk.llm._local_prompt import (
    EXAMPLES,
    all_additions,
    local_messages,
    pick_example,
    reminder,
)
from sp4rk.llm.types import Message, ToolCall, ToolDefinition

NAMES = ["read_file", "write_file", "edit_file", "ripgrep", "glob", "bash_exec", "finish"]
TOOLS = [
    ToolDefinition(n, f"The {n} tool.", {"type": "object", "properties": {"x": {"type": "string"}}})
    for n in NAMES
]


@pytest.mark.parametrize(
    ("task", "tool"),
    [
        ("What is the secret word in notes.txt?", "read_file"),
        ("Create a file named hello.txt containing the text: Hello", "write_file"),
        ("In config.ini, change the line debug = true to debug = false.", "edit_file"),
        ("Which file in this folder mentions a penguin?", "ripgrep"),
        ("Which Markdown (.md) file is in this folder?", "glob"),
        ("Run the command python3 count.py and tell me the number it prints.", "bash_exec"),
        ("Something no example is about", "read_file"),  # none fits: the first
    ],
)
def test_the_example_shown_is_the_one_most_like_the_task(task: str, tool: str) -> None:
    example = pick_example(task, set(NAMES))
    assert example is not None and example.tool == tool
    messages, added = local_messages([Message("user", task)], TOOLS)
    assert messages[0]["content"].endswith(added.preamble)  # the listing, in the system
    # The example as turns, then the task: one example only.
    roles = [m["role"] for m in messages[1:]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in messages[1:-1]] == list(added.example)
    assert added.example[0] == example.turns[0] and messages[-1]["content"] == task
    # Written as the conversation after it will be: the result names its tool, the task again.
    assert added.example[2].startswith(f"Result of {tool}:\n")
    assert added.example[2].endswith(reminder(example.turns[0]))


def test_an_example_needs_its_tool_and_finish_offered() -> None:
    assert pick_example("read notes.txt", {"read_file"}) is None
    fallback = pick_example("read notes.txt", {"bash_exec", "finish"})
    assert fallback is not None and fallback.tool == "bash_exec"
    _, added = local_messages([Message("user", "read it")], TOOLS[:1])
    assert added.example == () and len(all_additions(TOOLS[:1])) == 1
    assert len(all_additions(TOOLS)) == len(EXAMPLES)  # every one a prompt may carry


def test_the_task_comes_again_after_each_result_but_not_before() -> None:
    first, added = local_messages([Message("user", "read notes.txt")], TOOLS)
    assert added.reminder == "" and first[-1]["content"] == "read notes.txt"
    history = [
        Message("user", "read notes.txt"),
        Message("assistant", tool_calls=[ToolCall("c1", "read_file", '{"x": "notes.txt"}')]),
        Message("tool", "banana", tool_call_id="c1"),
    ]
    later, added = local_messages(history, TOOLS)
    assert len(later) == 1 + len(added.example) + 3
    assert later[-1]["content"] == "Result of read_file:\nbanana" + added.reminder
    assert "Task: read notes.txt" in added.reminder
