"""Built-in tools: files, search, the shell and the web, confined to a workspace.

``builtin_tools(workspace)`` returns every built-in bound to a workspace;
``register_builtins(registry, workspace)`` adds them to a registry in one call. The
module-level tools (``read_file``, ``bash_exec`` …) are bound to no workspace: they use the
run's ``RunContext.workspace``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sp4rk.tools.base import Tool
from sp4rk.tools.builtins.checklist import ChecklistItem, parse_checklist, update_checklist
from sp4rk.tools.builtins.facts import search_facts, store_fact
from sp4rk.tools.builtins.finish import FinishTool, new_finish_tool, parse_finish_answer
from sp4rk.tools.builtins.result_read import tool_result_read
from sp4rk.tools.registry import Registry

if TYPE_CHECKING:
    from sp4rk.tools.builtins.edit import edit_tools
    from sp4rk.tools.builtins.files import file_tools
    from sp4rk.tools.builtins.paths import Confinement
    from sp4rk.tools.builtins.search import find_rg, search_tools
    from sp4rk.tools.builtins.shell import ShellTool, shell_tools
    from sp4rk.tools.builtins.shell_rules import ShellVerdict, judge_command
    from sp4rk.tools.builtins.web import html_to_markdown, is_public_address, web_tools

#: Names whose modules load on first access: the executor imports this package for its own
#: tools (finish, tool_result_read, the checklist), which need none of the file, search,
#: shell or web machinery.
_LAZY = {
    "edit_tools": "edit",
    "file_tools": "files",
    "Confinement": "paths",
    "find_rg": "search",
    "search_tools": "search",
    "ShellTool": "shell",
    "shell_tools": "shell",
    "ShellVerdict": "shell_rules",
    "judge_command": "shell_rules",
    "html_to_markdown": "web",
    "is_public_address": "web",
    "web_tools": "web",
}

PathLike = str | os.PathLike[str]


def builtin_tools(
    workspace: PathLike | None,
    *,
    extra_roots: Sequence[PathLike] = (),
    allow_hosts: Iterable[str] = (),
    shell_env: Mapping[str, str] | None = None,
    confirm_risky_commands: bool = True,
) -> list[Tool]:
    """Every built-in tool, the file, search and shell tools confined to ``workspace``.

    Args:
        workspace: the directory the tools work in (``None``: each run's
            ``RunContext.workspace``, which also overrides it when set).
        extra_roots: further directories the file tools may touch.
        allow_hosts: hosts (or ``host:port``) web_fetch may reach although they are not on
            the public internet, such as a local documentation server.
        shell_env: variables added to bash_exec's allowlisted environment.
        confirm_risky_commands: let the shell rule set ask for approval of commands that
            reach the network, change the system or touch paths outside the workspace.

    Raises:
        TypeError: when ``extra_roots`` or ``allow_hosts`` is a single string, not a list.
        ValueError: when the workspace or an extra root is not an existing directory.
    """
    from sp4rk.tools.builtins.edit import edit_tools
    from sp4rk.tools.builtins.files import file_tools
    from sp4rk.tools.builtins.paths import Confinement
    from sp4rk.tools.builtins.search import search_tools
    from sp4rk.tools.builtins.shell import shell_tools
    from sp4rk.tools.builtins.web import web_tools

    fs = Confinement(workspace, extra_roots)
    return [
        *file_tools(fs),
        *edit_tools(fs),
        *search_tools(fs),
        *shell_tools(fs, env=shell_env, confirm_risky=confirm_risky_commands),
        *web_tools(allow_hosts=allow_hosts),
        tool_result_read,
        update_checklist,
        store_fact,
        search_facts,
        new_finish_tool(),
    ]


def register_builtins(
    registry: Registry,
    workspace: PathLike | None,
    *,
    extra_roots: Sequence[PathLike] = (),
    allow_hosts: Iterable[str] = (),
    shell_env: Mapping[str, str] | None = None,
    confirm_risky_commands: bool = True,
) -> None:
    """Register every built-in tool (see :func:`builtin_tools`) in ``registry``.

    Raises:
        TypeError, ValueError: as :func:`builtin_tools`; ``ValueError`` also when a tool of
            the same name is registered already.
    """
    for t in builtin_tools(
        workspace,
        extra_roots=extra_roots,
        allow_hosts=allow_hosts,
        shell_env=shell_env,
        confirm_risky_commands=confirm_risky_commands,
    ):
        registry.register(t)


#: The tool names of python-api.md offered as module attributes, built on first access.
_TOOL_NAMES = frozenset(
    {
        "read_file", "write_file", "edit_file", "delete_file", "create_directory",
        "list_directory", "glob", "ripgrep", "bash_exec", "web_fetch",
    }
)  # fmt: skip
#: Names MCP tools may never take, whether or not the host registered these built-ins: the
#: tools above, the executor's own tools, and other names agents know as built-ins.
RESERVED_TOOL_NAMES = _TOOL_NAMES | {
    "finish", "tool_result_read", "update_checklist", "store_fact", "search_facts", "grep",
    "posh_exec", "batch",
}  # fmt: skip
_unbound: dict[str, Tool] = {}


def __getattr__(name: str) -> Any:
    """``read_file``, ``bash_exec`` …, and the names of :data:`_LAZY`, loaded on first access.

    The tools are bound to no workspace: they use the run's.
    """
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    if name not in _TOOL_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _unbound:
        _unbound.update((t.name, t) for t in builtin_tools(None))
    return _unbound[name]


__all__ = [
    "RESERVED_TOOL_NAMES",
    "ChecklistItem",
    "Confinement",
    "FinishTool",
    "ShellTool",
    "ShellVerdict",
    "bash_exec",
    "builtin_tools",
    "create_directory",
    "delete_file",
    "edit_file",
    "edit_tools",
    "file_tools",
    "find_rg",
    "glob",
    "html_to_markdown",
    "is_public_address",
    "judge_command",
    "list_directory",
    "new_finish_tool",
    "parse_checklist",
    "parse_finish_answer",
    "read_file",
    "register_builtins",
    "ripgrep",
    "search_facts",
    "search_tools",
    "shell_tools",
    "store_fact",
    "tool_result_read",
    "update_checklist",
    "web_fetch",
    "web_tools",
    "write_file",
]
