"""A pseudo-terminal to drive the real ``sp4rk`` command as a person would (stdlib ``pty``)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import termios
import time
from collections.abc import Sequence

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
#: Longest a test waits for the program to print something (a hang bound, not a timing).
PATIENCE = 90.0


class Terminal:
    """Runs ``argv`` on a new pseudo-terminal, as the session's controlling terminal."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], cwd: str) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec at once (nothing else runs after a fork)
            try:
                os.chdir(cwd)
                os.execvpe(argv[0], list(argv), {**env, "TERM": "xterm-256color"})
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.raw = ""
        self._seen = 0

    @property
    def text(self) -> str:
        """Everything printed so far, without colours."""
        return _ANSI.sub("", self.raw)

    def _read(self, timeout: float) -> bool:
        """Read what arrives within ``timeout``; ``False`` at the end of output or on timeout."""
        ready, _, _ = select.select([self.fd], [], [], max(timeout, 0))
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not chunk:
            return False
        self.raw += chunk.decode("utf-8", "replace")
        return True

    def expect(self, pattern: str) -> str:
        """Wait until ``pattern`` (a regex) appears after what was matched before."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + PATIENCE
        while True:
            match = regex.search(self.text, self._seen)
            if match:
                self._seen = match.end()
                return match.group(0)
            if not self._read(deadline - time.monotonic()):
                raise AssertionError(f"never saw {pattern!r}; the terminal shows:\n{self.text}")

    def send(self, text: str) -> None:
        """Type ``text`` (``"\\r"`` is Enter, ``"\\x03"`` is Ctrl-C)."""
        os.write(self.fd, text.encode())

    def wait(self) -> int:
        """Read to the end of the output and return the exit status."""
        deadline = time.monotonic() + PATIENCE
        while self._read(deadline - time.monotonic()):
            pass
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)
