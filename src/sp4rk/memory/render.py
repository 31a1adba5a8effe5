"""Steps → chat messages that every provider accepts.

Each tool call gets exactly one tool message, in order; the steps of one response (same
non-zero ``response_group``) become one assistant message with several calls; nudges become
user messages; untrusted observations are wrapped in ``<untrusted-content>``. Tool-call ids are
made unique first (:class:`CallIds`): models sometimes omit them or reuse ``call_0`` in every
response, and providers reject a history where one id answers two calls.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

from sp4rk._core.trajectory import Step
from sp4rk._internal.text import INVISIBLE
from sp4rk._internal.untrusted import strip_untrusted_tags, wrap_untrusted_content
from sp4rk.llm.types import Message

#: Content of an assistant turn that had neither text nor calls (providers reject empty turns).
EMPTY_ASSISTANT = "(proceeding)"
#: Content of a tool message whose observation was empty.
NO_OUTPUT = "(no output)"

#: ``observe(index, step)`` gives the text shown for a step's observation (masking hooks in here).
Observe = Callable[[int, Step], str]

_WRAP_CLOSE = "\n</untrusted-content>"
#: What Anthropic-style providers do to a tool-call id: anything else becomes ``_``.
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def is_blank(text: str) -> bool:
    """Whether ``text`` shows nothing: only whitespace (Unicode too) and zero-width characters.

    The one emptiness rule shared by rendering and :func:`~sp4rk.memory.validate_history`:
    providers reject a turn whose text is blank in this sense.
    """
    return all(c.isspace() or c in INVISIBLE for c in text)


def sanitized_call_id(call_id: str) -> str:
    """``call_id`` as providers that allow only ``[A-Za-z0-9_-]`` rewrite it."""
    return _ID_UNSAFE.sub("_", call_id)


class CallIds:
    """Gives every tool call an id that is non-empty and unique within one history.

    The model's own id is kept when it is new; a missing or reused one becomes
    ``call_{step index}`` (suffixed until unique). Ids count as reused when they only differ in
    characters a provider replaces (``call.1`` and ``call_1``). Assignment is append-only, so a
    step keeps its id for the life of the history.
    """

    __slots__ = ("_used",)

    def __init__(self) -> None:
        self._used: set[str] = set()  # sanitised ids

    def reserve(self, call_id: str) -> None:
        """Mark ``call_id`` as taken (an id that appears in a compacted prefix)."""
        self._used.add(sanitized_call_id(call_id))

    def normalize(self, step: Step, index: int) -> Step:
        """``step`` itself when its id is fine, else a copy carrying a fresh unique id."""
        action = step.action
        if action is None:
            return step
        used = self._used
        if action.id and (key := sanitized_call_id(action.id)) not in used:
            used.add(key)
            return step
        base = sanitized_call_id(action.id) if action.id else f"call_{index}"
        candidate, k = f"{base}_{index}" if action.id else base, 1
        while candidate in used:
            candidate, k = f"{base}_{index}_{k}", k + 1
        used.add(candidate)
        return dataclasses.replace(step, action=dataclasses.replace(action, id=candidate))


def unique_call_ids(steps: Sequence[Step]) -> list[Step]:
    """``steps`` with every tool-call id made non-empty and unique (copies only where needed)."""
    ids = CallIds()
    return [ids.normalize(s, i) for i, s in enumerate(steps)]


def step_units(
    steps: Sequence[Step], start: int = 0, end: int | None = None
) -> list[tuple[int, int]]:
    """Split ``steps[start:end]`` into render units: ``(start, end)`` of each group or step."""
    units: list[tuple[int, int]] = []
    i, n = start, len(steps) if end is None else end
    while i < n:
        j = i + 1
        group = steps[i].response_group
        if group > 0:
            while j < n and steps[j].response_group == group:
                j += 1
        units.append((i, j))
        i = j
    return units


def unit_start(steps: Sequence[Step], index: int, floor: int = 0) -> int:
    """First step of the unit containing ``steps[index]`` (never before ``floor``)."""
    group = steps[index].response_group
    while group > 0 and index > floor and steps[index - 1].response_group == group:
        index -= 1
    return index


def render_unit(
    steps: Sequence[Step],
    start: int,
    end: int,
    *,
    observe: Observe | None = None,
    wrap_untrusted: bool = True,
) -> list[Message]:
    """The messages for ``steps[start:end]``, one group or one standalone step.

    Ids are used as they are: normalise them first (:class:`CallIds`).
    """
    first = steps[start]
    unit = steps[start:end]
    thought = "" if is_blank(first.thought) else first.thought.rstrip(INVISIBLE)
    calls = [s.action for s in unit if s.action is not None]
    # Only the last nudge of a group survives: earlier ones were superseded within one reply.
    nudges = [s.user_nudge for s in unit if not is_blank(s.user_nudge)][-1:]
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
                tool_calls=list(calls),
                reasoning_items=list(first.reasoning_items),
            )
        )
    for i, s in enumerate(unit, start):
        if s.action is not None:
            text = observe(i, s) if observe is not None else None
            out.append(tool_message(s, content=text, wrap_untrusted=wrap_untrusted))
    if nudges:
        out.append(Message("user", content=nudges[0].rstrip(INVISIBLE)))
    return out


def tool_message(step: Step, *, content: str | None = None, wrap_untrusted: bool = True) -> Message:
    """The tool message answering ``step``'s call (``content`` overrides the observation)."""
    assert step.action is not None
    body, notes = step.observation_parts() if content is None else (content, "")
    text = body.rstrip(INVISIBLE)
    if is_blank(text):
        text = NO_OUTPUT
    if wrap_untrusted and step.is_untrusted:
        text = wrap_untrusted_content(text, step.action.name)  # sp4rk's notes stay outside
    return Message("tool", content=(text + notes).rstrip(INVISIBLE), tool_call_id=step.action.id)


