"""MCP gateway: tools of Model Context Protocol servers as sp4rk tools (``pip install sp4rk[mcp]``).

Built on the official ``mcp`` SDK, over stdio (the gateway starts the server) or streamable
HTTP. :meth:`MCPGateway.register` connects to each server, lists its tools and registers
them in a :class:`~sp4rk.tools.Registry` with the server's name as their source, which makes
them:

- **untrusted** — their output is wrapped in ``<untrusted-content>`` tags;
- **cached with the MCP TTL** — the executor's ``ToolResultCache`` expires results whose
  source is an MCP server after ``mcp_ttl`` seconds;
- **unable to shadow** a built-in or host tool of the same name, a name sp4rk reserves
  for its built-ins (:data:`~sp4rk.tools.builtins.RESERVED_TOOL_NAMES`, registered or not),
  or another MCP tool whose name is the same once made valid for providers (``a.b`` and
  ``a_b``): such a tool is skipped and reported.

Descriptions reach the prompt, so each is cut at :data:`MAX_DESCRIPTION_CHARS`; the tool list
is read page by page (up to :data:`MAX_TOOL_PAGES` pages).

Each server's connection lives in a task of its own (the SDK's cancel scopes must be entered
and left by one task). A server that crashes, or does not answer a call within
``call_timeout``, yields an error result and its connection is dropped; the next call to one
of its tools starts a new connection (and, for stdio, a new process). A server that closes
its connection while idle is noticed when it does, so the next call reconnects first.

Use a gateway from one event loop and close it (``async with`` or :meth:`MCPGateway.aclose`),
which also stops every server process it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shlex
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TextIO

from sp4rk._internal.args import as_list
from sp4rk._internal.untrusted import wrap_untrusted_content
from sp4rk.tools.base import ToolPolicy, ToolResult, ToolTraits, parse_error_result
from sp4rk.tools.builtins import RESERVED_TOOL_NAMES
from sp4rk.tools.context import RunContext
from sp4rk.tools.registry import Registry
from sp4rk.tools.tool_input import parse_tool_input

try:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.types import PaginatedRequestParams
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "sp4rk.tools.mcp needs the official MCP SDK; install it with `pip install 'sp4rk[mcp]'`"
    ) from exc

logger = logging.getLogger("sp4rk.tools")

#: The JSON-RPC error code the SDK reports when the connection itself is gone.
_CONNECTION_CLOSED = -32000
#: Seconds a closing connection gets to stop its server before it is cancelled.
_CLOSE_GRACE = 10.0
#: Longest tool description passed on to the model (descriptions reach the prompt).
MAX_DESCRIPTION_CHARS = 1000
#: Pages of a server's tool list read before the rest is ignored.
MAX_TOOL_PAGES = 100
#: Seconds before a server that failed to start is tried again; doubled per failure, capped.
_RETRY_FIRST = 1.0
_RETRY_MAX = 60.0
#: Bytes of a stdio server's stderr kept for error messages.
STDERR_TAIL_BYTES = 2000
#: Seconds a failed server is given to finish writing to stderr before the tail is read.
_STDERR_GRACE = 0.5
#: What the supervisor writes to stderr when the server exits (``_exit_status`` reads it).
_EXIT_LINE = "[sp4rk: MCP server process "

#: Runs a stdio server (``argv[1:]``) as its child and, when it exits, writes how to stderr:
#: the SDK does not tell how its server process ended. stdin and stdout are the server's
#: own. SIGTERM and SIGINT are passed on. ``python -I -S``: no site, no environment.
_SUPERVISOR = """
import os, signal, sys
try:
    child = os.fork()
except OSError:
    os._exit(126)
if child == 0:
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    except OSError as exc:
        sys.stderr.write("cannot start %s: %s\\n" % (sys.argv[1], exc))
    os._exit(127)
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda n, _: os.kill(child, n))
while True:
    try:
        _, status = os.waitpid(child, 0)
        break
    except ChildProcessError:
        os._exit(1)
    except InterruptedError:
        continue
