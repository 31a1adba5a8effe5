"""``Registry``: holds tools, enforces their policies, and never lets a tool crash a run."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from sp4rk._internal.conformance import conforms
from sp4rk.tools.base import (
    CacheMode,
    ContentBackedReader,
    RiskJudge,
    Tool,
    ToolDescriptor,
    ToolJudge,
    ToolPolicy,
    ToolResult,
    ToolReview,
    guarded_execute,
    own_error,
    parse_error_result,
    traits_of,
    undeclared_risk,
)
from sp4rk.tools.context import RunContext
from sp4rk.tools.tool_input import checked_input

logger = logging.getLogger("sp4rk.tools")


@dataclass(slots=True)
class _Entry:
    tool: Tool
    source: str
    category: Literal["core", "mcp"]
    group: str
    judge: ToolJudge | None  # decided at registration: protocol checks are slow per call
    risk_judge: RiskJudge | None


class Registry:
    """Tools by name; satisfies the executor's ``ToolExecutor`` protocol.

    ``execute`` never raises for a bad call: unknown names, unparseable input, denied policies,
    :class:`~sp4rk.tools.ToolError` and unexpected exceptions all come back as
    ``ToolResult(is_error=True)`` (cancellation still propagates). Input is checked before any
    tool sees it (:func:`~sp4rk.tools.tool_input.checked_input`): JSON past a safety limit
    (depth, number size, ``NaN``, a repeated key) is a parse error, and lone surrogates are
    replaced.

    Policies: ``ALWAYS_DENY`` tools are refused; ``USER_CONFIRM`` tools run only when the
    executor's HITL handler explicitly approved the call (``HITLToolDecision(allow=True)``),
    so a run without a human in the loop fails closed.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._entries: dict[str, _Entry] = {}
        self._policy_overrides: dict[str, ToolPolicy] = {}
        for t in tools:
            self.register(t)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def register(
        self,
        tool: Tool,
        *,
        source: str = "core",
        source_category: Literal["core", "mcp"] | None = None,
        group: str = "",
        replace: bool = False,
    ) -> None:
        """Add ``tool``; a tool of the same name is replaced only when ``replace`` says so.

        Two tools registered under one name by mistake would otherwise replace each other
        silently. An MCP tool never replaces a core one, ``replace`` or not.

        Args:
            tool: the tool.
            source: ``"core"``, or the name of the MCP server it comes from.
            source_category: ``"core"`` or ``"mcp"``; by default ``"mcp"`` for any source
                other than ``"core"``.
            group: a free-form group name shown in descriptors.
            replace: replace a registered tool of the same name.

        Raises:
            TypeError: when ``tool`` does not satisfy the ``Tool`` protocol.
            ValueError: when the name is taken (and ``replace`` is false), or an MCP tool
                would shadow a built-in or host tool of the same name.
        """
        if not conforms(tool, Tool):
            raise TypeError(
                f"{tool!r} is not a Tool: decorate a function with @sp4rk.tools.tool to make "
                "one, or give the object name, description, input_schema, default_policy, "
                "is_untrusted and an async execute(ctx, input)"
            )
        category = source_category or ("core" if source in ("", "core") else "mcp")
        existing = self._entries.get(tool.name)
        if category == "mcp" and existing is not None and existing.category == "core":
            raise ValueError(
                f"MCP tool {tool.name!r} from {source!r} would shadow the core tool of that "
                "name; rename it on the server or register it under another name"
            )
        if existing is not None and not replace:
            raise ValueError(
                f"a tool named {tool.name!r} is already registered (from {existing.source!r}); "
                "give the new one another name, unregister the old one first, or pass "
                "replace=True"
            )
        judge = tool if conforms(tool, ToolJudge) else None
        risk_judge = tool if conforms(tool, RiskJudge) else None
        self._entries[tool.name] = _Entry(
            tool, source or "core", category, group, judge, risk_judge
        )
        self._policy_overrides.pop(tool.name, None)

    def unregister(self, name: str) -> None:
        """Remove the tool called ``name`` (no error if absent)."""
        self._entries.pop(name, None)
        self._policy_overrides.pop(name, None)

    def set_policy(self, name: str, policy: ToolPolicy) -> None:
        """Override the default policy of tool ``name`` (until it is registered again).

        Raises:
            KeyError: when no tool of that name is registered.
        """
        if name not in self._entries:
            raise KeyError(f"no tool named {name!r} is registered")
        self._policy_overrides[name] = policy

    def policy(self, name: str) -> ToolPolicy | None:
        """The effective policy of tool ``name``, or ``None`` if unknown."""
        entry = self._entries.get(name)
        if entry is None:
            return None
        return self._policy_overrides.get(name, entry.tool.default_policy)

    def review(self, ctx: RunContext, name: str, input: str) -> ToolReview | None:
        """The policy for this call; ``None`` when the tool is unknown.

        That is the tool's policy (or its override), escalated to ``USER_CONFIRM`` when an
        ``ALWAYS_ALLOW`` tool's judge flags the call.
        """
        entry = self._entries.get(name)
        if entry is None:
            return None
        policy = self._policy_overrides.get(name, entry.tool.default_policy)
        if policy is ToolPolicy.ALWAYS_ALLOW and entry.judge is not None:
            reason = entry.judge.judge(ctx, input)
            if reason:
                return ToolReview(ToolPolicy.USER_CONFIRM, reason)
        return ToolReview(policy)

    def risk(self, ctx: RunContext, name: str, input: str) -> str:
        """What this call could do that an injected instruction wants (``""``: nothing known).

        Asked only after the run has read untrusted content; the tool tells, when it can
        (see :class:`~sp4rk.tools.base.RiskJudge`: the shell's rule set).
        """
        entry = self._entries.get(name)
        if entry is None:
            return ""
        if entry.risk_judge is not None:
            return entry.risk_judge.risk(ctx, input)
        return undeclared_risk(traits_of(entry.tool))

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        entry = self._entries.get(name)
        return None if entry is None else entry.tool

    def list(self) -> list[ToolDescriptor]:
        """Descriptors of every tool, in registration order."""
        return [
            ToolDescriptor(
                name=name,
                description=e.tool.description,
                input_schema=e.tool.input_schema,
                source=e.source,
                group=e.group,
                source_category=e.category,
                traits=traits_of(e.tool),
            )
            for name, e in self._entries.items()
        ]

    async def execute(self, ctx: RunContext, name: str, input: str) -> ToolResult:
        """Run tool ``name`` on raw JSON ``input``; failures come back as error results."""
        entry = self._entries.get(name)
        if entry is None:
            known = ", ".join(sorted(self._entries)) or "(none)"
            return own_error(f"tool not found: {name}. Available tools: {known}")
        review = self.review(ctx, name, input)
        assert review is not None
        if review.policy is ToolPolicy.ALWAYS_DENY:
            return own_error(f"blocked by security policy: tool {name!r} is not allowed to run")
        try:
            input = checked_input(input)
        except ValueError as exc:
            return parse_error_result(str(exc))
        if review.policy is ToolPolicy.USER_CONFIRM and not ctx.tool_call_approved:
            fix = (
                "or switch that tool's judge off (for the built-in shell: "
                "confirm_risky_commands=False)"
                if review.reason
                else f"or allow the tool with Registry.set_policy({name!r}, "
                "ToolPolicy.ALWAYS_ALLOW)"
            )
            logger.warning(
                "refused %s: it needs a human's confirmation%s; approve it with a HITLHandler "
                "whose on_tool_call returns HITLToolDecision(allow=True), %s",
                name,
                f" ({review.reason})" if review.reason else "",
                fix,
            )
            why = f" because {review.reason}" if review.reason else ""
            return own_error(
                f"Not run: {name} needs a human's approval{why}, and no one approved it in this "
                "run. Find another way that stays inside the workspace, or explain in your "
                "answer why this call is needed."
            )
        return await guarded_execute(name, lambda: entry.tool.execute(ctx, input), logger)

    def get_tool_source(self, name: str) -> str:
        """``"core"``, an MCP server name, or ``""`` when the tool is unknown."""
        entry = self._entries.get(name)
        return "" if entry is None else entry.source

    def is_tool_untrusted(self, name: str) -> bool:
        """Whether the tool's output must be treated as untrusted (MCP tools always are)."""
        entry = self._entries.get(name)
        if entry is None:
            return False
        return entry.category == "mcp" or bool(entry.tool.is_untrusted)

    def cache_strategy(self, ctx: RunContext, name: str, input: str) -> CacheMode:
        """``CONTENT_BACKED`` for tools that implement ``ContentBackedReader`` and opt in."""
        tool = self.get(name)
        if conforms(tool, ContentBackedReader) and tool.is_content_backed():
            return CacheMode.CONTENT_BACKED
        return CacheMode.DEFAULT
