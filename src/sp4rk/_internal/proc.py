"""Subprocesses in their own process group, with capped output and a hard timeout.

Why a process group: a shell command's grandchildren (``sleep 100 &``, a test server, a
compiler) must die with it, on timeout, on cancellation and when the command returns while
leaving something behind. Why a cap while reading: a command such as ``yes`` produces output
forever, so nothing may buffer it whole.

A process can leave the group (``setsid``, a daemon). To find those too, every process
started here carries a random marker in its environment (:data:`TAG_VARIABLE`), which its
descendants inherit; when the command ends, ``/proc`` is searched for live processes of this
user that carry the marker or belong to the group, and each is killed through a pidfd (so a
reused PID is never hit). A process that both leaves the group and drops its environment
(``env -i setsid …``) is not found; on systems without ``/proc`` and pidfds only the group is
killed.

The command's own exit ends the wait, not the end of its output: a background job that
keeps the output pipe open gets :data:`DRAIN_GRACE` seconds to finish writing, then dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Seconds output is still read after the command exited (background jobs may hold the pipe).
DRAIN_GRACE = 1.0
#: Seconds to wait for a killed command to be reaped.
_REAP_GRACE = 5.0
#: The environment variable that marks every process a command started.
TAG_VARIABLE = "SP4RK_PROCESS_TAG"
#: Searches of ``/proc`` for processes still alive after a kill (they may fork meanwhile).
_MAX_SWEEPS = 5

#: Variables a child inherits from this process's environment; nothing else is passed on.
ENV_ALLOWLIST = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
)
#: Set for every child so that tools behave non-interactively.
NON_INTERACTIVE_ENV = {
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "NO_COLOR": "1",
}

logger = logging.getLogger("sp4rk.tools")


def allowlisted_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: :data:`ENV_ALLOWLIST`, :data:`NON_INTERACTIVE_ENV`, ``extra``.

    API keys, tokens and every other variable of this process are left out.
    """
    env = {k: v for k in ENV_ALLOWLIST if (v := os.environ.get(k)) is not None}
    env.setdefault("PATH", os.defpath)
    env.update(NON_INTERACTIVE_ENV)
    env.update(extra or {})
    return env


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
    leftovers: int = 0
    """Processes the command started that were still running at the end and were killed."""


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


class _Collector(asyncio.SubprocessProtocol):
    """Captures the merged output as it arrives and signals exit, end of output and cap."""

    def __init__(self, capture: _Capture, kill_on_cap: bool) -> None:
        self.capture = capture
        self.kill_on_cap = kill_on_cap
        self.capped = False
        self.exited = asyncio.Event()
        self.eof = asyncio.Event()
        self.settled = asyncio.Event()
        """Set when the command exited, or its output passed the cap with ``kill_on_cap``."""

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if self.capped:
            return
        if self.capture.add(data) and self.kill_on_cap:
            self.capped = True
            self.settled.set()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.eof.set()

    def process_exited(self) -> None:
        self.exited.set()
        self.settled.set()


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str],
    timeout: float,
    max_output_bytes: int,
    tail_bytes: int = 0,
    kill_on_cap: bool = False,
    pass_fds: Sequence[int] = (),
    input: bytes | None = None,
) -> ProcessOutcome:
    """Run ``argv`` with stdin closed (or fed ``input``), stdout+stderr merged and capped.

    The child leads its own process group. The wait ends when the command exits (output
    still in flight gets :data:`DRAIN_GRACE` seconds), at the timeout, or on cancellation;
    then every process the command left behind is killed, inside the group or not (see the
    module docstring).

    Args:
        argv: the program and its arguments.
        cwd: working directory (``None``: the current one).
        env: the complete environment (build it with :func:`allowlisted_environment`);
            :data:`TAG_VARIABLE` is added.
        timeout: seconds until the group is killed.
        max_output_bytes: bytes kept from the start of the output.
        tail_bytes: also keep this many bytes from the end of the output.
        kill_on_cap: kill the group as soon as the output passes ``max_output_bytes``
            instead of draining (and dropping) the rest.
        pass_fds: descriptors the child inherits.
        input: bytes written to the child's stdin, which is then closed (``None``: stdin is
            ``/dev/null``).
    """
    loop = asyncio.get_running_loop()
    tag = secrets.token_hex(16)
    capture = _Capture(max_output_bytes, tail_bytes)
    transport, collector = await loop.subprocess_exec(
        lambda: _Collector(capture, kill_on_cap),
        *argv,
        stdin=asyncio.subprocess.DEVNULL if input is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=cwd,
        env={**env, TAG_VARIABLE: tag},
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    pid = transport.get_pid()
    if input is not None:
        stdin = transport.get_pipe_transport(0)
        assert isinstance(stdin, asyncio.WriteTransport)
        stdin.write(input)
        stdin.close()  # after the buffer is written; a child that exits early just drops it
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout):
                await collector.settled.wait()
        except TimeoutError:
            timed_out = True
        if collector.exited.is_set() and not collector.capped:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_GRACE):
                    await collector.eof.wait()
    finally:
        leftovers = stop_process_tree(pid, tag)
        await asyncio.shield(_reap(transport, collector))
    killed = timed_out or collector.capped
    return ProcessOutcome(
        output=capture.head.decode("utf-8", "replace"),
        exit_code=None if killed else transport.get_returncode(),
        timed_out=timed_out,
        truncated_bytes=capture.dropped,
        tail=_decode_tail(bytes(capture.tail)),
        capped=collector.capped,
        leftovers=leftovers,
    )