code = os.waitstatus_to_exitcode(status)
how = "was killed by signal %d" % -code if code < 0 else "exited with status %d" % code
sys.stderr.write("[sp4rk: MCP server process %s]\\n" % how)
sys.stderr.flush()
os._exit(code if code >= 0 else 128 - code)
"""
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPServerConfig:
    """How to reach one MCP server: give ``command`` (stdio) or ``url`` (streamable HTTP).

    ``env`` and ``headers`` usually hold secrets, so the repr leaves them out.

    Attributes:
        name: the server's name; it becomes its tools' source (not ``"core"``).
        command: the program that runs a stdio server.
        args: its arguments.
        env: variables for the server process, added to the SDK's safe defaults (the
            parent's other variables, API keys included, are not passed on).
        cwd: the server process's working directory.
        url: the endpoint of a streamable HTTP server.
        headers: HTTP headers for every request (for example authorization).
        policy: the policy of the server's tools.
        confirm_destructive: tools the server annotates ``destructiveHint: true`` need a
            human's confirmation even when ``policy`` allows the server's other tools.
        call_timeout: seconds a tool call may take before the server counts as hung.
        connect_timeout: seconds to start the server and finish the handshake.
        stderr: where a stdio server's stderr goes (default: this process's stderr).
    """

    name: str
    command: str = ""
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    policy: ToolPolicy = ToolPolicy.ALWAYS_ALLOW
    confirm_destructive: bool = True
    call_timeout: float = 60.0
    connect_timeout: float = 30.0
    stderr: TextIO | None = None

    def __post_init__(self) -> None:
        if not _SERVER_NAME.match(self.name) or self.name == "core":
            raise ValueError(
                f"MCP server name {self.name!r} must be letters, digits, '_', '-' or '.', "
                "and not 'core'"
            )
        if bool(self.command) == bool(self.url):
            raise ValueError(f"MCP server {self.name!r}: give exactly one of command or url")
        if self.call_timeout <= 0 or self.connect_timeout <= 0:
            raise ValueError(f"MCP server {self.name!r}: timeouts must be positive")
        as_list(self.args, f"MCP server {self.name!r}: args", "arguments")


@dataclass(slots=True)
class MCPRegistration:
    """What :meth:`MCPGateway.register` did."""

    registered: list[str] = field(default_factory=list)
    """Names of the tools now in the registry."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Tool name (as its server calls it) → why it was not registered (for example: it
    would shadow a built-in)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Server name → why it could not be reached or listed."""


class MCPUnavailableError(RuntimeError):
    """A server could not be reached, crashed, or did not answer in time.

    ``notice`` is sp4rk's account of what happened and what comes next; ``detail`` is what
    the server or the system reported (an error message, the server's last stderr lines),
    which the server controls: the tool's observation wraps it as untrusted, and only it.
    ``retryable`` is true unless the server itself refused the request: after a crash, a
    hang or a restart, calling again is legitimate (the repeat breaker does not count it).
    """

    def __init__(self, notice: str, detail: str = "", *, retryable: bool = True) -> None:
        super().__init__(f"{notice}\n{detail}" if detail else notice)
        self.notice = notice
        self.detail = detail
        self.retryable = retryable

    def observation(self, server: str) -> ToolResult:
        """The error result for the model: the notice, the detail inside a boundary."""
        text = self.notice
        if self.detail:
            text += "\n" + wrap_untrusted_content(self.detail, f"mcp:{server}")
        return ToolResult(text, is_error=True, self_wrapped=True, retryable=self.retryable)


class MCPTool:
    """One tool of an MCP server, satisfying the ``Tool`` protocol."""

    is_untrusted = True

    def __init__(
        self,
        connection: _Connection,
        remote_name: str,
        *,
        name: str,
        description: str,
        input_schema: dict[str, Any],
        annotations: Mapping[str, Any] | None = None,
    ) -> None:
        self._connection = connection
        self.remote_name = remote_name
        self.name = name
        self.description = description
        self.input_schema = input_schema
        self.traits, destructive = _traits_from_annotations(annotations or {})
        policy = connection.config.policy
        confirm = destructive and connection.config.confirm_destructive
        if confirm and policy is ToolPolicy.ALWAYS_ALLOW:
            policy = ToolPolicy.USER_CONFIRM
        self.default_policy = policy

    @property
    def server(self) -> str:
        """The name of the server the tool belongs to."""
        return self._connection.config.name

    @property
    def group(self) -> str:
        """``"remote_mcp"`` for an HTTP server, ``"local_mcp"`` for a stdio one."""
        return "remote_mcp" if self._connection.config.url else "local_mcp"

    def __repr__(self) -> str:
        return f"MCPTool({self.server}:{self.remote_name})"

    async def execute(self, ctx: RunContext, input: str) -> ToolResult:
        """Call the tool on its server; failures of any kind come back as error results."""
        try:
            arguments = parse_tool_input(input)
        except ValueError as exc:
            return parse_error_result(str(exc))
        try:
            result = await self._connection.call(self.remote_name, arguments)
        except MCPUnavailableError as exc:
            return exc.observation(self.server)
        return render_result(result)


class _Connection:
    """One server's session, owned by a dedicated task; restarted after a failure."""

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._session: ClientSession | None = None
        self._ended: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._stderr: _StderrTail | None = None
        self._failures = 0
        self._retry_at = 0.0
        self._last_failure = ""

    async def session(self) -> ClientSession:
        """The live session, connecting (or reconnecting) first when needed."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._lock is None:
            # A new event loop cannot use tasks or locks of an old one.
            self._loop, self._lock = loop, asyncio.Lock()
            self._session = self._runner = self._stop = self._ended = None
            self._closing = set()
            self._retry_at = 0.0
        async with self._lock:
            if self._session is not None and self._alive():
                return self._session
            self.retire()
            wait = self._retry_at - loop.time()
            if wait > 0:
                raise MCPUnavailableError(
                    f"MCP server {self.name!r} failed to start {self._failures} time(s) in a "
                    f"row; the next attempt is in {wait:.0f}s. Use other tools meanwhile.",
                    self._last_failure,
                )
            ready: asyncio.Future[tuple[ClientSession, asyncio.Event]] = loop.create_future()
            stop = asyncio.Event()
            self._stop = stop
            self._stderr = _StderrTail(self.config.stderr or sys.stderr) if self._stdio else None
            self._runner = asyncio.create_task(self._run(ready, stop), name=f"mcp:{self.name}")
            try:
                async with asyncio.timeout(self.config.connect_timeout):
                    session, self._ended = await asyncio.shield(ready)
            except TimeoutError:
                error = await self._start_failed(
                    f"did not start within {self.config.connect_timeout:g}s"
                )
                self.retire(cancel=True)
                raise error from None
            except Exception as exc:
                error = await self._start_failed("could not be reached", exc)
                self.retire(cancel=True)
                raise error from exc
            if self._stderr is not None:
                self._stderr.close()  # the server has its own copy; ours would hide its exit
            self._session = session
            self._failures = 0
            self._retry_at = 0.0
            return session

    @property
    def _stdio(self) -> bool:
        return not self.config.url

    async def _stderr_tail(self) -> str:
        """What the server last wrote to stderr (given a moment to finish writing)."""
        stderr = self._stderr
        if stderr is None:
            return ""
        stderr.close()
        await asyncio.to_thread(stderr.wait, _STDERR_GRACE)
        return stderr.text()

    async def _start_failed(
        self, what: str, exc: BaseException | None = None
    ) -> MCPUnavailableError:
        """The error for a failed start, with all that is known; the next start backs off."""
        self._failures += 1
        delay = min(_RETRY_MAX, _RETRY_FIRST * 2 ** (self._failures - 1))
        self._retry_at = asyncio.get_running_loop().time() + delay
        config = self.config
        where = f"command: {_command_line(config)}" if self._stdio else f"url: {config.url}"
        details = []
        if exc is not None:
            details.append(_describe(exc))
        status, tail = _exit_status(await self._stderr_tail())
        if status:
            what += f"; the server process {status}"
        if tail:
            details.append(f"last lines on stderr:\n{tail}")
        self._last_failure = "\n".join(details)
        return MCPUnavailableError(
            f"MCP server {self.name!r} {what} ({where}). sp4rk tries again in {delay:g}s; "
            "fix the server or its configuration if this persists.",
            self._last_failure,
        )

    @property
    def name(self) -> str:
        return self.config.name

    def _alive(self) -> bool:
        """Whether the connection's task runs and the server has not closed its end."""
        runner, ended = self._runner, self._ended
        return runner is not None and not runner.done() and not (ended and ended.is_set())

    async def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools as wire-format dictionaries, every page."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_TOOL_PAGES):
            page = partial(
                _list_page, params=PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            data = _wire(await self._guarded(page))
            tools += [t for t in data.get("tools") or [] if isinstance(t, dict)]
            cursor = data.get("nextCursor")
            if not isinstance(cursor, str) or not cursor or cursor in seen:
                return tools
            seen.add(cursor)
        logger.warning(
            "MCP server %r lists more than %d pages of tools; the rest are ignored",
            self.name,
            MAX_TOOL_PAGES,
        )
        return tools

    async def call(self, remote_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call a tool and return the result in wire format."""
        return _wire(await self._guarded(lambda s: s.call_tool(remote_name, arguments)))

    async def _guarded(self, request: Callable[[ClientSession], Awaitable[Any]]) -> Any:
        session = await self.session()
        try:
            async with asyncio.timeout(self.config.call_timeout):
                return await request(session)
        except TimeoutError:
            self.retire()
            raise MCPUnavailableError(
                f"MCP server {self.name!r} did not answer within {self.config.call_timeout:g}s; "
                "its connection was reset and will be re-established on the next call"
            ) from None
        except Exception as exc:
            code = getattr(getattr(exc, "error", None), "code", None)
            if isinstance(code, int) and code != _CONNECTION_CLOSED:
                raise MCPUnavailableError(
                    f"MCP server {self.name!r} refused the request; what it said:",
                    _describe(exc),
                    retryable=False,
                ) from exc
            status, tail = _exit_status(await self._stderr_tail())
            self.retire()
            raise MCPUnavailableError(
                f"MCP server {self.name!r} failed"
                + (f" (the server process {status})" if status else "")
                + "; it will be restarted on the next call. What was reported:",
                _describe(exc) + (f"\nlast lines on stderr:\n{tail}" if tail else ""),
            ) from exc

    async def _run(
        self, ready: asyncio.Future[tuple[ClientSession, asyncio.Event]], stop: asyncio.Event
    ) -> None:
        ended = asyncio.Event()
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                watched = await stack.enter_async_context(_watch_end(read, ended))
                session = await stack.enter_async_context(ClientSession(watched, write))
                await session.initialize()
                ready.set_result((session, ended))
                await _first_set(stop, ended)
                if not stop.is_set():
                    logger.warning(
                        "MCP server %r closed its connection; it will be restarted on the next "
                        "call",
                        self.name,
                    )
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                logger.warning("MCP server %r connection ended: %s", self.name, _describe(exc))
        finally:
            if not ready.done():
                ready.cancel()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[tuple[Any, Any]]:
        if self.config.url:
            return _http_transport(self.config.url, self.config.headers)
        argv = [self.config.command, *self.config.args]
        if sys.executable:  # (an embedded Python has none: then no exit status is known)
            argv = [sys.executable, "-I", "-S", "-c", _SUPERVISOR, *argv]
        params = StdioServerParameters(
            command=argv[0],
            args=argv[1:],
            env=dict(self.config.env) if self.config.env is not None else None,
            cwd=self.config.cwd,
        )
        assert self._stderr is not None
        return _pair(stdio_client(params, errlog=self._stderr.writer()))

    def retire(self, *, cancel: bool = False) -> None:
        """Drop the current connection; its task stops the server in the background."""
        self._session = self._ended = None
        if self._stderr is not None:
            stderr, self._stderr = self._stderr, None
            if self._runner is not None and not self._runner.done():
                self._runner.add_done_callback(lambda _: stderr.close())
            else:
                stderr.close()
        if self._stop is not None:
            self._stop.set()
        runner = self._runner
        self._runner = self._stop = None
        if runner is not None and not runner.done():
            if cancel:
                runner.cancel()
            self._closing.add(runner)
            runner.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Stop the connection and wait (bounded) until every server process is gone."""
        if self._loop is not asyncio.get_running_loop():
            return
        self.retire()
        pending = set(self._closing)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=_CLOSE_GRACE)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=_CLOSE_GRACE)


class MCPGateway:
    """Connects to MCP servers and offers their tools to a :class:`~sp4rk.tools.Registry`.

    Args:
        servers: the servers to use.

    Raises:
        ValueError: when two servers share a name.
    """

    def __init__(self, servers: Iterable[MCPServerConfig]) -> None:
        self._connections: dict[str, _Connection] = {}
        for config in servers:
            if config.name in self._connections:
                raise ValueError(f"two MCP servers are named {config.name!r}")
            self._connections[config.name] = _Connection(config)

    async def __aenter__(self) -> MCPGateway:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def discover(self, result: MCPRegistration | None = None) -> list[MCPTool]:
        """Connect to every server and list its tools (unreachable servers are skipped).

        Args:
            result: where to note servers that failed (optional).
        """
        found: list[MCPTool] = []
        for name, connection in self._connections.items():
            try:
                listed = await connection.list_tools()
            except MCPUnavailableError as exc:
                logger.warning("%s", exc)
                if result is not None:
                    result.failed[name] = str(exc)
                continue
            for spec in listed:
                tool = _make_tool(connection, spec)
                if tool is not None:
                    found.append(tool)
        return found

    async def register(self, registry: Registry) -> MCPRegistration:
        """Discover every server's tools and register them with the server as source.

        A tool is skipped (never replaces another) when its name is taken by a core tool or
        another server's tool, is reserved for a built-in, or equals that of a tool
        registered earlier in this call once both are made valid for providers; the result
        says which and why.
        """
        result = MCPRegistration()
        claimed: dict[str, MCPTool] = {}
        for tool in await self.discover(result):
            reason = _conflict(registry, tool, claimed.get(tool.name))
            if reason:
                result.skipped[tool.remote_name] = reason
                logger.warning(
                    "MCP tool %r from %r skipped: %s", tool.remote_name, tool.server, reason
                )
                continue
            claimed[tool.name] = tool
            # replace=True: the server's own tools, registered again (``_conflict`` kept
            # every other owner's name).
            registry.register(
                tool, source=tool.server, source_category="mcp", group=tool.group, replace=True
            )
            result.registered.append(tool.name)
        return result

    async def aclose(self) -> None:
        """Close every connection and stop the server processes this gateway started."""
        await asyncio.gather(*(c.aclose() for c in self._connections.values()))


def render_result(result: Mapping[str, Any]) -> ToolResult:
    """A wire-format ``CallToolResult`` as a ``ToolResult``: text joined, media summarised."""
    parts: list[str] = []
    for block in result.get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            size = len(str(block.get("data", ""))) * 3 // 4
            parts.append(f"[{kind}: {block.get('mimeType', 'unknown type')}, {size} bytes omitted]")
        elif kind == "resource":
            resource = block.get("resource") or {}
            text = resource.get("text")
            parts.append(str(text) if text is not None else f"[resource {resource.get('uri', '')}]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {block.get('uri', '')}]")
    structured = result.get("structuredContent")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    return ToolResult("\n".join(parts), is_error=bool(result.get("isError")))


def _conflict(registry: Registry, tool: MCPTool, earlier: MCPTool | None) -> str:
    """Why ``tool`` may not be registered under its name (``""`` when it may)."""
    owner = registry.get_tool_source(tool.name)
    if earlier is not None:
        return (
            f"its name becomes {tool.name!r}, which {earlier.remote_name!r} from "
            f"{earlier.server!r} already uses"
        )
    if owner and owner != tool.server:
        return f"the name is taken by a tool from {owner!r}"
    if tool.name in RESERVED_TOOL_NAMES:
        return f"the name {tool.name!r} is reserved for a built-in tool"
    return ""


def _make_tool(connection: _Connection, spec: Mapping[str, Any]) -> MCPTool | None:
    remote = spec.get("name")
    if not isinstance(remote, str) or not remote:
        return None
    name = _TOOL_NAME.sub("_", remote)[:64]
    schema = spec.get("inputSchema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        schema = {"type": "object", "properties": {}}
    description = str(spec.get("description") or "")
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[:MAX_DESCRIPTION_CHARS] + "…"
    annotations = spec.get("annotations")
    return MCPTool(
        connection,
        remote,
        name=name,
        description=description,
        input_schema=schema,
        annotations=annotations if isinstance(annotations, Mapping) else None,
    )


def _traits_from_annotations(annotations: Mapping[str, Any]) -> tuple[ToolTraits, bool]:
    """Traits from a tool's MCP annotations, and whether the server calls it destructive.

    Every MCP tool's output comes from outside the workspace (``external``). Only explicit
    hints count beyond that (the protocol's defaults would make every unannotated tool
    destructive): ``readOnlyHint`` makes a tool read-only (it may run in parallel);
    ``destructiveHint`` makes it mutating and, by default, subject to confirmation;
    ``openWorldHint`` says it reaches other systems (``network``). Annotations are hints from
    the server, so they never relax anything the host set.
    """
    read_only = annotations.get("readOnlyHint") is True
    destructive = not read_only and annotations.get("destructiveHint") is True
    network = annotations.get("openWorldHint") is True
    traits = ToolTraits(read_only=read_only, mutating=destructive, external=True, network=network)
    return traits, destructive


def _wire(model: Any) -> dict[str, Any]:
    """An SDK result model as its JSON wire form (the same keys in every SDK version)."""
    data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data if isinstance(data, dict) else {}


class _StderrTail:
    """A pipe for a stdio server's stderr: passed on to ``sink``, the last bytes kept."""

    def __init__(self, sink: TextIO) -> None:
        self._sink = sink
        read_fd, write_fd = os.pipe()
        self._write = os.fdopen(write_fd, "w")
        self._tail = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._pump, args=(read_fd,), name="mcp-stderr", daemon=True
        )
        self._thread.start()

    def writer(self) -> TextIO:
        """The file to hand the server as its stderr."""
        return self._write

    def _pump(self, read_fd: int) -> None:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while block := pipe.read(4096):
                with self._lock:
                    self._tail += block
                    del self._tail[:-STDERR_TAIL_BYTES]
                with contextlib.suppress(Exception):  # a closed or broken sink loses nothing
                    self._sink.write(block.decode("utf-8", "replace"))
                    self._sink.flush()

    def wait(self, timeout: float) -> None:
        """Block until every writer closed the pipe (the server exited), or ``timeout``."""
        self._thread.join(timeout)

    def text(self) -> str:
        """The last bytes written so far."""
        with self._lock:
            data = bytes(self._tail)
        return data.decode("utf-8", "replace").strip()

    def close(self) -> None:
        """Close our end of the pipe (the pump ends when the server's end closes too)."""
        with contextlib.suppress(OSError):
            self._write.close()


def _exit_status(tail: str) -> tuple[str, str]:
    """How the server process ended (``""``: it had not) and ``tail`` without that line.

    The supervisor (:data:`_SUPERVISOR`) wrote it.
    """
    at = tail.rfind(_EXIT_LINE)
    if at < 0:
        return "", tail
    status, _, rest = tail[at + len(_EXIT_LINE) :].partition("]")
    return status, (tail[:at] + rest).strip()


def _command_line(config: MCPServerConfig) -> str:
    return " ".join(shlex.quote(part) for part in (config.command, *config.args))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _list_page(session: ClientSession, *, params: PaginatedRequestParams | None) -> Any:
    return await session.list_tools(params=params)


async def _first_set(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


@contextlib.asynccontextmanager
async def _watch_end(source: Any, ended: asyncio.Event) -> AsyncIterator[Any]:
    """A stream with everything ``source`` delivers; ``ended`` is set when ``source`` ends.

    That is how a server that exits (or drops the connection) while idle is noticed.
    """
    send, receive = anyio.create_memory_object_stream[Any](0)

    async def forward() -> None:
        try:
            async with send:
                async for item in source:
                    await send.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the session stopped reading: it is closing
        finally:
            ended.set()

    async with anyio.create_task_group() as group, receive:
        group.start_soon(forward)
        yield receive
        group.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def _pair(
    streams: contextlib.AbstractAsyncContextManager[Any],
) -> AsyncIterator[tuple[Any, Any]]:
    """The ``(read, write)`` streams of a transport, whatever else it yields."""
    async with streams as values:
        yield values[0], values[1]


@contextlib.asynccontextmanager
async def _http_transport(
    url: str, headers: Mapping[str, str] | None
) -> AsyncIterator[tuple[Any, Any]]:
    # mcp>=1.24 (the sp4rk[mcp] bound) has both; imported here, on first use.
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=dict(headers or {})) as client,
        _pair(streamable_http_client(url, http_client=client)) as streams,
    ):
        yield streams
