"""Arguments a host passes are checked when given, with a message that says what to pass."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sp4rk.tools import Registry, RunContext, tool
from sp4rk.tools.builtins import builtin_tools, read_file, register_builtins, web_tools
from tests.tools.builtin_helpers import call


@tool
def ping() -> str:
    """Ping."""
    return "pong"


@pytest.mark.parametrize("roots", ["/data", b"/data", Path("/data")])
def test_a_single_extra_root_is_refused_not_split_into_characters(
    tmp_path: Path, roots: object
) -> None:
    with pytest.raises(TypeError, match=r"extra_roots must be a list of directories.*pass \["):
        register_builtins(Registry(), tmp_path, extra_roots=roots)  # type: ignore[arg-type]


def test_a_single_allowed_host_is_refused() -> None:
    with pytest.raises(TypeError, match="allow_hosts must be a list of hosts"):
        web_tools(allow_hosts="localhost")


def test_workspaces_and_extra_roots_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"workspace .* does not exist"):
        builtin_tools(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"workspace .* is not a directory"):
        builtin_tools(tmp_path / "file")
    with pytest.raises(ValueError, match=r"extra root .* does not exist"):
        builtin_tools(tmp_path, extra_roots=[tmp_path / "missing"])
    with pytest.raises(ValueError, match="contains a NUL byte"):
        builtin_tools(str(tmp_path) + "\x00x")


async def test_a_workspace_given_as_a_string_works(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    ctx = RunContext(workspace=str(tmp_path))
    assert ctx.workspace == tmp_path
    assert ctx.replace(step_id="s").workspace == tmp_path
    result = await call(read_file, ctx=ctx, path="a.txt")
    assert not result.is_error and "hello" in result.content
    with pytest.raises(TypeError, match=r"RunContext.workspace must be a path"):
        RunContext(workspace=5)  # type: ignore[arg-type]


async def test_a_missing_or_nul_workspace_is_a_clear_error_where_it_is_used(
    tmp_path: Path,
) -> None:
    missing = await call(read_file, ctx=RunContext(workspace=tmp_path / "gone"), path="a")
    assert missing.is_error and "does not exist or is not a directory" in missing.content
    nul = await call(read_file, ctx=RunContext(workspace="/tmp/x\x00y"), path="a")
    assert nul.is_error and "contains a NUL byte" in nul.content


def test_duplicate_tool_names_raise_unless_replacing() -> None:
    registry = Registry([ping])
    with pytest.raises(ValueError, match=r"'ping' is already registered.*replace=True"):
        registry.register(ping)
    with pytest.raises(ValueError, match="already registered"):
        Registry([ping, ping])
    registry.register(ping, replace=True)
    assert len(registry) == 1
    register_builtins(registry, None)
    with pytest.raises(ValueError, match="already registered"):
        register_builtins(registry, None)


def test_library_loggers_have_a_null_handler() -> None:
    for name in ("sp4rk", "sp4rk.tools"):
        handlers = logging.getLogger(name).handlers
        assert any(isinstance(h, logging.NullHandler) for h in handlers), name


def test_mcp_arguments_must_be_a_list() -> None:
    mcp = pytest.importorskip("sp4rk.tools.mcp")
    with pytest.raises(TypeError, match="args must be a list of arguments"):
        mcp.MCPServerConfig(name="x", command="python", args="server.py")
