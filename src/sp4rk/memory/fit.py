"""Last-resort shrinking of a compacted history until it fits a token goal.

Used by ``ContextWindow.compact`` when a strategy's output is still too large. It degrades in
order of what is lost, stopping as soon as the history fits:

1. oldest first, every turn but the last: tool results masked (a cache reference when the
   result was cached), long thoughts, tool-call inputs and notes cut;
2. the last turn's tool results cut to half the goal (the head stays, with a note);
3. the oldest turns dropped whole, replaced by one note saying how many messages went;
4. the last turn's tool results cut to whatever room is left.

Turns are never split: an assistant message and its tool results go together, so the history
stays valid for every provider.
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

#: Old assistant text kept, in characters.
MAX_OLD_TEXT_CHARS = 2000
#: Longest string value kept in an old tool call's JSON input, in characters.
MAX_OLD_INPUT_STRING_CHARS = 200
#: Inputs at or below this size are never rewritten.
MAX_OLD_INPUT_CHARS = 1000
#: A truncated tool result keeps at least this many tokens.
MIN_RESULT_TOKENS = 64


class _Sized:
    """Messages with their token counts and running total."""

    def __init__(self, messages: Sequence[Message], counter: TokenCounter) -> None:
        self.counter = counter
        self.messages = list(messages)
        self.tokens = [counter.count_messages([m]) for m in self.messages]
        self.total = sum(self.tokens)

    def put(self, index: int, message: Message) -> None:
        tokens = self.counter.count_messages([message])
        self.total += tokens - self.tokens[index]
        self.messages[index] = message
        self.tokens[index] = tokens


def turns(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """``(start, end)`` of each turn: an assistant message with its results, or one message."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(messages)
    while i < n:
        j = i + 1
        if messages[i].role == "assistant":
            while j < n and messages[j].role == "tool":
                j += 1
        out.append((i, j))
        i = j
    return out


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
    sized = _Sized(messages, counter)
    spans = turns(sized.messages)
    if sized.total <= goal or not spans:
        return sized.messages
    for a, b in spans[:-1]:
        for i in range(a, b):
            shrunk = _shrunk(sized.messages[i], steps_by_call)
            if shrunk is not sized.messages[i]:
                sized.put(i, shrunk)
        if sized.total <= goal:
            return sized.messages
    last = spans[-1]
    _cap_results(sized, last, goal // 2, steps_by_call)
    if sized.total <= goal:
        return sized.messages
    dropped = _drop_oldest(sized, spans, goal)
    if dropped:
        last = (last[0] - dropped + 1, last[1] - dropped + 1)
    if sized.total > goal:
        sized.put(last[0], _shrunk(sized.messages[last[0]], steps_by_call))
        others = sized.total - sum(sized.tokens[last[0] + 1 : last[1]])
        _cap_results(sized, last, goal - others, steps_by_call)
    return sized.messages


def _drop_oldest(sized: _Sized, spans: list[tuple[int, int]], goal: int) -> int:
    """Drop whole turns from the front, leaving the last; return how many messages went."""
    note_tokens = sized.counter.count_messages([_omitted_note(0)])
    cut = 0
    total = sized.total + note_tokens
    for a, b in spans[:-1]:
        if total <= goal:
            break
        total -= sum(sized.tokens[a:b])
        cut = b
    if cut == 0:
        return 0
    note = _omitted_note(cut)
    sized.messages[:cut] = [note]
    sized.tokens[:cut] = [sized.counter.count_messages([note])]
    sized.total = sum(sized.tokens)
    return cut


def _omitted_note(count: int) -> Message:
    return Message(
        "system",
        f"[... {count} earlier messages omitted to fit the context window. Saved facts "
        "(search_facts) and cached results remain available ...]",
    )


def _cap_results(
    sized: _Sized, span: tuple[int, int], budget: int, steps_by_call: Mapping[str, Step]
) -> None:
    """Cut the tool results of ``span`` so that together they take about ``budget`` tokens."""
    results = [i for i in range(*span) if sized.messages[i].role == "tool"]
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
        sized.put(i, replace(message, content=_cut_result(message.content, keep, step)))


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
    """``message`` with its bulk replaced: masked result, cut text, trimmed call inputs."""
    if message.role == "tool":
        step = steps_by_call.get(message.tool_call_id)
        stand_in = masked_observation(step) if step is not None else None
        if stand_in is None and step is None and len(message.content) > len(PRUNED_PLACEHOLDER):
            stand_in = PRUNED_PLACEHOLDER
        return message if stand_in is None else replace(message, content=stand_in)
    content = message.content
    if len(content) > MAX_OLD_TEXT_CHARS:
        content = (
            content[:MAX_OLD_TEXT_CHARS] + f"\n[... {len(content) - MAX_OLD_TEXT_CHARS} chars cut]"
        )
    calls = [
        replace(c, input=_trimmed_input(c.input)) if len(c.input) > MAX_OLD_INPUT_CHARS else c
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
    if isinstance(value, str) and len(value) > MAX_OLD_INPUT_STRING_CHARS:
        cut = len(value) - MAX_OLD_INPUT_STRING_CHARS
        return value[:MAX_OLD_INPUT_STRING_CHARS] + f"…[{cut} chars omitted]"
    if isinstance(value, dict):
        return {k: _trim(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trim(v) for v in value]
    return value