def render_steps(steps: Sequence[Step], *, wrap_untrusted: bool = True) -> list[Message]:
    """Every step as messages, in order, with unique tool-call ids."""
    return render_range(unique_call_ids(steps), 0, len(steps), wrap_untrusted=wrap_untrusted)


def render_range(
    steps: Sequence[Step],
    start: int,
    end: int,
    *,
    observe: Observe | None = None,
    wrap_untrusted: bool = True,
) -> list[Message]:
    """``steps[start:end]`` as messages; ids must already be unique (:func:`unique_call_ids`).

    ``start`` and ``end`` should be unit boundaries: a range that cuts a response group renders
    its part of the group as a turn of its own (valid, but no longer the model's reply).
    """
    out: list[Message] = []
    for a, b in step_units(steps, start, end):
        out.extend(render_unit(steps, a, b, observe=observe, wrap_untrusted=wrap_untrusted))
    return out


def ensure_wrapped(text: str, source: str) -> str:
    """``text`` inside an untrusted boundary naming ``source``, wrapping it only if it is not.

    Text counts as wrapped when it is exactly what :func:`wrap_untrusted_content` makes of
    some content for this ``source``: one boundary, that source attribute and nothing else,
    no tag left raw inside. Anything else (a boundary forged with another source, or with a
    raw tag inside) is wrapped again, its tags neutralised.
    """
    opening = wrap_untrusted_content("", source).partition("\n")[0] + "\n"
    if text.startswith(opening) and text.endswith(_WRAP_CLOSE):
        inner = text[len(opening) : -len(_WRAP_CLOSE)]
        if len(opening) + len(_WRAP_CLOSE) <= len(text) and strip_untrusted_tags(inner) == inner:
            return text
    return wrap_untrusted_content(text, source)


def wrap_for(step: Step | None, text: str) -> str:
    """``text`` inside ``step``'s untrusted boundary (exactly once) when the step is untrusted."""
    if step is None or not step.is_untrusted or step.action is None:
        return text
    return ensure_wrapped(text, step.action.name)
