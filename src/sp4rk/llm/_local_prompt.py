"""What ``LocalProvider`` shows a local model: chat messages any template renders.

With tools, the messages carry what a small model needs to make useful calls:

- **A compact tool listing**: each tool's name, its arguments (``?`` marks an optional one)
  and the first line of its description. The grammar already admits only calls matching the
  schemas, so the schemas themselves stay out of the prompt (about a sixth of the tokens).
- **Worked examples**: short exchanges showing a task, the call that serves it, its result
  and the ``finish`` that answers, for the offered tools they use.
- **The task again** after every tool result, with what to do next: a small model loses
  sight of a task that lies a few messages back.

Tool calls are written in the JSON form the model is asked to produce, and tool results
become user messages naming the tool, because small models' templates rarely know the
``tool`` role. What the provider adds itself (the listing, the examples, the reminder) is
:class:`Additions`, so its usage report can leave it out.
"""

from __future__ import annotations

import json
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
#: Worked examples: the tools each needs, and the exchange (task, call, result, call, ...).
EXAMPLES: tuple[tuple[frozenset[str], tuple[str, ...]], ...] = (
    (
        frozenset({"read_file", FINISH}),
        (
            "What colour is the door in house.txt?",
            '{"name": "read_file", "arguments": {"path": "house.txt"}}',
            "The house has a red door.",
            '{"name": "finish", "arguments": {"answer": "The door is red."}}',
        ),
    ),
    (
        frozenset({"write_file", FINISH}),
        (
            "Make a file todo.txt that says: buy milk",
            '{"name": "write_file", "arguments": {"path": "todo.txt", "content": "buy milk"}}',
            "Wrote todo.txt",
            '{"name": "finish", "arguments": {"answer": "Created todo.txt."}}',
        ),
    ),
    (
        frozenset({"bash_exec", FINISH}),
        (
            "What does the command ls print?",
            '{"name": "bash_exec", "arguments": {"command": "ls"}}',
            "src tests",
            '{"name": "finish", "arguments": {"answer": "ls prints: src tests"}}',
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class Additions:
    """Text the provider adds to the caller's conversation."""

    preamble: str = ""
    """The listing, the instructions and the examples (the same for every call with these
    tools), at the end of the system message."""
    reminder: str = ""
    """The task again, after the latest tool result."""


def tool_line(tool: ToolDefinition) -> str:
    """``- read_file(path, start_line?): Read a text file ...``."""
    schema = openai_parameters(tool.input_schema)
    required = set(schema.get("required", []))
    properties: dict[str, Any] = schema.get("properties", {})
    names = ", ".join(p if p in required else f"{p}?" for p in properties)
    first = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
    return f"- {tool.name}({names}): {first}"


def preamble(tools: Sequence[ToolDefinition]) -> str:
    """The instructions, the compact listing and the examples for ``tools``."""
    offered = {t.name for t in tools}
    text = INSTRUCTIONS.format(
        tools="\n".join(tool_line(t) for t in tools),
        finish=FINISH if FINISH in offered else "the tool that ends the task",
    )
    shown = [turns for needs, turns in EXAMPLES if needs <= offered]
    if shown:
        blocks = []
        for task, *rest in shown:
            lines = [f"Task: {task}"]
            for i, turn in enumerate(rest):
                lines.append(turn if i % 2 == 0 else f"Result: {turn}")
            blocks.append("\n".join(lines))
        text += "\n\nExamples:\n\n" + "\n\n".join(blocks)
    return text


def reminder(task: str) -> str:
    """What follows the latest tool result: the task again, and what to do next."""
    return f"\n\nTask: {task}\nCall the next tool, or {FINISH} with the answer."


def local_messages(
    messages: Sequence[Message], tools: Sequence[ToolDefinition]
) -> tuple[list[dict[str, str]], Additions]:
    """The conversation as text-only chat messages, and what the provider added to it."""
    system = "\n\n".join(system_parts(messages))
    added = Additions()
    if tools:
        added = Additions(preamble=preamble(tools))
        system = "\n\n".join(p for p in (system, added.preamble) if p)
    out = [{"role": "system", "content": system}] if system else []
    names: dict[str, str] = {}
    task = ""
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
            text = _text(m)
            task = task or text
            out.append({"role": "user", "content": text})
    if (
        tools
        and task
        and len(out) > 1
        and out[-1]["role"] == "user"
        and out[-1] is not _first_user(out)
    ):
        added = Additions(preamble=added.preamble, reminder=reminder(task))
        out[-1] = {"role": "user", "content": out[-1]["content"] + added.reminder}
    return out, added


def _first_user(out: list[dict[str, str]]) -> dict[str, str] | None:
    return next((m for m in out if m["role"] == "user"), None)


def call_text(name: str, arguments: str) -> str:
    """A tool call as the model writes it."""
    return f'{{"name": {json.dumps(name)}, "arguments": {arguments or "{}"}}}'


def _text(message: Message) -> str:
    blocks = content_blocks(message)
    if blocks is None:
        return message.content
    return "\n".join(b.text if b.type == "text" else "[image omitted]" for b in blocks)
