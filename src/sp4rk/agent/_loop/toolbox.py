"""The tools of one run: their definitions for the model, their traits, and running them."""

from __future__ import annotations

from collections.abc import Sequence

from sp4rk._internal.conformance import conforms
from sp4rk.agent._loop.emit import Log
from sp4rk.llm.types import ToolDefinition
from sp4rk.tools.base import (
    CacheMode,
    ToolDescriptor,
    ToolResult,
    ToolReview,
    ToolReviewer,
    ToolRiskAssessor,
    ToolTraits,
    guarded_execute,
)
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME, FinishTool
from sp4rk.tools.builtins.result_read import tool_result_read
from sp4rk.tools.context import RunContext
from sp4rk.tools.executor import ToolExecutor
from sp4rk.tools.registry import Registry

RESULT_READ_TOOL = "tool_result_read"
_FINISH = FinishTool()


class ToolBox:
    """What a run offers the model, and how each tool is to be treated.

    Traits come from the descriptors the run was given (``Registry.list()`` fills them from
    each tool); the executor's own ``finish`` and ``tool_result_read`` bring theirs.
    """

    def __init__(
        self,
        tools: ToolExecutor,
        task_tools: Sequence[ToolDescriptor],
        *,
        with_result_reader: bool,
        non_cacheable: set[str],
        log: Log,
        finish: FinishTool = _FINISH,
    ) -> None:
        self._tools = tools
        self.finish = finish
        """The run's ``finish`` tool (typed when the executor has an ``output_type``)."""
        self._log = log
        self._non_cacheable = non_cacheable
        self.definitions: list[ToolDefinition] = []
        self._traits: dict[str, ToolTraits] = {}
        for d in task_tools:
            if d.name in self._traits:
                continue  # the first descriptor of a name wins
            self._traits[d.name] = d.traits
            description = f"[MCP] {d.description}" if d.source_category == "mcp" else d.description
            self.definitions.append(ToolDefinition(d.name, description, d.input_schema))
        self.task_tool_names = frozenset(self._traits)
        self.own_result_reader = with_result_reader and RESULT_READ_TOOL not in self._traits
        if self.own_result_reader:
            self._traits[RESULT_READ_TOOL] = tool_result_read.traits
            self.definitions.append(
                ToolDefinition(
                    RESULT_READ_TOOL, tool_result_read.description, tool_result_read.input_schema
                )
            )
        if FINISH_TOOL_NAME not in self._traits:
            self._traits[FINISH_TOOL_NAME] = finish.traits
            self.definitions.append(
                ToolDefinition(FINISH_TOOL_NAME, finish.description, finish.input_schema)
            )
        self.offered = frozenset(self._traits)
        # Capabilities, decided once: runtime protocol checks are slow on the hot path.
        self._reviewer = tools if conforms(tools, ToolReviewer) else None
        self._assessor = tools if conforms(tools, ToolRiskAssessor) else None
        self._never_raises = type(tools).execute is Registry.execute

    def traits(self, name: str) -> ToolTraits:
        """What the executor may assume about tool ``name`` (defaults for unknown names)."""
        return self._traits.get(name) or ToolTraits()

    def cacheable(self, name: str) -> bool:
        """Whether a result of ``name`` is cached even when it was not cut."""
        return self.traits(name).cacheable and name not in self._non_cacheable

    def source_of(self, name: str) -> str:
        """Where a tool comes from: its registry source, or ``"core"`` for the executor's own."""
        return self._tools.get_tool_source(name) if name in self.task_tool_names else "core"

    def is_untrusted(self, name: str) -> bool:
        """Whether ``name``'s output must be wrapped as untrusted content."""
        if name == RESULT_READ_TOOL and self.own_result_reader:
            return True
        return self._tools.is_tool_untrusted(name)

    def is_own_result_reader(self, name: str) -> bool:
        """Whether calls of ``name`` go to the executor's own ``tool_result_read``."""
        return name == RESULT_READ_TOOL and self.own_result_reader

    def content_backed(self, ctx: RunContext, name: str, raw: str) -> bool:
        """Whether the tool asks for its results to be cached by content, not by file."""
        return self._tools.cache_strategy(ctx, name, raw) is CacheMode.CONTENT_BACKED

    def review(self, ctx: RunContext, name: str, raw: str) -> ToolReview | None:
        """The policy for a call and why, when the tool executor can tell."""
        return None if self._reviewer is None else self._reviewer.review(ctx, name, raw)

    def risk(self, ctx: RunContext, name: str, raw: str) -> str:
        """What a call could do after untrusted content, when the tool executor can tell."""
        return "" if self._assessor is None else self._assessor.risk(ctx, name, raw)

    async def execute(self, ctx: RunContext, name: str, input: str) -> ToolResult:
        """Run one tool; every failure becomes an error result (cancellation propagates)."""
        if name not in self.offered:
            available = ", ".join(sorted(self.offered))
            return ToolResult(
                f"tool not found: {name}. Available tools: {available}", is_error=True
            )
        if self.is_own_result_reader(name):
            return await guarded_execute(
                name, lambda: tool_result_read.execute(ctx, input), self._log
            )
        if self._never_raises:
            return await self._tools.execute(ctx, name, input)
        return await guarded_execute(name, lambda: self._tools.execute(ctx, name, input), self._log)
