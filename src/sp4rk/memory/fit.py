"""Last-resort shrinking of a compacted history until it fits a token goal.

Used by ``ContextWindow.compact`` when a strategy's output (or the current prompt) is still too
large. It degrades in order of what is lost, stopping as soon as the history fits:

1. oldest first, every turn but the last (and but the leading summaries): tool results masked
   (a cache reference when the result can be read back), long thoughts, tool-call inputs and
   notes cut;
2. the last turn's tool results cut to half the goal (the head stays, with a note);
3. the oldest turns after the leading summaries dropped whole, replaced by one note saying
   that earlier messages went;
4. the leading summaries dropped, oldest first (behind the same kind of note);
5. the last turn's tool results cut to whatever room is left.

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

from sp4rk._core.trajectory import Step
from sp4rk._internal import safejson
from sp4rk._internal.text import INVISIBLE
from sp4rk.llm.tokens import TokenCounter
from sp4rk.llm.types import Message
from sp4rk.memory.compaction import NO_CACHE, PRUNED_PLACEHOLDER, ResultRefs
from sp4rk.memory.render import NO_OUTPUT, is_blank, wrap_for

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

    def delete(self, index: int) -> None:
        """Remove ``messages[index]``."""
        self.total -= self.tokens.pop(index)
        del self.messages[index]

    def cut(self, start: int, end: int) -> None:
        """Replace ``messages[start:end]`` by the omission note (kept if it is already there)."""
        if end <= start:
            return
        first = self.messages[start]
        note = first if is_omitted_note(first) else Message("system", OMITTED_NOTE)
        note_tokens = self.tokens[start] if note is first else self.counter.count_messages([note])
        self.total -= sum(self.tokens[start:end]) - note_tokens
        self.messages[start:end] = [note]
        self.tokens[start:end] = [note_tokens]


def is_omitted_note(message: Message) -> bool:
    """Whether ``message`` is the note standing for omitted earlier messages."""
    return message.role == "system" and message.content == OMITTED_NOTE


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
    message: Message,
    tokens: int,
    counter: TokenCounter,
    steps_by_call: Mapping[str, Step],
    refs: ResultRefs = NO_CACHE,
) -> int:
    """A lower bound on what ``message`` (counting ``tokens``) takes once shrunk."""
    shrunk = _shrunk(message, steps_by_call, refs)
    return tokens if shrunk is message else min(tokens, counter.count_messages([shrunk]))


def shrink(
    sized: Sized,
    goal: int,
    steps_by_call: Mapping[str, Step],
    refs: ResultRefs = NO_CACHE,
    *,
    settled: int = 0,
    head: int = 0,
) -> int:
    """Shrink ``sized`` in place toward ``goal`` tokens (the steps of the module docstring).

    Args:
        sized: the history and its counts.
        goal: token budget for the whole list.
        steps_by_call: the step behind each tool call id, for cache references.
        refs: how results are referred to (checked against the result cache when known).
        settled: a turn boundary before which the messages are already shrunk (a previous
            fit): step 1 starts there.
        head: how many leading messages are summaries, dropped only after every other turn
            but the last.

    Returns:
        The new ``settled``: the messages before it are shrunk (in the final indexing).
    """
    messages = sized.messages
    if sized.total <= goal or not messages:
        return settled
    last = last_turn_start(messages)
    head = min(head, last)
    i = max(min(settled, last), head)
    while i < last:
        j = turn_end(messages, i)
        for k in range(i, j):
            sized.put(k, _shrunk(messages[k], steps_by_call, refs))
        i = j
        if sized.total <= goal:
            return i
    _cap_results(sized, last, goal // 2, steps_by_call, refs)
    if sized.total <= goal:
        return last
    last -= _drop_turns(sized, head, last, goal)
    if sized.total > goal and head:
        # The summaries go last, behind one note: the one the previous drop left after them
        # moves to the front.
        if head < last and is_omitted_note(messages[head]):
            sized.delete(head)
            last -= 1
        last -= _drop_turns(sized, 0, head, goal)
    if sized.total > goal:
        sized.put(last, _shrunk(messages[last], steps_by_call, refs))
        others = sized.total - sum(sized.tokens[last + 1 :])
        _cap_results(sized, last, goal - others, steps_by_call, refs)
    return last


def _drop_turns(sized: Sized, start: int, stop: int, goal: int) -> int:
    """Drop the oldest whole turns of ``messages[start:stop]`` until ``goal`` is met.

    One omission note stands for them (a note already at ``start``, or just before it, is
    reused). Returns how many messages went (net).
    """
    messages = sized.messages
    if start > 0 and is_omitted_note(messages[start - 1]):
        start -= 1
    if start >= stop:
        return 0
    first = start + 1 if is_omitted_note(messages[start]) else start
    total = sized.total
    if first == start:
        total += sized.counter.count_messages([Message("system", OMITTED_NOTE)])
    cut = first
    while cut < stop and total > goal:
        end = turn_end(messages, cut)
        total -= sum(sized.tokens[cut:end])
        cut = end
    if cut == first:
        return 0
    before = len(messages)
    sized.cut(start, cut)
    return before - len(messages)


def _cap_results(
    sized: Sized,
    start: int,
    budget: int,
    steps_by_call: Mapping[str, Step],
    refs: ResultRefs,
) -> None:
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
        sized.put(i, replace(message, content=_cut_result(message.content, keep, step, refs)))


def _cut_result(content: str, keep_chars: int, step: Step | None, refs: ResultRefs) -> str:
    """About ``keep_chars`` of a tool result: its head, then a note saying how to get the rest.

    The head is cut from the raw observation and wrapped once when the step is untrusted; the
    note (trusted) follows the boundary.
    """
    text = content
    where = "re-run the tool with a narrower request if you need more."
    if step is not None and step.action is not None:
        text = step.observation.rstrip(INVISIBLE)
        if is_blank(text):
            text = NO_OUTPUT
        reference = refs.reference(step)
        if reference is not None:
            where = (
                f'the full result is cached: tool_result_read(hash="{reference[0]}", start_line=1).'
            )
    overhead = len(wrap_for(step, "")) + len(_cut_note(keep_chars, len(text), where))
    shown = max(0, keep_chars - overhead)
    return wrap_for(step, text[:shown]) + _cut_note(shown, len(text), where)


def _cut_note(shown: int, total: int, where: str) -> str:
    return f"\n[... cut to fit the context window: {shown} of {total} chars shown; {where}]"


def _shrunk(message: Message, steps_by_call: Mapping[str, Step], refs: ResultRefs) -> Message:
    """``message`` with its bulk replaced: masked result, cut text, trimmed call inputs.

    Idempotent, and ``message`` itself when there is nothing to shrink.
    """
    if message.role == "tool":
        step = steps_by_call.get(message.tool_call_id)
        if step is not None:
            stand_in = refs.masked(step)
        elif len(message.content) > len(PRUNED_PLACEHOLDER):
            stand_in = PRUNED_PLACEHOLDER
        else:
            stand_in = None
        if stand_in is None:
            return message
        stand_in = wrap_for(step, stand_in)
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
        data = safejson.loads(raw)
    except ValueError:
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
