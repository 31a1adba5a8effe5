"""Taint-aware approvals: once a run has read untrusted content, risky calls need a human.

A prompt injection works by getting the model to act on text an attacker wrote: a web page,
an MCP result, a file from a cloned repository. After the run has seen such content, the
calls an injected instruction would want — ones that reach the network, change files outside
a scratch area, or that a server calls destructive — need an explicit approval even when
their policy is ``ALWAYS_ALLOW``. The reason the human sees names the content's source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sp4rk._internal import safejson
from sp4rk._internal.serde import Serializable
from sp4rk.tools.base import ToolPolicy, ToolReview, ToolTraits


@dataclass(frozen=True, slots=True)
class TaintPolicy:
    """How taint-aware approvals behave (on by default; ``Executor.set_taint_policy``).

    Attributes:
        enabled: escalate risky calls after untrusted content.
        trusted_tools: tools whose output never taints the run, even when marked untrusted
            (for example ``{"read_file"}`` when the workspace holds only your own code).
        scratch_dirs: directories writes may go to without approval after taint.
    """

    enabled: bool = True
    trusted_tools: frozenset[str] = frozenset()
    scratch_dirs: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.trusted_tools, str):
            raise TypeError("trusted_tools must be a set of tool names, not a string")
        if isinstance(self.scratch_dirs, str | Path):
            raise TypeError("scratch_dirs must be a sequence of directories, not one path")
        object.__setattr__(self, "trusted_tools", frozenset(self.trusted_tools))
        object.__setattr__(
            self, "scratch_dirs", tuple(Path(d).resolve() for d in self.scratch_dirs)
        )


@dataclass(slots=True, kw_only=True)
class TaintState(Serializable):
    """Whether (and since when, from what) the run has seen untrusted content."""

    source: str = ""
    """Where the first untrusted content came from (a tool, or an MCP server and tool)."""
    since_step: int = 0
    """The step whose results brought it in."""

    def observe(self, source: str, step: int) -> None:
        """Untrusted content from ``source`` arrived in ``step`` (the first one counts)."""
        if not self.source:
            self.source, self.since_step = source, step

    def active_at(self, step: int) -> bool:
        """Whether the model had seen untrusted content when it made ``step``'s calls."""
        return bool(self.source) and self.since_step < step


def escalation(
    policy: TaintPolicy,
    taint: TaintState,
    step: int,
    traits: ToolTraits,
    review: ToolReview | None,
    raw_input: str,
    workspace: Path | None,
) -> str:
    """Why this call needs a human after untrusted content, or ``""`` when it does not.

    Calls a human is asked about anyway (``USER_CONFIRM``, or a judge that flagged them) and
    denied ones are left to their policy.
    """
    if not policy.enabled or not taint.active_at(step):
        return ""
    if review is not None and review.policy is not ToolPolicy.ALWAYS_ALLOW:
        return ""
    if traits.mutating and not _inside_scratch(policy.scratch_dirs, traits, raw_input, workspace):
        why = "it changes files outside the scratch area"
    elif review is not None and review.risk:
        why = review.risk
    else:
        return ""
    return f"after untrusted content from {taint.source}: {why}"


def _inside_scratch(
    scratch: Sequence[Path], traits: ToolTraits, raw_input: str, workspace: Path | None
) -> bool:
    """Whether the file the call touches lies inside a scratch directory."""
    if not scratch or not traits.file_argument:
        return False
    try:
        data = safejson.loads(raw_input)
    except ValueError:
        return False
    value = data.get(traits.file_argument) if isinstance(data, dict) else None
    if not isinstance(value, str) or not value or "\x00" in value:
        return False
    path = Path(value)
    if not path.is_absolute():
        if workspace is None:
            return False
        path = workspace / path
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        return False
    return any(resolved.is_relative_to(d) for d in scratch)
