"""Taint-aware approvals: once a run has read untrusted content, risky calls need a human.

A prompt injection works by getting the model to act on text an attacker wrote: a web page,
an MCP result, a file from somewhere else. After the run has seen such content, the calls an
injected instruction would want — shell commands that reach the network, run inline code or
change files, writes outside a scratch area, tools that act on other systems — need an
explicit approval even when their policy is ``ALWAYS_ALLOW``. The reason the human sees
names the content's source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sp4rk._internal import safejson
from sp4rk._internal.serde import Serializable
from sp4rk.tools.base import ToolTraits


@dataclass(frozen=True, slots=True)
class TaintPolicy:
    """How taint-aware approvals behave (on by default; ``Executor.set_taint_policy``).

    Attributes:
        enabled: escalate risky calls after untrusted content.
        workspace_is_trusted: the workspace holds your own files, so reading them (and the
            output of commands run there: tools that declare ``reads_workspace``) taints
            nothing; results from outside it (the web, MCP servers, an extra root, any other
            untrusted tool) do. Set ``False`` when the workspace holds content you did not
            write, such as a cloned repository.
        trusted_tools: tools whose output never taints the run.
        scratch_dirs: directories writes may go to without approval after taint (relative
            ones are taken inside the workspace).
        fetches_need_approval: also escalate read-only network tools (``web_fetch``): a URL
            can carry data out too, at the price of asking before every later fetch.
    """

    enabled: bool = True
    workspace_is_trusted: bool = True
    trusted_tools: frozenset[str] = frozenset()
    scratch_dirs: tuple[Path, ...] = ()
    fetches_need_approval: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.trusted_tools, str):
            raise TypeError("trusted_tools must be a set of tool names, not a string")
        if isinstance(self.scratch_dirs, str | Path):
            raise TypeError("scratch_dirs must be a sequence of directories, not one path")
        object.__setattr__(self, "trusted_tools", frozenset(self.trusted_tools))
        object.__setattr__(self, "scratch_dirs", tuple(Path(d) for d in self.scratch_dirs))

    def taints(
        self, tool: str, traits: ToolTraits, untrusted: bool, *, outside_workspace: bool = False
    ) -> bool:
        """Whether an untrusted result of ``tool`` taints the run.

        Only a workspace reader's results from inside a trusted workspace are exempt.
        """
        if not untrusted or tool in self.trusted_tools:
            return False
        from_workspace = traits.reads_workspace and not outside_workspace
        return not (from_workspace and self.workspace_is_trusted)


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

    def note(self) -> str:
        """How approvals name the taint: ``after untrusted content from <source>``."""
        return f"after untrusted content from {self.source}"


def escalation(
    policy: TaintPolicy,
    traits: ToolTraits,
    risk: str,
    raw_input: str,
    workspace: Path | None,
) -> str:
    """What makes this call risky after untrusted content, or ``""`` when nothing does.

    ``risk`` is what the tool itself reports (the shell's rule set); the traits add writes
    outside the scratch area and tools that act on other systems.
    """
    if traits.mutating and not _inside_scratch(policy.scratch_dirs, traits, raw_input, workspace):
        return "it changes files outside the scratch area"
    if risk:
        return risk
    if traits.network and (not traits.read_only or policy.fetches_need_approval):
        return "it sends data to another system"
    return ""


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
    base = workspace or Path.cwd()
    try:
        resolved = (base / value).resolve()
        roots = [(base / d).resolve() for d in scratch]
    except (OSError, RuntimeError):
        return False
    return any(resolved.is_relative_to(root) for root in roots)
