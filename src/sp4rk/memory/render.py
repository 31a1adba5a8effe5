"""Steps → chat messages that every provider accepts.

Each tool call gets exactly one tool message, in order; the steps of one response (same
non-zero ``response_group``) become one assistant message with several calls; nudges become
user messages; untrusted observations are wrapped in ``<untrusted-content>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from sp4rk._internal.text import INVISIBLE, has_visible_content
from sp4rk._internal.untrusted import wrap_untrusted_content
from sp4rk.agent.types import Step
from sp4rk.llm.types import Message, ToolCall

#: Content of an assistant turn that had neither text nor calls (providers reject empty turns).
EMPTY_ASSISTANT = "(proceeding)"
#: Content of a tool message whose observation was empty.
NO_OUTPUT = "(no output)"


def step_units(steps: Sequence[Step]) -> list[tuple[int, int]]:
    """Split ``steps`` into render units: ``(start, end)`` of each group or standalone step."""
    units: list[tuple[int, int]] = []
    i, n = 0, len(steps)
    while i < n:
        j = i + 1
        group = steps[i].response_group
        if group > 0:
            while j < n and steps[j].response_group == group:
                j += 1
        units.append((i, j))
        i = j
    return units


def call_id(step: Step, index: int) -> str:
    """The step's tool-call id, or a stable stand-in when the model gave none."""
    assert step.action is not None
    return step.action.id or f"call_{index}"


def render_unit(
    steps: Sequence[Step], start: int, end: int, *, wrap_untrusted: bool = True
) -> list[Message]:
    """The messages for ``steps[start:end]``, one group or one standalone step."""
    first = steps[start]
    thought = first.thought.rstrip(INVISIBLE)
    calls = [
        ToolCall(call_id(s, i), s.action.name, s.action.input)
        for i, s in enumerate(steps[start:end], start)
        if s.action is not None
    ]
    nudges = [s.user_nudge for s in steps[start:end] if has_visible_content(s.user_nudge)]
    out: list[Message] = []
    nudge_only = (
        not calls and not thought and not first.reasoning_content and not first.reasoning_items
    )
    if not (nudge_only and nudges):
        out.append(
            Message(
                "assistant",
                content=thought or ("" if calls else EMPTY_ASSISTANT),
                reasoning_content=first.reasoning_content,
                tool_calls=calls,
                reasoning_items=list(first.reasoning_items),
            )
        )
    for i, s in enumerate(steps[start:end], start):
        if s.action is not None:
            out.append(tool_message(s, i, wrap_untrusted=wrap_untrusted))
    if nudges:
        out.append(Message("user", content="\n\n".join(nudges)))
    return out


def tool_message(
    step: Step, index: int, *, content: str | None = None, wrap_untrusted: bool = True
) -> Message:
    """The tool message answering ``step``'s call (``content`` overrides the observation)."""
    assert step.action is not None
    text = step.observation.rstrip(INVISIBLE) if content is None else content
    text = text or NO_OUTPUT
    if wrap_untrusted and step.is_untrusted:
        text = wrap_untrusted_content(text, step.action.name)
    return Message("tool", content=text, tool_call_id=call_id(step, index))


def render_steps(steps: Sequence[Step], *, wrap_untrusted: bool = True) -> list[Message]:
    """Every step as messages, in order."""
    out: list[Message] = []
    for start, end in step_units(steps):
        out.extend(render_unit(steps, start, end, wrap_untrusted=wrap_untrusted))
    return out
