"""Helpers shared by the built-in tool tests."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sp4rk.tools import RunContext, Tool, ToolResult

CANARY = "TOP-SECRET-CANARY-7f3a"

Route = tuple[int, dict[str, str], bytes]


async def call(
    tool: Tool, *, approved: bool = True, ctx: RunContext | None = None, **args: Any
) -> ToolResult:
    """Run ``tool`` directly with ``args`` as its JSON input."""
    context = (ctx or RunContext()).replace(tool_call_approved=approved)
    return await tool.execute(context, json.dumps(args))


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


async def gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` exits within ``within`` seconds (a pidfd says when it does)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    exited = loop.create_future()
    loop.add_reader(fd, lambda: exited.done() or exited.set_result(None))
    try:
        await asyncio.wait_for(exited, within)
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    return True


def token() -> str:
    """A unique name to give a test's process (``(exec -a NAME sleep 60) &``)."""
    return f"sp4rk-test-{uuid.uuid4().hex[:12]}"


def named(name: str) -> list[int]:
    """Host PIDs of live processes whose command line holds ``name``.

    A contained command runs in a PID namespace, so the PIDs it prints (``$!``) are not
    the host's: tests find its processes by name instead.
    """
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if name.encode() in cmdline and alive(int(entry)):
                found.append(int(entry))
    return found


async def none_named(name: str) -> bool:
    """Whether every process named ``name`` exits within a few seconds."""
    return all([await gone(pid) for pid in named(name)])


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed) with its content or link target."""
    state: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                state[rel] = "link:" + os.readlink(p)
            elif p.is_file():
                state[rel] = p.read_text(errors="replace")
            else:
                state[rel] = "dir"
    return state


PAGE = b"""<!doctype html><html><head><title>Sp4rk Docs</title>
<style>body { color: red }</style><script>alert('injected')</script></head>
<body><nav>Home | About</nav><main><h1>Getting started</h1>
<p>Install with <code>pip install sp4rk</code>. This paragraph is long enough to count as the
main content of the page, which the converter keeps while dropping navigation.</p>
<ul><li>one</li><li>two</li></ul><a href="/next">Next page</a></main>
<footer>Copyright</footer></body></html>"""


@dataclass
class LocalServer:
    """A tiny HTTP server that counts its connections and answers from ``routes``.

    A route of ``None`` never answers.
    """

    routes: dict[str, Route | None] = field(default_factory=dict)
    connections: int = 0
    port: int = 0
    _server: asyncio.Server | None = None
    _never: asyncio.Event = field(default_factory=asyncio.Event)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode()
            route = self.routes.get(path, (404, {}, b"missing"))
            if route is None:  # hang: never answer
                await self._never.wait()
                return
            status, headers, body = route
            reason = {200: "OK", 302: "Found", 404: "Not Found"}.get(status, "Status")
            lines = [f"HTTP/1.1 {status} {reason}", "Connection: close"]
            lines += [f"{k}: {v}" for k, v in headers.items()]
            if "Content-Length" not in headers and "X-No-Length" not in headers:
                lines.append(f"Content-Length: {len(body)}")
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"


class serve:
    """``async with serve() as server``: a LocalServer on a free 127.0.0.1 port."""

    def __init__(self) -> None:
        self.srv = LocalServer()

    async def __aenter__(self) -> LocalServer:
        self.srv._server = await asyncio.start_server(self.srv._handle, "127.0.0.1", 0)
        self.srv.port = self.srv._server.sockets[0].getsockname()[1]
        return self.srv

    async def __aexit__(self, *exc: object) -> None:
        assert self.srv._server is not None
        self.srv._server.close()
        self.srv._never.set()
        await self.srv._server.wait_closed()
