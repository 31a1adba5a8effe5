"""MCP tool annotations become traits and policies; server failures are retryable results."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sp4rk.tools import ToolPolicy
from sp4rk.tools.mcp import MCPServerConfig, MCPTool, MCPUnavailableError, _make_tool


def tool_with(annotations: dict[str, Any] | None, **config: Any) -> MCPTool:
    connection = SimpleNamespace(config=MCPServerConfig(name="db", command="true", **config))
    spec: dict[str, Any] = {"name": "insert", "inputSchema": {"type": "object"}}
    if annotations is not None:
        spec["annotations"] = annotations
    made = _make_tool(connection, spec)  # type: ignore[arg-type]
    assert made is not None
    return made


def test_unannotated_tools_are_external_and_keep_the_servers_policy() -> None:
    plain = tool_with(None)
    assert plain.traits.external and not plain.traits.read_only and not plain.traits.mutating
    assert plain.default_policy is ToolPolicy.ALWAYS_ALLOW


def test_read_only_destructive_and_open_world_hints_map_onto_traits() -> None:
    reader = tool_with({"readOnlyHint": True, "destructiveHint": True})
    assert reader.traits.read_only and not reader.traits.mutating
    assert reader.default_policy is ToolPolicy.ALWAYS_ALLOW
    dropper = tool_with({"destructiveHint": True})
    assert dropper.traits.mutating and dropper.default_policy is ToolPolicy.USER_CONFIRM
    sender = tool_with({"openWorldHint": True})
    assert sender.traits.network and not sender.traits.read_only


def test_destructive_confirmation_can_be_turned_off_but_never_relaxes_a_stricter_policy() -> None:
    trusted = tool_with({"destructiveHint": True}, confirm_destructive=False)
    assert trusted.default_policy is ToolPolicy.ALWAYS_ALLOW
    denied = tool_with({"destructiveHint": True}, policy=ToolPolicy.ALWAYS_DENY)
    assert denied.default_policy is ToolPolicy.ALWAYS_DENY
    hinted = tool_with({"readOnlyHint": "yes"})  # only a real true counts
    assert not hinted.traits.read_only


@pytest.mark.parametrize(("retryable", "expected"), [(True, True), (False, False)])
def test_server_failures_are_retryable_unless_the_server_refused(
    retryable: bool, expected: bool
) -> None:
    error = MCPUnavailableError("MCP server 'db' failed", "EOF", retryable=retryable)
    result = error.observation("db")
    assert result.is_error and result.retryable is expected and result.self_wrapped
