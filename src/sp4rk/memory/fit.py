"""Last-resort shrinking of a compacted history until it fits a token goal.

Used by ``ContextWindow.compact`` when a strategy's output is still too large. It degrades in
order of what is lost, stopping as soon as the history fits:

1. oldest first, every turn but the last: tool results masked (a cache reference when the
   result was cached), long thoughts, tool-call inputs and notes cut;
2. the last turn's tool results cut to half the goal (the head stays, with a note);
3. the oldest turns dropped whole, replaced by one note saying that earlier messages went;
4. the last turn's tool results cut to whatever room is left.

Turns are never split: an assistant message and its tool results go together, so the history
stays valid for every provider. Shrinking is idempotent (a shrunk message shrinks to itself)
and a leading omission note is kept rather than stacked, so a history this module already
fitted can be fitted again as it grows; the work then only touches what is new
(``shrink(..., settled=...)``), what is dropped, and the last turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sp4rk.agent.types import Step
from sp4rk.llm.tokens import TokenCounter
from sp4rk.llm.types import Message
from sp4rk.memory.compaction import PRUNED_PLACEHOLDER, SHORT_HASH_CHARS, masked_observation
from sp4rk.memory.render import ensure_wrapped

#: Old assistant text kept, in characters.
MAX_OLD_TEXT_CHARS = 2000
#: Longest string value kept in an old tool call's JSON input, in characters.
MAX_OLD_INPUT_STRING_CHARS = 200
#: Inputs at or below this size are never rewritten.
MAX_OLD_INPUT_CHARS = 1000
#: A truncated tool result keeps at least this many tokens.
MIN_RESULT_TOKENS = 64
#: Text at most this much over a limit is left alone: it is what a cut leaves (the kept head
#: and the cut note), so cutting it again would only replace one note by another.
CUT_SLACK_CHARS = 64
#: Replaces the turns dropped to fit (and, in ``ContextWindow``, steps too old to fit at all).
OMITTED_NOTE = (
    "[... earlier messages omitted to fit the context window. Saved facts (search_facts) and "
    "cached results remain available ...]"
)


class Sized:
    """Messages with their token counts and running total (copies of the lists given).

    Args:
        messages: the history.
        counter: counts messages that change.
        tokens: the count of each message, when already known (not recounted).
    """

    def __init__(
        self,
        messages: Sequence[Message],
        counter: TokenCounter,
        tokens: Sequence[int] | None = None,
    ) -> None:
        self.counter = counter
        self.messages = list(messages)
        if tokens is None:
            self.tokens = [counter.count_messages([m]) for m in self.messages]
        else:
            self.tokens = list(tokens)
        self.total = sum(self.tokens)

    def put(self, index: int, message: Message) -> None:
        """Replace ``messages[index]`` (a no-op when ``message`` is the one already there)."""
        if message is self.messages[index]:
            return
        tokens = self.counter.count_messages([message])
        self.total += tokens - self.tokens[index]
        self.messages[index] = message
        self.tokens[index] = tokens

    def cut_front(self, end: int) -> None:
        """Replace ``messages[:end]`` by the omission note (kept if it is already first)."""
        if end <= 0:
            return
        note = self.messages[0] if is_omitted_note(self.messages[0]) else _omitted_note()
        note_tokens = self.tokens[0] if note is self.messages[0] else None
        if note_tokens is None:
            note_tokens = self.counter.count_messages([note])
        self.total -= sum(self.tokens[:end]) - note_tokens
        self.messages[:end] = [note]
        self.tokens[:end] = [note_tokens]


def is_omitted_note(message: Message) -> bool:
    """Whether ``message`` is the note standing for omitted earlier messages."""
    return message.role == "system" and message.content == OMITTED_NOTE


def turns(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """``(start, end)`` of each turn: an assistant message with its results, or one message."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(messages)
    while i < n:
        j = turn_end(messages, i)
        out.append((i, j))
        i = j
    return out


def turn_end(messages: Sequence[Message], start: int) -> int:
    """Index just past the turn that starts at ``messages[start]``."""
    j, n = start + 1, len(messages)
    if messages[start].role == "assistant":
        while j < n and messages[j].role == "tool":
            j += 1
    return j


def last_turn_start(messages: Sequence[Message]) -> int:
    """Index of the first message of the last turn (0 for an empty list)."""
    k = len(messages) - 1
    if k <= 0:
        return 0
    if messages[k].role != "tool":
        return k
    while k > 0 and messages[k].role == "tool":
        k -= 1
    return k if messages[k].role == "assistant" else len(messages) - 1


def smallest_tokens(
    message: Message, tokens: int, counter: TokenCounter, steps_by_call: Mapping[str, Step]
) -> int:
    """A lower bound on what ``message`` (counting ``tokens``) takes once shrunk."""
    shrunk = _shrunk(message, steps_by_call)
    return tokens if shrunk is message else min(tokens, counter.count_messages([shrunk]))


def fit_history(
    messages: Sequence[Message],
    goal: int,
    counter: TokenCounter,
    steps_by_call: Mapping[str, Step],
) -> list[Message]:
    """``messages`` shrunk (see the module docstring) until they count at most ``goal`` tokens.

    Returns the best it could do, which may still exceed ``goal`` when even the last turn
    alone is larger; the caller decides whether that is acceptable.

    Args:
        messages: a valid history (a compacted prefix).
        goal: token budget for the whole list.
        counter: the window's token counter.
        steps_by_call: the step behind each tool call id, for cache references.
    """
    sized = Sized(messages, counter)
    shrink(sized, goal, steps_by_call)
    return sized.messages


