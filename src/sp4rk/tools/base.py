"""The tool contract: what a tool is, what it returns, and how it may be run."""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from sp4rk._internal.serde import Serializable as _Serializable

if TYPE_CHECKING:
    from sp4rk.tools.context import RunContext

#: The load-bearing prefix of every input-parsing error: the parse-error breaker looks for it.
PARSE_ERROR_PREFIX = "failed to parse input"


class ToolError(Exception):
    """Raise from a tool to report a failure to the model: the message becomes the observation."""


@dataclass(slots=True)
class ToolResult(_Serializable):
    """What a tool returns. ``is_error`` marks a tool-level failure, which is never fatal.

    ``retryable`` marks a failure that says nothing about the call itself (a server that was
    restarting, a transient network error): repeating the identical call is then legitimate,
    and the repeat breaker does not count it.
    """

    content: str
    is_error: bool = False
    retryable: bool = field(default=False, kw_only=True)
    parse_error: bool = field(default=False, kw_only=True)
    """The call's input could not be parsed (counted by the parse-error breaker)."""
    self_wrapped: bool = field(default=False, kw_only=True)
    """The tool marked every untrusted part of ``content`` itself (with
    :func:`~sp4rk._internal.untrusted.wrap_untrusted_content`), or there is none: sp4rk's
    own text (a parse error, an MCP restart notice, a hint how to read on). The result must
    then not be wrapped whole, so that those instructions stay outside every
    ``<untrusted-content>`` boundary, even when the tool's output counts as untrusted."""
    outside_workspace: bool = field(default=False, kw_only=True)
    """The content came from outside the workspace (an extra root): it taints the run even
    from a tool that ``reads_workspace``."""
    notes: str = field(default="", kw_only=True)
    """The tool's own words about ``content`` (why a search stopped, how to narrow it). They
    follow the content in the observation but stay outside any ``<untrusted-content>``
    wrapper, so a model that distrusts the content still reads them as instructions."""


@dataclass(slots=True, frozen=True)
class ToolTraits(_Serializable):
    """What the executor may assume about a tool: declared on the tool, never guessed by name.

    The defaults describe an ordinary tool working on the workspace: it may have side
    effects, and its results are cached. (A short result counts as fruitless only for
    read-only tools, or when it says nothing was found.)
    """

    read_only: bool = False
    """No side effects: with ``parallel_tool_calls`` it may run alongside other read-only calls."""
    mutating: bool = False
    """A success changes the workspace: it satisfies the mutation gate and shows progress."""
    verify_after: bool = False
    """A success schedules verify-on-edit (writes and edits of source files)."""
    cacheable: bool = True
    """Results go to the result cache; ``False`` caches them only when they had to be cut."""
    brief_results: bool = False
    """Short results are normal (acknowledgements): never fruitless, never same-tool repetition."""
    pollable: bool = False
    """Calling it again with the same arguments is how it is used (a status check): identical
    calls whose results change are progress, not repetition."""
    file_argument: str = ""
    """The input field naming the file a call reads or writes; the result cache then notices
    when that file changes."""
    external: bool = False
    """Its results come from outside the workspace (the web, another service): reading them
    taints the run (taint-aware approvals)."""
    network: bool = False
    """It reaches other machines with arguments the model chose (a URL, a message): after
    untrusted content a call could carry data out."""
    reads_workspace: bool = False
    """Its results come from the workspace (files, commands run there). With a trusted
    workspace (``TaintPolicy.workspace_is_trusted``) its untrusted results taint nothing,
    unless a result says it came from outside (``ToolResult.outside_workspace``). Other
    untrusted tools taint the run."""
    internal: bool = False
    """It acts only on the run's own memory (the checklist, stored facts), never on files or
    other systems: taint-aware approvals never ask about it. A tool that declares none of
    ``read_only``, ``mutating``, ``network`` or ``internal`` may do anything, so after
    untrusted content its calls need approval."""


@dataclass(slots=True)
class ToolDescriptor(_Serializable):
    """A tool as offered to a run: name, description, schema, traits and where it comes from."""

    name: str
    description: str
    input_schema: dict[str, Any]
    source: str = "core"
    group: str = ""
    source_category: Literal["core", "mcp"] = "core"
    traits: ToolTraits = field(default_factory=ToolTraits)


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


@runtime_checkable
class RiskJudge(Protocol):
    """A tool that can tell what one call of it could do that an injected instruction wants.

    Asked after the run has read untrusted content (taint-aware approvals), whatever the
    tool's policy: a shell command that reaches the network, for example.
    """

    def risk(self, ctx: RunContext, input: str) -> str:
        """What this call could do (reach the network, change the system), or ``""``."""
        ...


@dataclass(slots=True, frozen=True)
class ToolReview:
    """The policy that applies to one call, and why (a judge's reason, when it escalated)."""

    policy: ToolPolicy
    reason: str = ""


@runtime_checkable
class ToolReviewer(Protocol):
    """A tool executor that can say, before a call runs, which policy applies to it.

    The executor asks it before approval, so the human sees why a call needs confirming;
    ``Registry`` implements it, and so may any custom ``ToolExecutor``.
    """

    def review(self, ctx: RunContext, name: str, input: str) -> ToolReview | None:
        """The policy for this call, or ``None`` when the tool is unknown."""
        ...


@runtime_checkable
class ToolRiskAssessor(Protocol):
    """A tool executor that can say what a call could do after untrusted content.

    Taint-aware approvals ask it about calls their policy allows; ``Registry`` implements it
    by asking the tool (see :class:`RiskJudge`).
    """

    def risk(self, ctx: RunContext, name: str, input: str) -> str:
        """What this call could do that an injected instruction wants, or ``""``."""
        ...


def traits_of(tool: object) -> ToolTraits:
    """A tool's declared traits (``tool.traits``), or the defaults when it declares none."""
    traits = getattr(tool, "traits", None)
    return traits if isinstance(traits, ToolTraits) else ToolTraits()


def undeclared_risk(traits: ToolTraits) -> str:
    """What a tool that says nothing of its effects could do after untrusted content.

    A tool that declares what it does (read-only, mutating, network, internal) is judged by
    that; one that declares nothing may have any side effect (an MCP tool without
    annotations is destructive by the protocol's defaults), so it needs approval.
    """
    if traits.read_only or traits.mutating or traits.network or traits.internal:
        return ""
    return "it may act on other systems (the tool does not declare itself read-only)"


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
    return ToolResult(
        f"{PARSE_ERROR_PREFIX}: {detail}", is_error=True, parse_error=True, self_wrapped=True
    )


def own_error(message: str) -> ToolResult:
    """An error result whose text is sp4rk's own (nothing a file or a server wrote)."""
    return ToolResult(message, is_error=True, self_wrapped=True)
