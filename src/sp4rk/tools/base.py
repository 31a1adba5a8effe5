"""The tool contract: what a tool is, what it returns, and how it may be run."""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from sp4rk.llm.types import _Serializable

if TYPE_CHECKING:
    from sp4rk.tools.context import RunContext

#: The load-bearing prefix of every input-parsing error: the parse-error breaker looks for it.
PARSE_ERROR_PREFIX = "failed to parse input"


class ToolError(Exception):
    """Raise from a tool to report a failure to the model: the message becomes the observation."""


@dataclass(slots=True)
class ToolResult(_Serializable):
    """What a tool returns. ``is_error`` marks a tool-level failure, which is never fatal."""

    content: str
    is_error: bool = False
    self_wrapped: bool = field(default=False, kw_only=True)
    """The tool marked every untrusted part of ``content`` itself (with
    :func:`~sp4rk._internal.untrusted.wrap_untrusted_content`), or there is none: sp4rk's
    own text (a parse error, an MCP restart notice, a hint how to read on). The result must
    then not be wrapped whole, so that those instructions stay outside every
    ``<untrusted-content>`` boundary, even when the tool's output counts as untrusted."""


@dataclass(slots=True)
class ToolDescriptor(_Serializable):
    """A tool as offered to a run: name, description, schema and where it comes from."""

    name: str
    description: str
    input_schema: dict[str, Any]
    source: str = "core"
    group: str = ""
    source_category: Literal["core", "mcp"] = "core"


class ToolPolicy(enum.Enum):
    """Whether a tool may run: always, never, or only once a human approved the call."""

    ALWAYS_ALLOW = "always_allow"
    ALWAYS_DENY = "always_deny"
    USER_CONFIRM = "user_confirm"


class CacheMode(enum.Enum):
    """How the executor caches a tool's result: by the default heuristic, or by content."""

    DEFAULT = "default"
    CONTENT_BACKED = "content_backed"


@runtime_checkable
class Tool(Protocol):
    """Anything with these attributes and an async ``execute`` is a tool.

    ``execute`` returns a :class:`ToolResult`; it may raise :class:`ToolError` to report a
    failure to the model. Any other exception is turned into an error observation too.
    """

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        ...

    @property
    def input_schema(self) -> dict[str, Any]:
        """JSON schema of the tool's input object."""
        ...

    @property
    def default_policy(self) -> ToolPolicy:
        """Whether the tool may run without a human's approval."""
        ...

    @property
    def is_untrusted(self) -> bool:
        """Whether the tool's output comes from an untrusted source (web, files, MCP)."""
        ...

    async def execute(self, ctx: RunContext, input: str) -> ToolResult:
        """Run the tool on ``input``, the raw JSON text the model produced."""
        ...


@runtime_checkable
class ToolJudge(Protocol):
    """A tool that decides per call whether a human must confirm it (a shell's rule set)."""

    def judge(self, ctx: RunContext, input: str) -> str:
        """Why this call needs a human's confirmation, or ``""`` when it does not."""
        ...


@dataclass(slots=True, frozen=True)
class ToolReview:
    """The policy that applies to one call, and why (a judge's reason, when it escalated)."""

    policy: ToolPolicy
    reason: str = ""


@runtime_checkable
class ContentBackedReader(Protocol):
    """A tool whose results the executor should cache in memory by content."""

    def is_content_backed(self) -> bool:
        """Whether results should be cached by content rather than by the default heuristic."""
        ...


async def guarded_execute(
    name: str,
    run: Callable[[], Awaitable[object]],
    log: logging.Logger | logging.LoggerAdapter[Any],
) -> ToolResult:
    """Await ``run()`` (a tool execution); turn every failure into an error result.

    ``ToolError`` becomes its message; any other exception becomes ``"Type: message"``
    (logged with its traceback); a return value that is not a ``ToolResult`` is reported as
    such. Cancellation, ``KeyboardInterrupt`` and ``SystemExit`` propagate.
    """
    try:
        result = await run()
    except ToolError as exc:
        return ToolResult(str(exc), is_error=True)
    except Exception as exc:
        log.warning("tool %r raised %s: %s", name, type(exc).__name__, exc, exc_info=True)
        return ToolResult(f"{type(exc).__name__}: {exc}", is_error=True)
    if not isinstance(result, ToolResult):
        return ToolResult(
            f"tool {name!r} returned a {type(result).__name__} instead of a ToolResult",
            is_error=True,
        )
    return result


def parse_error_result(detail: str) -> ToolResult:
    """An error result for input the tool could not parse (counted by the parse-error breaker).

    It holds sp4rk's words about the model's own input, nothing untrusted: ``self_wrapped``.
    """
    return ToolResult(f"{PARSE_ERROR_PREFIX}: {detail}", is_error=True, self_wrapped=True)


def own_error(message: str) -> ToolResult:
    """An error result whose text is sp4rk's own (nothing a file or a server wrote)."""
    return ToolResult(message, is_error=True, self_wrapped=True)
