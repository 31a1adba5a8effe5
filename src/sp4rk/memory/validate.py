"""One check that a message list is a history every provider accepts.

Providers differ in what they tolerate, and the strictest rules win: Anthropic rejects a
``tool_result`` without the matching ``tool_use`` just before it, OpenAI rejects an assistant
turn whose calls are not all answered, and both reject empty turns. Compaction, pruning, pause
and resume all rewrite histories, so tests run :func:`validate_history` after each of them
(and the context window runs it on every strategy's output before trusting it).
"""

from __future__ import annotations

from collections.abc import Sequence

from sp4rk.llm.types import Message
from sp4rk.memory.render import is_blank, sanitized_call_id

_ROLES = frozenset({"system", "user", "assistant", "tool"})


class InvalidHistoryError(ValueError):
    """A message list breaks the rules every provider enforces.

    Attributes:
        problems: one line per problem, each naming the message index.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        listing = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid message history ({len(self.problems)} problem(s)):\n{listing}")


def history_problems(messages: Sequence[Message], *, partial: bool = False) -> list[str]:
    """Every rule ``messages`` breaks, in message order (empty when valid).

    The rules:

    - roles are ``system``, ``user``, ``assistant`` or ``tool``;
    - the first non-system message is a user message;
    - an assistant turn has text or tool calls (no empty turns);
    - tool-call ids are non-empty and unique across the history, also once sanitised the way
      some providers do (every character outside ``[A-Za-z0-9_-]`` becomes ``_``);
    - the messages right after an assistant turn with calls are its results: exactly one per
      call, in call order, with nothing in between;
    - a tool message answers a call of that turn, and has content;
    - only assistant messages carry calls or reasoning; only tool messages carry
      ``tool_call_id``; user and system messages are not empty;
    - the prompt does not end with an assistant message (a prefill that providers reject
      with tools or reasoning), unless ``partial``.

    "Empty" means blank as rendering sees it: whitespace (Unicode too) and zero-width
    characters only.

    Args:
        messages: the history to check.
        partial: ``messages`` is the start of a history that goes on (a compacted prefix), so
            it may end with an assistant turn.
    """
    problems: list[str] = []
    seen_ids: dict[str, str] = {}  # sanitised id -> the id first seen
    expected: list[str] = []  # result ids still owed by the current assistant turn, in order
    owner = -1  # index of that assistant turn
    first_turn_checked = False
    for i, m in enumerate(messages):
        if m.role not in _ROLES:
            problems.append(f"message {i}: unknown role {m.role!r}")
            continue
        if expected and m.role != "tool":
            problems.append(
                f"message {i}: {m.role} message before the results of message {owner} "
                f"(missing results for {', '.join(expected)})"
            )
            expected = []
        if m.role != "system" and not first_turn_checked:
            first_turn_checked = True
            if m.role != "user":
                problems.append(f"message {i}: the first non-system message is {m.role}, not user")
        if m.role != "assistant" and (m.tool_calls or m.reasoning_items or m.reasoning_content):
            problems.append(f"message {i}: a {m.role} message carries tool calls or reasoning")
        if m.role != "tool" and m.tool_call_id:
            problems.append(f"message {i}: a {m.role} message has a tool_call_id")
        if m.role == "assistant":
            expected = _check_assistant(i, m, seen_ids, problems)
            owner = i
        elif m.role == "tool":
            _check_tool(i, m, expected, owner, problems)
        elif _empty(m):
            problems.append(f"message {i}: empty {m.role} message")
    if expected:
        problems.append(
            f"message {owner}: the history ends before the results for {', '.join(expected)}"
        )
    if messages and messages[-1].role == "assistant" and not partial:
        problems.append(f"message {len(messages) - 1}: the prompt ends with an assistant message")
    return problems


def _empty(m: Message) -> bool:
    return is_blank(m.content) and not m.content_blocks


def _check_assistant(i: int, m: Message, seen: dict[str, str], problems: list[str]) -> list[str]:
    """Check one assistant turn; return the ids of the results it expects, in order."""
    if not m.tool_calls and _empty(m):
        problems.append(f"message {i}: empty assistant turn (no text and no tool calls)")
    ids: list[str] = []
    for call in m.tool_calls:
        if not call.id:
            problems.append(f"message {i}: tool call {call.name!r} has no id")
            continue
        key = sanitized_call_id(call.id)
        first = seen.get(key)
        if first is None:
            seen[key] = call.id
        elif first == call.id:
            problems.append(f"message {i}: tool call id {call.id!r} is used twice")
        else:
            problems.append(
                f"message {i}: tool call id {call.id!r} collides with {first!r} once sanitised "
                f"({key!r})"
            )
        ids.append(call.id)
    return ids


def _check_tool(i: int, m: Message, expected: list[str], owner: int, problems: list[str]) -> None:
    """Check one tool result against the ids its assistant turn still expects (consumed)."""
    if _empty(m):
        problems.append(f"message {i}: empty tool result for {m.tool_call_id!r}")
    if not expected:
        problems.append(f"message {i}: tool result {m.tool_call_id!r} answers no pending call")
        return
    if m.tool_call_id != expected[0]:
        where = "out of order" if m.tool_call_id in expected else "unknown to that turn"
        problems.append(
            f"message {i}: tool result {m.tool_call_id!r} is {where} "
            f"(message {owner} expects {expected[0]!r} next)"
        )
        if m.tool_call_id in expected:
            expected.remove(m.tool_call_id)
        return
    expected.pop(0)


def validate_history(messages: Sequence[Message]) -> None:
    """Raise unless ``messages`` is a history every provider accepts.

    Raises:
        InvalidHistoryError: listing every broken rule (see :func:`history_problems`).
    """
    problems = history_problems(messages)
    if problems:
        raise InvalidHistoryError(problems)
