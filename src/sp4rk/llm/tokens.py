"""Token counting. The default is a byte-based estimate calibrated by provider usage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from sp4rk.llm.types import Message

#: Estimated cost of one image block, in tokens.
IMAGE_TOKENS = 765
#: Fixed per-message overhead (role markers, separators), in tokens.
MESSAGE_OVERHEAD_TOKENS = 4


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens in text and in message lists."""

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Tokens a provider will bill for ``messages``."""
        ...


class SimpleTokenCounter:
    """The estimate ``ceil(utf8_bytes / 4)``: offline, fast, and good enough to budget with.

    Args:
        image_tokens: tokens charged per image block.
    """

    __slots__ = ("image_tokens",)

    def __init__(self, *, image_tokens: int = IMAGE_TOKENS) -> None:
        self.image_tokens = image_tokens

    def count(self, text: str) -> int:
        """Tokens in ``text``: a quarter of its UTF-8 length, rounded up."""
        if not text:
            return 0
        # ASCII fast path: len(str) equals the byte length.
        n = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        return (n + 3) // 4

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Sum over messages of role, content (or blocks), tool calls and a fixed overhead."""
        total = 0
        for m in messages:
            total += self.count(m.role) + MESSAGE_OVERHEAD_TOKENS
            if m.content_blocks:
                for b in m.content_blocks:
                    total += self.image_tokens if b.type == "image" else self.count(b.text)
            else:
                total += self.count(m.content)
            total += self.count(m.reasoning_content)
            for c in m.tool_calls:
                total += self.count(c.name) + self.count(c.input)
        return total
