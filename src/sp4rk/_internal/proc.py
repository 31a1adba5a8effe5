"""Subprocesses in their own process group, with capped output and a hard timeout.

Why a process group: a shell command's grandchildren (``sleep 100 &``, a test server, a
compiler) must die with it, on timeout, on cancellation and when the command returns while
leaving something behind. Why a cap while reading: a command such as ``yes`` produces output
forever, so nothing may buffer it whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_READ_CHUNK = 65536
#: Seconds to wait for a killed group's pipe to close.
_REAP_GRACE = 5.0

logger = logging.getLogger("sp4rk.tools")


@dataclass(slots=True)
class ProcessOutcome:
    """What a finished (or killed) process left behind.

    ``output`` holds the first ``max_output_bytes`` bytes of stdout+stderr and ``tail`` the
    last ``tail_bytes`` after them (when asked for); ``truncated_bytes`` were dropped between
    the two. ``exit_code`` is ``None`` when the process was killed (timeout or output cap)
    and negative when a signal ended it.
    """

    output: str
    exit_code: int | None
    timed_out: bool
    truncated_bytes: int
    tail: str = ""
    capped: bool = False


class _Capture:
    """Keeps a head and (optionally) a tail of a stream, counting what falls between."""

    def __init__(self, head_bytes: int, tail_bytes: int) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.head_bytes = head_bytes
        self.tail_bytes = tail_bytes
        self.dropped = 0

    def add(self, block: bytes) -> bool:
        """Store ``block``; report whether anything went past the head."""
        room = self.head_bytes - len(self.head)
        if room > 0:
            self.head += block[:room]
            block = block[room:]
        if not block:
            return False
        if self.tail_bytes > 0:
            self.tail += block
            overflow = len(self.tail) - self.tail_bytes
            if overflow > 0:
                self.dropped += overflow
                del self.tail[:overflow]
        else:
            self.dropped += len(block)
        return True


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str] | None,
    timeout: float,
    max_output_bytes: int,
    shell: bool = False,
    tail_bytes: int = 0,
    kill_on_cap: bool = False,
) -> ProcessOutcome:
    """Run ``argv`` with stdin closed, stdout+stderr merged and capped while reading.

    The child leads its own process group. On timeout or cancellation the whole group is
    killed, so grandchildren (``sleep`` in a shell script) die too; members still alive when
    the command itself exits are killed as well.

    Args:
        argv: the program and its arguments; with ``shell=True``, ``argv[0]`` is a command
            line for ``/bin/sh -c``.
        cwd: working directory (``None``: the current one).
        env: the complete environment (``None``: inherit this process's).
        timeout: seconds until the group is killed.
        max_output_bytes: bytes kept from the start of the output.
        shell: run ``argv[0]`` through the shell.
        tail_bytes: also keep this many bytes from the end of the output.
        kill_on_cap: kill the group as soon as the output passes ``max_output_bytes``
            instead of draining (and dropping) the rest.
    """
    spawn_env = dict(env) if env is not None else None
    if shell:
        proc = await asyncio.create_subprocess_shell(
            argv[0],
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=cwd,
            env=spawn_env,
            start_new_session=True,
        )
    else:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=cwd,
            env=spawn_env,
            start_new_session=True,
        )
    capture = _Capture(max_output_bytes, tail_bytes)
    capped = False

    async def pump() -> None:
        nonlocal capped
        stream = proc.stdout
        if stream is None:  # pragma: no cover - stdout is always a pipe here
            return
        while block := await stream.read(_READ_CHUNK):
            if capture.add(block) and kill_on_cap:
                capped = True
                return

    timed_out = False
    deadline = asyncio.get_running_loop().time() + timeout
    try:
        try:
            async with asyncio.timeout_at(deadline):
                await pump()
                if not capped:
                    await proc.wait()
        except TimeoutError:
            timed_out = True
    finally:
        # Kill the group even when the leader exited: background members must not outlive
        # the command. Linux does not reuse a PID while it still names a process group.
        _kill_group(proc.pid)
        await asyncio.shield(_reap(proc))
    killed = timed_out or capped
    return ProcessOutcome(
        output=capture.head.decode("utf-8", "replace"),
        exit_code=None if killed else proc.returncode,
        timed_out=timed_out,
        truncated_bytes=capture.dropped,
        tail=_decode_tail(bytes(capture.tail)),
        capped=capped,
    )


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Wait for the process, draining its pipe first.

    asyncio reports the exit only once the pipe closes, and a pipe left full of unread
    output never closes.
    """
    try:
        async with asyncio.timeout(_REAP_GRACE):
            if proc.stdout is not None:
                while await proc.stdout.read(_READ_CHUNK):
                    pass
            await proc.wait()
    except TimeoutError:
        # Something outside the group (a daemon that called setsid) still holds the pipe.
        logger.warning("process %d: output pipe still open after the kill; closing it", proc.pid)
        transport = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()


def _decode_tail(data: bytes) -> str:
    """Decode a tail that may start inside a multi-byte character."""
    start = 0
    while start < min(len(data), 3) and 0x80 <= data[start] <= 0xBF:
        start += 1
    return data[start:].decode("utf-8", "replace")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
