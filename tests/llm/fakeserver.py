"""A scripted HTTP server on 127.0.0.1 that the official SDK clients talk to for real.

Tests queue replies per path (JSON bodies, raw bytes, server-sent-event streams, error statuses
with headers, servers that stall); the server answers each request with the next reply queued
for its path and records what it received, so tests can assert on the exact request bodies the
SDKs sent.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One canned answer: a JSON (or text) body, or an SSE stream when ``events`` is set."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[tuple[str | None, Any]] | None = None
    """``(event name or None, data)``; data is JSON-encoded unless it is a string."""
    dropped: bool = False
    """Send the events as a chunked body and drop the connection before its last chunk."""
    raw: bytes | None = None
    """Send these bytes as the body, as they are (``content_type`` says what they are)."""
    content_type: str = ""
    stall: str = ""
    """Never finish: ``"trickle"`` sends the headers of a long JSON body, then one byte every
    ``interval``; ``"keepalive"`` sends the events (if any), then an SSE comment every
    ``interval``; ``"silent"`` reads the request and never answers; ``"slow-headers"`` sends
    the status line one byte every ``interval``. Each ends when the client goes or the server
    closes."""
    interval: float = 0.05
    echo: bool = False
    """Replace the text ``<<REQUEST>>`` in ``body`` with everything the request carried (its
    path and query, headers and body), as a careless server echoing it would."""


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    query: str = ""


class FakeServer:
    """Serves queued replies; ``url`` is its base URL (``http://127.0.0.1:<port>``)."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._queues: dict[str, deque[Reply]] = defaultdict(deque)
        self._lock = threading.Lock()
        self.closing = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def queue(self, path: str, *replies: Reply) -> None:
        with self._lock:
            self._queues[path].extend(replies)

    def bodies(self, path: str) -> list[Any]:
        """The JSON bodies received on ``path``, in order."""
        return [r.body for r in self.received if r.path == path]

    def clear(self, path: str) -> None:
        """Drop the replies still queued for ``path``."""
        with self._lock:
            self._queues.pop(path, None)

    def pending(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    def next_reply(self, path: str) -> Reply:
        with self._lock:
            queue = self._queues.get(path)
            if queue:
                return queue.popleft()
        message = f"fake server: nothing queued for {path}"
        return Reply(418, {"error": {"message": message, "type": "test_error"}})

    def close(self) -> None:
        self.closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def _handler_for(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            path, _, query = self.path.partition("?")
            headers = {k.lower(): v for k, v in self.headers.items()}
            with server._lock:
                server.received.append(Received("POST", path, headers, body, query))
            reply = server.next_reply(path)
            try:
                if reply.stall:
                    self._stall(reply)
                elif reply.events is not None:
                    self._send_events(reply)
                else:
                    self._send_body(reply, raw)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client went away: fine

        def _stall(self, reply: Reply) -> None:
            """Keep the client waiting as ``reply.stall`` says, until it or the server goes."""
            self.close_connection = True
            if reply.stall == "slow-headers":
                for byte in b"HTTP/1.1 200 OK\r\n":
                    if server.closing.wait(reply.interval):
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
            elif reply.stall == "trickle":
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(10**6))
                self.end_headers()
                self.wfile.write(b"{")
            elif reply.stall == "keepalive":
                self._send_events(reply)
            tick = {"trickle": b" ", "keepalive": b": keep-alive\n\n"}.get(reply.stall)
            while not server.closing.wait(reply.interval):
                if tick:
                    self.wfile.write(tick)
                    self.wfile.flush()

        def _send_body(self, reply: Reply, raw_body: bytes) -> None:
            if reply.raw is not None:
                payload = reply.raw
            elif isinstance(reply.body, str):
                payload = reply.body.encode()
            else:
                payload = json.dumps(reply.body).encode()
            if reply.echo:
                seen = f"{self.command} {self.path} {dict(self.headers)} {raw_body!r}"
                payload = payload.replace(b"<<REQUEST>>", json.dumps(seen)[1:-1].encode())
            self.send_response(reply.status)
            content_type = reply.content_type or (
                "text/plain" if isinstance(reply.body, str) else "application/json"
            )
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def _send_events(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type or "text/event-stream")
            self.send_header("Connection", "close")
            if reply.dropped:
                self.send_header("Transfer-Encoding", "chunked")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if reply.raw is not None:  # a hand-written stream, byte for byte
                self.wfile.write(reply.raw)
            for event, data in reply.events or []:
                text = data if isinstance(data, str) else json.dumps(data)
                frame = ((f"event: {event}\n" if event else "") + f"data: {text}\n\n").encode()
                if reply.dropped:
                    frame = b"%x\r\n%s\r\n" % (len(frame), frame)
                self.wfile.write(frame)
                self.wfile.flush()
            self.close_connection = True  # a dropped body ends here, without its last chunk

        def log_message(self, format: str, *args: Any) -> None:  # silence stderr
            return

    return Handler
