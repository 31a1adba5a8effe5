"""``ToolExecutor``: the seam through which the executor runs tools (``Registry`` fills it)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from sp4rk.tools.base import CacheMode, ToolResult
from sp4rk.tools.context import RunContext


@runtime_checkable
class ToolExecutor(Protocol):
    """Runs tools by name and tells the executor where their output comes from."""

    async def execute(self, ctx: RunContext, name: str, input: str) -> ToolResult:
        """Run tool ``name`` on raw JSON ``input``."""
        ...

    def get_tool_source(self, name: str) -> str:
        """``"core"``, an MCP server name, or ``""`` when unknown."""
        ...

    def is_tool_untrusted(self, name: str) -> bool:
        """Whether the tool's output must be wrapped as untrusted."""
        ...

    def cache_strategy(self, ctx: RunContext, name: str, input: str) -> CacheMode:
        """How to cache the tool's result."""
        ...
