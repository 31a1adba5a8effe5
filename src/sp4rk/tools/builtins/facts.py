"""``store_fact`` and ``search_facts``: notes that survive context compaction."""

from __future__ import annotations

import re

from sp4rk.tools.base import ToolError, ToolTraits
from sp4rk.tools.context import RunContext
from sp4rk.tools.function import own_tool
from sp4rk.tools.stores import Fact

_NAMES = r"(?:api[_-]?key|key|password|passwd|token|secret|access[_-]?key|auth)"
_SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("credential assignment", re.compile(_NAMES + r"\s*=\s*\S{8,}", re.IGNORECASE)),
    ("quoted credential", re.compile(_NAMES + r"\"?\s*:\s*[\"'][^\"']{8,}[\"']", re.IGNORECASE)),
    ("Anthropic API key", re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}")),
    ("OpenAI-style API key", re.compile(r"sk-[A-Za-z0-9_-]{20,}")),
    ("bearer token", re.compile(r"bearer\s+[A-Za-z0-9._~+/=-]{20,}", re.IGNORECASE)),
    ("AWS access key", re.compile(r"AKIA[0-9A-Z]{16}")),
    ("GitHub token", re.compile(r"gh[pousr]_[A-Za-z0-9]{36,}")),
)


def find_secret(text: str) -> str:
    """The label of the first credential-like pattern in ``text``, or ``""``."""
    for label, pattern in _SECRET_PATTERNS:
        if pattern.search(text):
            return label
    return ""


@own_tool(name="store_fact", traits=ToolTraits(cacheable=False, brief_results=True, internal=True))
def store_fact(ctx: RunContext, keywords: list[str], content: str) -> str:
    """Save a finding so it survives context compaction; find it again with search_facts.

    Args:
        ctx: the run context.
        keywords: 3 to 10 keywords to find the fact by.
        content: the fact itself, self-contained.
    """
    words = [k.strip() for k in keywords if k.strip()]
    if not 3 <= len(words) <= 10:
        raise ToolError(f"store_fact needs at least 3 and at most 10 keywords, got {len(words)}")
    if not content.strip():
        raise ToolError("validation error: content is required")
    for text in (content, *words):
        label = find_secret(text)
        if label:
            raise ToolError(
                f"refused: the fact looks like it contains a secret ({label}). Store a "
                "description of where the secret lives instead of its value."
            )
    if ctx.fact_store is None:
        raise ToolError("Fact store not available in this run")
    ctx.fact_store.add(Fact(words, content.strip(), ctx.step_id))
    return "Fact stored with keywords: " + ", ".join(words)


@own_tool(name="search_facts", traits=ToolTraits(read_only=True, cacheable=False))
def search_facts(ctx: RunContext, keywords: list[str]) -> str:
    """Find facts saved earlier with store_fact.

    Args:
        ctx: the run context.
        keywords: one or more keywords; facts sharing more of them rank first.
    """
    words = [k for k in keywords if k.strip()]
    if not words:
        raise ToolError("validation error: keywords is required")
    if ctx.fact_store is None:
        raise ToolError("Fact store not available in this run")
    facts = ctx.fact_store.search(words)
    if not facts:
        return "no facts found for: " + ", ".join(words)
    lines = []
    for i, f in enumerate(facts, start=1):
        author = f" (by {f.author})" if f.author else ""
        lines.append(f"{i}. [{', '.join(f.keywords)}]{author}\n   {f.content}")
    return "\n".join(lines)