def shrink(sized: Sized, goal: int, steps_by_call: Mapping[str, Step], settled: int = 0) -> int:
    """Shrink ``sized`` in place toward ``goal`` tokens (the steps of the module docstring).

    Args:
        sized: the history and its counts.
        goal: token budget for the whole list.
        steps_by_call: the step behind each tool call id, for cache references.
        settled: a turn boundary before which the messages are already shrunk (a previous
            fit): step 1 starts there.

    Returns:
        The new ``settled``: the messages before it are shrunk (in the final indexing).
    """
    messages = sized.messages
    if sized.total <= goal or not messages:
        return settled
    last = last_turn_start(messages)
    i = min(settled, last)
    while i < last:
        j = turn_end(messages, i)
        for k in range(i, j):
            sized.put(k, _shrunk(messages[k], steps_by_call))
        i = j
        if sized.total <= goal:
            return i
    _cap_results(sized, last, goal // 2, steps_by_call)
    if sized.total <= goal:
        return last
    last -= _drop_oldest(sized, last, goal)
    if sized.total > goal:
        sized.put(last, _shrunk(messages[last], steps_by_call))
        others = sized.total - sum(sized.tokens[last + 1 :])
        _cap_results(sized, last, goal - others, steps_by_call)
    return last


def _drop_oldest(sized: Sized, last: int, goal: int) -> int:
    """Drop whole turns before ``last`` from the front; return how many messages went (net)."""
    messages = sized.messages
    first = 1 if is_omitted_note(messages[0]) else 0
    total = sized.total
    if not first:
        total += sized.counter.count_messages([_omitted_note()])
    cut = first
    while cut < last and total > goal:
        end = turn_end(messages, cut)
        total -= sum(sized.tokens[cut:end])
        cut = end
    if cut == first:
        return 0
    before = len(messages)
    sized.cut_front(cut)
    return before - len(messages)


def _omitted_note() -> Message:
    return Message("system", OMITTED_NOTE)


def _cap_results(sized: Sized, start: int, budget: int, steps_by_call: Mapping[str, Step]) -> None:
    """Cut the tool results of the turn at ``start`` so they take about ``budget`` tokens."""
    end = turn_end(sized.messages, start)
    results = [i for i in range(start, end) if sized.messages[i].role == "tool"]
    if not results:
        return
    share = max(MIN_RESULT_TOKENS, budget // len(results))
    for i in results:
        tokens = sized.tokens[i]
        if tokens <= share:
            continue
        message = sized.messages[i]
        keep = len(message.content) * share // max(1, tokens)
        step = steps_by_call.get(message.tool_call_id)
        content = _cut_result(message.content, keep, step)
        sized.put(i, replace(message, content=_wrapped(content, step)))


def _wrapped(content: str, step: Step | None) -> str:
    """``content`` inside its untrusted boundary when ``step`` is untrusted."""
    if step is None or not step.is_untrusted or step.action is None:
        return content
    return ensure_wrapped(content, step.action.name)


def _cut_result(text: str, keep_chars: int, step: Step | None) -> str:
    """The head of a tool result with a note saying how to get the rest."""
    where = "re-run the tool with a narrower request if you need more."
    if step is not None and step.cache_hash:
        short = step.cache_hash[:SHORT_HASH_CHARS]
        where = f'the full result is cached: tool_result_read(hash="{short}", start_line=1).'
    note = (
        f"\n[... cut to fit the context window: {keep_chars} of {len(text)} chars shown; {where}]"
    )
    return text[: max(0, keep_chars - len(note))] + note


def _shrunk(message: Message, steps_by_call: Mapping[str, Step]) -> Message:
    """``message`` with its bulk replaced: masked result, cut text, trimmed call inputs.

    Idempotent, and ``message`` itself when there is nothing to shrink.
    """
    if message.role == "tool":
        step = steps_by_call.get(message.tool_call_id)
        stand_in = masked_observation(step) if step is not None else None
        if stand_in is None and step is None and len(message.content) > len(PRUNED_PLACEHOLDER):
            stand_in = PRUNED_PLACEHOLDER
        if stand_in is None:
            return message
        stand_in = _wrapped(stand_in, step)
        return message if stand_in == message.content else replace(message, content=stand_in)
    content = message.content
    if len(content) > MAX_OLD_TEXT_CHARS + CUT_SLACK_CHARS:
        content = (
            content[:MAX_OLD_TEXT_CHARS] + f"\n[... {len(content) - MAX_OLD_TEXT_CHARS} chars cut]"
        )
    calls = [
        replace(c, input=trimmed)
        if len(c.input) > MAX_OLD_INPUT_CHARS and (trimmed := _trimmed_input(c.input)) != c.input
        else c
        for c in message.tool_calls
    ]
    if content is message.content and all(
        a is b for a, b in zip(calls, message.tool_calls, strict=True)
    ):
        return message
    return replace(message, content=content, tool_calls=calls)


def _trimmed_input(raw: str) -> str:
    """A tool call's JSON input with long string values cut (still valid JSON)."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return json.dumps({"omitted": f"{len(raw)} characters of unparseable input"})
    return json.dumps(_trim(data), ensure_ascii=False)


def _trim(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_OLD_INPUT_STRING_CHARS + CUT_SLACK_CHARS:
        cut = len(value) - MAX_OLD_INPUT_STRING_CHARS
        return value[:MAX_OLD_INPUT_STRING_CHARS] + f"…[{cut} chars omitted]"
    if isinstance(value, dict):
        return {k: _trim(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trim(v) for v in value]
    return value
