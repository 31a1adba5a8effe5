"""The terminal while a run goes on: typed lines, and Ctrl-C.

Lines typed at the terminal are answers while a question is open (an approval, the step
limit) and live messages to the model otherwise. Ctrl-C asks the run to pause at the next
step boundary; a second Ctrl-C stops it at once (every completed step is already saved).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable


class LineInput:
    """Reads the terminal's lines in a thread and routes each one on the event loop.

    Args:
        on_message: receives a line typed while no question is open.
    """

    def __init__(self, on_message: Callable[[str], None]) -> None:
        self._on_message = on_message
        self._loop = asyncio.get_running_loop()
        self._waiter: asyncio.Future[str | None] | None = None
        self._closed = False

    def start(self) -> None:
        """Start reading (a daemon thread: a blocked read never keeps the process alive)."""
        threading.Thread(target=self._read, name="sp4rk-stdin", daemon=True).start()

    def _read(self) -> None:
        # os.read on the descriptor, not sys.stdin: a daemon thread blocked inside a buffered
        # stream's lock can abort the interpreter's shutdown.
        fd = sys.stdin.fileno()
        pending = b""
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b""
            if data:
                *complete, pending = (pending + data).split(b"\n")
                lines = [c.decode("utf-8", "replace") + "\n" for c in complete]
            else:  # end of input: the last partial line, then the end marker ""
                lines = [pending.decode("utf-8", "replace") + "\n"] if pending else []
                lines.append("")
            try:
                for line in lines:
                    self._loop.call_soon_threadsafe(self._arrived, line)
            except RuntimeError:  # the loop is closed: the run is over
                return
            if not data:
                return

    def _arrived(self, line: str) -> None:
        if not line:
            self._closed = True
        text = line.rstrip("\r\n")
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(text if line else None)
        elif text.strip():
            self._on_message(text)

    async def ask(self) -> str | None:
        """The next line typed; ``None`` at end of input or when the question is withdrawn."""
        if self._closed:
            return None
        self._waiter = self._loop.create_future()
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def withdraw(self) -> None:
        """Answer an open question with ``None`` (Ctrl-C while the human was asked)."""
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class Interrupts:
    """Ctrl-C (and SIGTERM) while a run goes on.

    The first Ctrl-C calls ``on_pause`` (pause at the next boundary); a second one, or
    SIGTERM, calls ``on_stop`` (cancel the run now).
    """

    def __init__(self, on_pause: Callable[[], None], on_stop: Callable[[], None]) -> None:
        self._on_pause = on_pause
        self._on_stop = on_stop
        self.count = 0
        self._loop = asyncio.get_running_loop()

    def __enter__(self) -> Interrupts:
        self._loop.add_signal_handler(signal.SIGINT, self._interrupt)
        self._loop.add_signal_handler(signal.SIGTERM, self._on_stop)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError, RuntimeError):
                self._loop.remove_signal_handler(sig)

    def _interrupt(self) -> None:
        self.count += 1
        if self.count == 1:
            self._on_pause()
        else:
            self._on_stop()
