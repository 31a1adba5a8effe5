"""The ``update_checklist`` tool and the checklist format the executor's gates read."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sp4rk.tools.base import ToolError, ToolTraits
from sp4rk.tools.context import RunContext
from sp4rk.tools.function import own_tool

_ITEM = re.compile(r"^- \[([ x])\] (.+)$")

FORMAT_GUIDE = (
    "Write one item per line as '- [ ] task' (open) or '- [x] task' (done, lower-case x), "
    "with no indentation."
)


@dataclass(slots=True, frozen=True)
class ChecklistItem:
    """One checklist line."""

    text: str
    done: bool


def parse_checklist(todo_list: str) -> tuple[list[ChecklistItem], list[str]]:
    """Parse markdown checkbox lines; return the items and a message per invalid line."""
    items: list[ChecklistItem] = []
    errors: list[str] = []
    for number, raw in enumerate(todo_list.split("\n"), start=1):
        line = raw.rstrip(" \t\r")
        if not line:
            continue
        if line != line.lstrip():
            errors.append(f"line {number}: nested lists are not allowed")
            continue
        match = _ITEM.match(line)
        if match is None:
            if line.startswith("- "):
                errors.append(f"line {number}: checkbox must be '[ ]' or '[x]': {line!r}")
            else:
                errors.append(f"line {number}: not a checklist item: {line!r}")
            continue
        items.append(ChecklistItem(match.group(2), match.group(1) == "x"))
    if not items and not errors:
        errors.append("checklist is empty")
    return items, errors


@own_tool(
    name="update_checklist", traits=ToolTraits(cacheable=False, brief_results=True, internal=True)
)
def update_checklist(ctx: RunContext, todo_list: str, step_id: str = "") -> str:
    """Record your progress checklist for the current task.

    Call it first with every sub-task unchecked, then again right after finishing each
    sub-task, checking exactly one more item per call.

    Args:
        ctx: the run context.
        todo_list: the whole checklist, one '- [ ] item' or '- [x] item' per line.
        step_id: the plan step this checklist belongs to (optional).
    """
    items, errors = parse_checklist(todo_list)
    if errors:
        raise ToolError("invalid checklist: " + "; ".join(errors) + ". " + FORMAT_GUIDE)
    step = step_id or ctx.step_id
    if ctx.step_todo_update is not None:
        ctx.step_todo_update(step, [(i.text, i.done) for i in items])
    done = sum(i.done for i in items)
    where = f" for step {step}" if step else ""
    text = f"Checklist updated{where}: {done}/{len(items)} done."
    if done < len(items):
        text += " Check off each item as soon as it is done, one per update."
    return text
