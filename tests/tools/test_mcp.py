"""The MCP gateway against a real MCP server (tests/tools/mcp_demo_server.py) in a subprocess."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

from sp4rk.tools import Registry, RunContext, ToolPolicy
from sp4rk.tools.builtins import register_builtins
from tests.tools.builtin_helpers import alive, gone

pytest.importorskip("mcp", reason="the MCP gateway needs the sp4rk[mcp] extra")

from mcp.types import ListToolsResult

from sp4rk.tools import mcp as mcp_module
from sp4rk.tools.mcp import MAX_DESCRIPTION_CHARS, MCPGateway, MCPServerConfig, render_result

SERVER = str(Path(__file__).with_name("mcp_demo_server.py"))


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with (tmp_path / "server-stderr.log").open("w") as f:
        yield f


def stdio(errlog: TextIO, **options: Any) -> MCPServerConfig:
    return MCPServerConfig(
        name="demo", command=sys.executable, args=[SERVER], stderr=errlog, **options
    )


@pytest.fixture
async def gateway(errlog: TextIO) -> AsyncIterator[MCPGateway]:
    async with MCPGateway([stdio(errlog, call_timeout=2.0)]) as gw:
        yield gw


async def run(registry: Registry, name: str, raw: str = "{}") -> tuple[str, bool]:
    result = await registry.execute(RunContext(), name, raw)
    return result.content, result.is_error


REGISTERED = ["add", "crash", "dotted_name", "env_probe", "fail", "hang", "pid", "verbose"]
CLASH = {
    "dotted_name": "its name becomes 'dotted_name', which 'dotted.name' from 'demo' already uses"
}


async def test_tools_are_discovered_registered_and_never_shadow_builtins(
    gateway: MCPGateway, tmp_path: Path
) -> None:
    registry = Registry()
    register_builtins(registry, tmp_path)
    builtin_read = registry.get("read_file")
    report = await gateway.register(registry)
    assert sorted(report.registered) == REGISTERED
    assert report.skipped == {
        "read_file": "the name is taken by a tool from 'core'",
        "finish": "the name is taken by a tool from 'core'",
        **CLASH,
    }
    assert report.failed == {}
    assert registry.get("read_file") is builtin_read
    descriptor = next(d for d in registry.list() if d.name == "add")
    assert (descriptor.source, descriptor.source_category, descriptor.group) == (
        "demo", "mcp", "local_mcp",
    )  # fmt: skip
    assert descriptor.description == "Add two integers."
    assert descriptor.input_schema["required"] == ["a", "b"]
    assert registry.is_tool_untrusted("add")
    assert registry.get_tool_source("add") == "demo"
    assert registry.policy("add") is ToolPolicy.ALWAYS_ALLOW


async def test_reserved_names_and_name_clashes_are_skipped_without_builtins(
    gateway: MCPGateway,
) -> None:
    registry = Registry()
    report = await gateway.register(registry)
    assert sorted(report.registered) == REGISTERED
    assert report.skipped == {
        "read_file": "the name 'read_file' is reserved for a built-in tool",
        "finish": "the name 'finish' is reserved for a built-in tool",
        **CLASH,
    }
    assert await run(registry, "dotted_name") == ("dotted ok", False)
    description = next(d.description for d in registry.list() if d.name == "verbose")
    assert len(description) == MAX_DESCRIPTION_CHARS + 1
    assert description.startswith("A tool with a very long description. Blah.")
    assert description.endswith("…")


async def test_calls_results_and_errors(
    gateway: MCPGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-for-mcp-0123456789")
    registry = Registry()
    await gateway.register(registry)
    assert await run(registry, "add", '{"a": 1, "b": 2}') == ("3", False)
    assert await run(registry, "dotted_name") == ("dotted ok", False)
    content, is_error = await run(registry, "fail", '{"message": "disk on fire"}')
    assert is_error
    assert "disk on fire" in content
    content, is_error = await run(registry, "add", '{"a": 1')
    assert is_error
    assert content.startswith("failed to parse input")
    assert await run(registry, "env_probe") == ("absent", False)


async def test_a_hung_server_is_reset_and_reconnected(gateway: MCPGateway) -> None:
    registry = Registry()
    await gateway.register(registry)
    first_pid = int((await run(registry, "pid"))[0])
    content, is_error = await run(registry, "hang")
    assert is_error
    assert "MCP server 'demo' did not answer within 2s" in content
    assert "re-established on the next call" in content
    second_pid = int((await run(registry, "pid"))[0])
    assert second_pid != first_pid
    assert await gone(first_pid)


async def test_a_crashed_server_is_restarted_on_next_use(gateway: MCPGateway) -> None:
    registry = Registry()
    await gateway.register(registry)
    first_pid = int((await run(registry, "pid"))[0])
    content, is_error = await run(registry, "crash")
    assert is_error
    assert "MCP server 'demo' failed" in content
    assert "restarted on the next call" in content
    assert await gone(first_pid)
    second_pid = int((await run(registry, "pid"))[0])
    assert second_pid != first_pid
    assert await run(registry, "add", '{"a": 2, "b": 2}') == ("4", False)


async def test_a_server_that_dies_while_idle_is_reconnected_before_the_next_call(
    gateway: MCPGateway,
) -> None:
    registry = Registry()
    await gateway.register(registry)
    first_pid = int((await run(registry, "pid"))[0])
    runner = next(t for t in asyncio.all_tasks() if t.get_name() == "mcp:demo")
    os.kill(first_pid, signal.SIGKILL)  # the server the gateway started for this test
    await asyncio.wait_for(runner, 10)  # the gateway noticed the closed connection
    assert await run(registry, "add", '{"a": 1, "b": 2}') == ("3", False)
    assert int((await run(registry, "pid"))[0]) != first_pid


async def test_the_tool_list_is_read_page_by_page(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = {
        None: {"tools": [{"name": "one", "inputSchema": {"type": "object"}}], "nextCursor": "2"},
        "2": {"tools": [{"name": "two", "inputSchema": {"type": "object"}}], "nextCursor": "3"},
        "3": {"tools": [{"name": "three", "inputSchema": {"type": "object"}}], "nextCursor": "2"},
    }
    asked: list[str | None] = []

    class PagedSession:
        async def list_tools(self, *, params: Any = None) -> ListToolsResult:
            cursor = params.cursor if params is not None else None
            asked.append(cursor)
            return ListToolsResult.model_validate(pages[cursor])

    async def session(self: Any) -> PagedSession:
        return PagedSession()

    monkeypatch.setattr(mcp_module._Connection, "session", session)
    gateway = MCPGateway([MCPServerConfig(name="paged", command="unused")])
    report = await gateway.register(Registry())
    assert report.registered == ["one", "two", "three"]
    assert asked == [None, "2", "3"]  # a cursor seen before ends the listing


def test_secrets_stay_out_of_the_config_repr() -> None:
    http = MCPServerConfig(
        name="x", url="http://h/mcp", headers={"Authorization": "Bearer sk-live-SECRET123"}
    )
    stdio = MCPServerConfig(name="y", command="srv", env={"API_KEY": "sk-SECRET456"})
    for config in (http, stdio):
        text = repr(config)
        assert "SECRET" not in text
        assert config.name in text


async def test_closing_the_gateway_stops_the_server(errlog: TextIO) -> None:
    gateway = MCPGateway([stdio(errlog)])
    registry = Registry()
    await gateway.register(registry)
    pid = int((await run(registry, "pid"))[0])
    assert alive(pid)
    await gateway.aclose()
    assert await gone(pid)


async def test_an_unreachable_server_is_reported_not_raised(errlog: TextIO) -> None:
    broken = MCPServerConfig(name="broken", command="/nonexistent/mcp-server", stderr=errlog)
    async with MCPGateway([broken]) as gateway:
        report = await gateway.register(Registry())
    assert report.registered == []
    assert "MCP server 'broken' could not be reached" in report.failed["broken"]


async def test_streamable_http_transport(errlog: TextIO) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, SERVER, "--http", stdout=asyncio.subprocess.PIPE, stderr=errlog
    )
    try:
        assert proc.stdout is not None
        port = int(await asyncio.wait_for(proc.stdout.readline(), 30))
        config = MCPServerConfig(name="remote", url=f"http://127.0.0.1:{port}/mcp")
        async with MCPGateway([config]) as gateway:
            registry = Registry()
            report = await gateway.register(registry)
            assert "add" in report.registered
            assert registry.list()[0].group == "remote_mcp"
            assert await run(registry, "add", '{"a": 20, "b": 22}') == ("42", False)
    finally:
        proc.kill()
        await proc.wait()


def test_a_missing_sdk_names_the_extra() -> None:
    code = "import sys; sys.modules['mcp'] = None; import sp4rk.tools.mcp"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0
    assert "pip install 'sp4rk[mcp]'" in out.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "core", "command": "x"}, "not 'core'"),
        ({"name": "a b", "command": "x"}, "must be letters"),
        ({"name": "s", "command": "x", "url": "http://h"}, "exactly one of command or url"),
        ({"name": "s"}, "exactly one of command or url"),
        ({"name": "s", "command": "x", "call_timeout": 0}, "timeouts must be positive"),
    ],
)
def test_server_config_validation(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MCPServerConfig(**options)


def test_server_names_are_unique() -> None:
    config = MCPServerConfig(name="s", command="x")
    with pytest.raises(ValueError, match="two MCP servers are named 's'"):
        MCPGateway([config, config])


def test_results_render_every_content_kind() -> None:
    result = render_result(
        {
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "mimeType": "image/png", "data": "AAAA"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "inline"}},
                {"type": "resource", "resource": {"uri": "file:///b", "blob": "AA=="}},
                {"type": "resource_link", "uri": "file:///c"},
            ],
            "isError": True,
        }
    )
    assert result.is_error
    assert result.content.split("\n") == [
        "hello", "[image: image/png, 3 bytes omitted]", "inline", "[resource file:///b]",
        "[resource link: file:///c]",
    ]  # fmt: skip
    assert render_result({"content": [], "structuredContent": {"n": 1}}).content == '{"n": 1}'


def failing(errlog: TextIO, starts: Path) -> MCPServerConfig:
    script = (
        f"open({str(starts)!r}, 'a').write('x'); import sys; "
        "sys.stderr.write('boom: no config file\\n'); sys.exit(3)"
    )
    return MCPServerConfig(
        name="failing", command=sys.executable, args=["-c", script], stderr=errlog
    )


async def test_a_failed_start_says_why_and_respawning_backs_off(
    errlog: TextIO, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    async with MCPGateway([failing(errlog, starts)]) as gateway:
        report = await gateway.register(Registry())
        why = report.failed["failing"]
        assert "exited with status 3" in why
        assert "boom: no config file" in why  # the tail of its stderr
        assert f"command: {sys.executable} -c" in why
        assert "tries again in 1s" in why
        tool = mcp_module._make_tool(gateway._connections["failing"], {"name": "t"})
        assert tool is not None
        again = await tool.execute(RunContext(), "{}")
    assert again.is_error and again.self_wrapped
    assert "failed to start 1 time(s) in a row; the next attempt is in" in again.content
    assert starts.read_text() == "x"  # no respawn on every call
    boom = again.content.index("boom: no config file")
    assert again.content.rfind('<untrusted-content source="mcp:failing">', 0, boom) > 0


async def test_sp4rk_notices_stay_outside_the_servers_words(gateway: MCPGateway) -> None:
    registry = Registry()
    await gateway.register(registry)
    crashed = await registry.execute(RunContext(), "crash", "{}")
    assert crashed.is_error and crashed.self_wrapped
    notice, _, detail = crashed.content.partition("\n")
    assert notice.startswith("MCP server 'demo' failed (the server process exited with status 3)")
    assert "restarted on the next call" in notice
    assert detail.startswith('<untrusted-content source="mcp:demo">')
    assert detail.endswith("</untrusted-content>")
    bad = await registry.execute(RunContext(), "add", '{"a": 1, "a": 2}')
    assert bad.is_error and bad.self_wrapped and "repeats the key 'a'" in bad.content
    fine = await registry.execute(RunContext(), "add", '{"a": 1, "b": 2}')
    assert not fine.self_wrapped  # the server's own output is wrapped whole by the executor
