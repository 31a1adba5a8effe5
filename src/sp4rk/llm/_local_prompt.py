"""What ``LocalProvider`` shows a local model: chat messages any template renders.

With tools, the messages carry what a small model needs to make useful calls:

- **A compact tool listing**: each tool's name, its arguments (``?`` marks an optional one)
  and the first line of its description. The grammar already admits only calls matching the
  schemas, so the schemas themselves stay out of the prompt (about a sixth of the tokens).
- **A worked example**, as chat turns before the conversation: a task, the call that serves
  it, its result and the ``finish`` that answers, written exactly as the conversation after
  it will be. A small model copies what it is shown, so it sees one example, the one of six
  (read, write, edit, search, list files, run a command) whose task shares most words with
  its own.
- **The task again** after every tool result, with what to do next: a small model loses
  sight of a task that lies a few messages back.

Tool calls are written in the JSON form the model is asked to produce, and tool results
become user messages naming the tool, because small models' templates rarely know the
``tool`` role. What the provider adds itself (the listing, the example, the reminder) is
:class:`Additions`, so its usage report can leave it out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sp4rk.llm._schema import openai_parameters
from sp4rk.llm.base import content_blocks, system_parts
from sp4rk.llm.types import Message, ToolDefinition

FINISH = "finish"
INSTRUCTIONS = (
    "You work on a task by calling tools, one call per reply, written as JSON: "
    '{{"name": "<tool>", "arguments": {{...}}}}. When you have the answer, call '
    "{finish} with it.\n\nTools:\n{tools}"
)


@dataclass(frozen=True, slots=True)
class Example:
    """A worked example: the tool it shows, words of a task it fits, and the exchange."""

    tool: str
    keywords: frozenset[str]
    turns: tuple[str, ...]
    """The task, then calls and results in turn, ending with the ``finish`` call."""


def _example(tool: str, keywords: str, *turns: str) -> Example:
    return Example(tool, frozenset(keywords.split()), turns)


#: One example per common tool. A small model copies what it is shown, so each prompt shows
#: the one whose task is most like the caller's (see :func:`pick_example`).
EXAMPLES: tuple[Example, ...] = (
    _example(
        "read_file",
        "read what say says content contents show open look",
        "What colour is the door in house.txt?",
        '{"name": "read_file", "arguments": {"path": "house.txt"}}',
        "The house has a red door.",
        '{"name": "finish", "arguments": {"answer": "The door is red."}}',
    ),
    _example(
        "write_file",
        "create make write new save",
        "Make a file todo.txt that says: buy milk",
        '{"name": "write_file", "arguments": {"path": "todo.txt", "content": "buy milk"}}',
        "Wrote todo.txt",
        '{"name": "finish", "arguments": {"answer": "Created todo.txt."}}',
    ),
    _example(
        "edit_file",
        "change replace edit rename fix update set",
        "In app.cfg, replace color = red with color = blue.",
        '{"name": "edit_file", "arguments": {"path": "app.cfg", "old_string": "color = red", '
        '"new_string": "color = blue"}}',
        "Edited app.cfg",
        '{"name": "finish", "arguments": {"answer": "app.cfg now says color = blue."}}',
    ),
    _example(
        "ripgrep",
        "search find mention mentions mentioned grep where occurs",
        "Which file talks about a dragon?",
        '{"name": "ripgrep", "arguments": {"pattern": "dragon"}}',
        "story.txt:3:The dragon sleeps in the cave.",
        '{"name": "finish", "arguments": {"answer": "story.txt"}}',
    ),
    _example(
        "glob",
        "list files folder directory extension kind",
        "Which Python (.py) files are here?",
        '{"name": "glob", "arguments": {"pattern": "*.py"}}',
        "main.py\ntools.py",
        '{"name": "finish", "arguments": {"answer": "main.py and tools.py"}}',
    ),
    _example(
        "bash_exec",
        "run command execute prints print output python python3 test tests script",
        "Run the command date and tell me what it prints.",
        '{"name": "bash_exec", "arguments": {"command": "date"}}',
        "Mon Jan 5 10:00:00 UTC 2026",
        '{"name": "finish", "arguments": {"answer": "It prints Mon Jan 5 10:00:00 UTC 2026."}}',
    ),
)
_WORD = re.compile(r"[a-z0-9]+")


def pick_example(task: str, offered: set[str]) -> Example | None:
    """The example most like ``task`` (most keywords in common; the first on a tie).

    Only examples whose tool and ``finish`` are offered count.
    """
    usable = [e for e in EXAMPLES if {e.tool, FINISH} <= offered]
    if not usable:
        return None
    words = set(_WORD.findall(task.lower()))
    return max(usable, key=lambda e: len(e.keywords & words))


@dataclass(frozen=True, slots=True)
class Additions:
    """Text the provider adds to the caller's conversation (left out of reported usage)."""

    preamble: str = ""
    """The instructions and the listing, at the end of the system message."""
    example: tuple[str, ...] = ()
    """The worked example's turns, before the conversation."""
    reminder: str = ""
    """The task again, after the latest tool result."""

    def texts(self) -> list[str]:
        """Everything added, as pieces of text."""
        return [t for t in (self.preamble, *self.example, self.reminder) if t]