async def _reap(transport: asyncio.SubprocessTransport, collector: _Collector) -> None:
    """Wait (bounded) until the killed command is reaped, then close its pipe."""
    try:
        async with asyncio.timeout(_REAP_GRACE):
            await collector.exited.wait()
    except TimeoutError:
        logger.warning("process %d: not reaped %gs after SIGKILL", transport.get_pid(), _REAP_GRACE)
    # Closing our end of the pipe ends the wait for output that something we could not find
    # (it left the group and dropped the marker) may still hold open.
    transport.close()


def stop_process_tree(pid: int, tag: str) -> int:
    """SIGKILL the group ``pid`` leads and every live process carrying ``tag``.

    Returns:
        How many processes other than ``pid`` itself were found and killed.
    """
    killed: set[int] = set()
    for _ in range(_MAX_SWEEPS):
        found = _kill_tagged(pid, tag)
        # The group too, in case /proc cannot be searched here.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if not found:
            break
        killed |= found
    killed.discard(pid)
    return len(killed)


def _kill_tagged(group: int, tag: str) -> set[int]:
    """Kill live processes of this user in process group ``group`` or carrying ``tag``."""
    if not hasattr(os, "pidfd_open"):
        return set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    marker = f"{TAG_VARIABLE}={tag}".encode()
    uid = os.getuid()
    found: set[int] = set()
    for name in entries:
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue  # gone already, or not ours to see
        try:
            if _matches(pid, uid, group, marker):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                found.add(pid)
        except OSError:
            pass  # it exited (or is not ours) meanwhile
        finally:
            os.close(pidfd)
    return found


def _matches(pid: int, uid: int, group: int, marker: bytes) -> bool:
    """Whether ``pid`` is a live process of ``uid``, in ``group`` or with ``marker`` set.

    The caller holds a pidfd of ``pid``, so the files read here belong to that process or,
    if it exited, to nothing that a signal through the pidfd could reach.
    """
    if os.stat(f"/proc/{pid}").st_uid != uid:
        return False
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    if fields[0] in (b"Z", b"X"):
        return False  # already dead, awaiting its parent
    if int(fields[2]) == group:
        return True
    with open(f"/proc/{pid}/environ", "rb") as f:
        environ = f.read()
    return marker in environ.split(b"\0")


def _decode_tail(data: bytes) -> str:
    """Decode a tail that may start inside a multi-byte character."""
    start = 0
    while start < min(len(data), 3) and 0x80 <= data[start] <= 0xBF:
        start += 1
    return data[start:].decode("utf-8", "replace")
