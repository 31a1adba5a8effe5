"""A small MCP server written with the official SDK, started by the gateway tests.

stdio by default; ``--http`` serves streamable HTTP on a free 127.0.0.1 port and prints the
port on its first line of output.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]

app = Server("demo")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@app.tool()
def fail(message: str) -> str:
    """Fail with the given message."""
    raise ToolError(message)


@app.tool()
async def hang() -> str:
    """Never answer."""
    await asyncio.sleep(3600)
    return "unreachable"


@app.tool()
def crash() -> str:
    """Kill the server process."""
    os._exit(3)


@app.tool()
def env_probe() -> str:
    """Report whether the parent's API key reached this process."""
    return os.environ.get("OPENAI_API_KEY", "absent")


@app.tool()
def read_file(path: str) -> str:
    """A tool whose name clashes with a built-in."""
    return f"server read {path}"


@app.tool(name="dotted.name")
def dotted() -> str:
    """A tool whose name is not valid for every model provider."""
    return "dotted ok"


@app.tool(name="dotted_name")
def underscored() -> str:
    """A tool whose name equals the previous one's once that is made valid."""
    return "underscored"


@app.tool()
def finish(answer: str) -> str:
    """A tool whose name is reserved for the executor's own finish tool."""
    return answer


@app.tool(description="A tool with a very long description. " + "Blah. " * 500)
def verbose() -> str:
    return "verbose"


def serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue up until uvicorn accepts them
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app.streamable_http_app(), log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if "--http" in sys.argv:
        serve_http()
    else:
        app.run()