def tool_line(tool: ToolDefinition) -> str:
    """``- read_file(path, start_line?): Read a text file ...``."""
    schema = openai_parameters(tool.input_schema)
    required = set(schema.get("required", []))
    properties: dict[str, Any] = schema.get("properties", {})
    names = ", ".join(p if p in required else f"{p}?" for p in properties)
    first = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
    return f"- {tool.name}({names}): {first}"


def preamble(tools: Sequence[ToolDefinition]) -> str:
    """The instructions and the compact listing for ``tools``."""
    offered = {t.name for t in tools}
    return INSTRUCTIONS.format(
        tools="\n".join(tool_line(t) for t in tools),
        finish=FINISH if FINISH in offered else "the tool that ends the task",
    )


def example_turns(example: Example) -> tuple[str, ...]:
    """``example`` as chat turns, written as the conversation after it will be."""
    task, *rest = example.turns
    turns = [task]
    for i, turn in enumerate(rest):
        is_result = i % 2 == 1
        turns.append(f"Result of {example.tool}:\n{turn}{reminder(task)}" if is_result else turn)
    return tuple(turns)


def all_additions(tools: Sequence[ToolDefinition]) -> list[Additions]:
    """What a call offering ``tools`` may get added, one per usable example (no reminder)."""
    offered = {t.name for t in tools}
    text = preamble(tools)
    usable = [e for e in EXAMPLES if {e.tool, FINISH} <= offered]
    return [Additions(text, example_turns(e)) for e in usable] or [Additions(text)]


def reminder(task: str) -> str:
    """What follows the latest tool result: the task again, and what to do next."""
    return f"\n\nTask: {task}\nCall the next tool, or {FINISH} with the answer."


def local_messages(
    messages: Sequence[Message], tools: Sequence[ToolDefinition]
) -> tuple[list[dict[str, str]], Additions]:
    """The conversation as text-only chat messages, and what the provider added to it."""
    task = next((_text(m) for m in messages if m.role == "user"), "")
    added = Additions()
    if tools:
        example = pick_example(task, {t.name for t in tools})
        turns = example_turns(example) if example is not None else ()
        added = Additions(preamble(tools), turns)
    system = "\n\n".join(p for p in (*system_parts(messages), added.preamble) if p)
    out = [{"role": "system", "content": system}] if system else []
    out += [
        {"role": "assistant" if i % 2 else "user", "content": turn}
        for i, turn in enumerate(added.example)
    ]
    shown = len(out)
    names: dict[str, str] = {}
    for m in messages:
        if m.role == "assistant":
            lines = [m.content] if m.content else []
            for call in m.tool_calls:
                names[call.id] = call.name
                lines.append(call_text(call.name, call.input))
            out.append({"role": "assistant", "content": "\n".join(lines)})
        elif m.role == "tool":
            name = names.get(m.tool_call_id, "the tool")
            result = f"Result of {name}:\n{m.content or '(no output)'}"
            if out and out[-1]["role"] == "user" and out[-1]["content"].startswith("Result of "):
                out[-1]["content"] += "\n\n" + result  # several calls of one response
            else:
                out.append({"role": "user", "content": result})
        elif m.role != "system":
            out.append({"role": "user", "content": _text(m)})
    if tools and task and len(out) > shown + 1 and out[-1]["role"] == "user":
        added = Additions(added.preamble, added.example, reminder(task))
        out[-1] = {"role": "user", "content": out[-1]["content"] + added.reminder}
    return out, added


def call_text(name: str, arguments: str) -> str:
    """A tool call as the model writes it."""
    return f'{{"name": {json.dumps(name)}, "arguments": {arguments or "{}"}}}'


def _text(message: Message) -> str:
    blocks = content_blocks(message)
    if blocks is None:
        return message.content
    return "\n".join(b.text if b.type == "text" else "[image omitted]" for b in blocks)
