"""Builders shared by the memory tests."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sp4rk.agent import Step
from sp4rk.llm import Message, ReasoningItem, SimpleTokenCounter, ToolCall


def fake_hash(seed: object) -> str:
    """A full-length hex hash, distinct per seed (what the executor stores in cache_hash)."""
    return hashlib.sha256(str(seed).encode()).hexdigest()


def call_step(
    i: int,
    observation: str = "",
    *,
    tool: str = "read_file",
    args: dict[str, Any] | None = None,
    group: int = 0,
    cached: bool = True,
    untrusted: bool = False,
    thought: str | None = None,
    nudge: str = "",
    call_id: str | None = None,
) -> Step:
    """A tool step ``i``: calls ``tool`` on ``p{i}`` and observes ``observation``."""
    obs = observation or f"output {i} " + "o" * 400
    return Step(
        thought=f"thinking {i}" if thought is None else thought,
        action=ToolCall(
            f"c{i}" if call_id is None else call_id, tool, json.dumps(args or {"path": f"p{i}"})
        ),
        observation=obs,
        response_group=group,
        cache_hash=fake_hash(i) if cached else "",
        is_untrusted=untrusted,
        user_nudge=nudge,
    )


def mixed_history(n: int = 24) -> list[Step]:
    """Standalone calls, 3-call groups, nudge-only steps, text replies and untrusted results."""
    steps: list[Step] = []
    group = 0
    i = 0
    while len(steps) < n:
        kind = i % 6
        if kind == 2:
            group += 1
            for k in range(3):
                steps.append(
                    call_step(len(steps), group=group, thought="grouped" if k == 0 else "")
                )
            head = steps[-3]
            assert head.action is not None
            head.reasoning_items = [ReasoningItem(f"rs_{head.action.id}", "plan")]
        elif kind == 3:
            steps.append(Step(user_nudge=f"nudge {i}: keep going"))
        elif kind == 4:
            steps.append(call_step(len(steps), tool="web_fetch", untrusted=True, cached=False))
        elif kind == 5:
            steps.append(Step(thought=f"just text {i}", user_nudge="call a tool or finish"))
        else:
            steps.append(call_step(len(steps)))
        i += 1
    return steps


def tokens(messages: list[Message]) -> int:
    """What the default counter says ``messages`` cost."""
    return SimpleTokenCounter().count_messages(messages)


class CountingCounter(SimpleTokenCounter):
    """A SimpleTokenCounter that records how many characters it was asked to count."""

    def __init__(self) -> None:
        super().__init__()
        self.chars = 0

    def count(self, text: str) -> int:
        self.chars += len(text)
        return super().count(text)
