"""The tools a run gets: the built-ins confined to the workspace, and configured MCP servers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sp4rk.cli.errors import CommandError
from sp4rk.cli.view import View
from sp4rk.tools import Registry, ToolPolicy
from sp4rk.tools.builtins import register_builtins

#: Added to the environment of shell commands and the verify command: no stale bytecode
#: when a file is edited twice within one second.
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}


def builtin_registry(workspace: Path) -> Registry:
    """A registry holding every built-in tool, confined to ``workspace``."""
    registry = Registry()
    register_builtins(registry, workspace, shell_env=NO_BYTECODE)
    return registry


@contextlib.asynccontextmanager
async def mcp_tools(
    servers: dict[str, dict[str, Any]], registry: Registry, view: View
) -> AsyncIterator[dict[str, str]]:
    """Connect the configured MCP servers and register their tools for the block's duration.

    Yields:
        Server name → why it could not be used, for servers that failed.

    Raises:
        CommandError: MCP servers are configured but the ``mcp`` extra is missing, or a
            server's configuration is invalid.
    """
    if not servers:
        yield {}
        return
    try:
        from sp4rk.tools.mcp import MCPGateway, MCPServerConfig
    except ImportError as exc:
        raise CommandError(
            "MCP servers are configured but the mcp extra is missing: pip install 'sp4rk[mcp]'"
        ) from exc
    configs = []
    for name, options in servers.items():
        options = dict(options)
        if "policy" in options:
            try:
                options["policy"] = ToolPolicy(options["policy"])
            except ValueError as exc:
                raise CommandError(
                    f"mcp.{name}.policy must be one of {', '.join(p.value for p in ToolPolicy)}"
                ) from exc
        try:
            configs.append(MCPServerConfig(name=name, **options))
        except (TypeError, ValueError) as exc:
            raise CommandError(f"mcp.{name}: {exc}") from exc
    async with MCPGateway(configs) as gateway:
        report = await gateway.register(registry)
        for server, why in report.failed.items():
            view.emit("warning", text=f"MCP server {server} is unavailable: {why}")
        for tool, why in report.skipped.items():
            view.emit("notice", text=f"MCP tool {tool} skipped: {why}")
        yield dict(report.failed)
