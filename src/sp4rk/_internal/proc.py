"""Subprocesses in their own process group, with capped output and a hard timeout.

Why a process group: a shell command's grandchildren (``sleep 100 &``, a test server, a
compiler) must die with it, on timeout, on cancellation and when the command returns while
leaving something behind. Why a cap while reading: a command such as ``yes`` produces output
forever, so nothing may buffer it whole.

A process can leave the group (``setsid``, a daemon). To find those too, every process
started here carries a random marker in its environment (:data:`TAG_VARIABLE`), which its
descendants inherit; when the command ends, ``/proc`` is searched for live processes of this
user that carry the marker or belong to the group, and each is killed through a pidfd (so a
reused PID is never hit).

A process can also drop the marker (``env -i setsid …``, ``unset``, ``execve`` with an empty
environment). So, where Linux allows it, a command asked to be contained (``contain=True``)
runs in a PID namespace of its own, with its own ``/proc``: ``unshare`` (util-linux) starts a
small init (:data:`_INIT`) as the namespace's PID 1, which runs the command, reports its exit
status on a pipe and then reaps. No process can leave a PID namespace, and when its PID 1
dies the kernel kills every process in it; the sweep also kills what lives in the namespace.
As a bonus the command cannot see this process in ``/proc`` (so not its environment either).
Root gets a plain PID namespace; another user gets one inside a user namespace that maps
them to themselves (``--user --map-current-user``). Where neither works (no ``unshare``,
user namespaces disabled, not Linux) commands run as before, and a process that both leaves
the group and drops the marker is not found; on systems without ``/proc`` and pidfds only
the group is killed.

The command's own exit ends the wait, not the end of its output: a background job that
keeps the output pipe open gets :data:`DRAIN_GRACE` seconds to finish writing, then dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import signal
import sys
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
#: Seconds the output is still read after everything was killed (what was in the pipe).
_FLUSH_GRACE = 0.5
#: Seconds the one-time check that PID namespaces work may take.
_PROBE_TIMEOUT = 10.0

#: PID 1 of a contained command's namespace: runs the command (``argv[3:]``); when it
#: exits, gives processes that still hold the output up to ``argv[2]`` seconds to let go of
#: it (the same grace the uncontained path gives), then writes the exit status to
#: descriptor ``argv[1]`` and reaps until the caller kills it. ``python -I -S``: no site, no
#: environment. It polls, because the output pipe's other end is also held by ``unshare``.
_INIT = """
import os, sys, time
report, grace = int(sys.argv[1]), float(sys.argv[2])
os.set_inheritable(report, False)
try:
    child = os.fork()
except OSError:
    os._exit(126)
if child == 0:
    try:
        os.execvp(sys.argv[3], sys.argv[3:])
    finally:
        os._exit(127)
while True:
    pid, status = os.wait()
    if pid == child:
        break
output = os.readlink("/proc/self/fd/1")
def held():
    for name in os.listdir("/proc"):
        if name.isdigit() and name != "1":
            try:
                for fd in os.listdir("/proc/%s/fd" % name):
                    if os.readlink("/proc/%s/fd/%s" % (name, fd)) == output:
                        return True
            except OSError:
                pass
    return False
deadline = time.monotonic() + grace
while time.monotonic() < deadline and held():
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
    time.sleep(0.02)
os.write(report, b"%d\\n" % os.waitstatus_to_exitcode(status))
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(3600)
"""

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
        self.process_gone = asyncio.Event()
        """Set when the process started (the command, or ``unshare``) was reaped."""

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if self.capped:
            return
        if self.capture.add(data) and self.kill_on_cap:
            self.capped = True
            self.settled.set()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.eof.set()

    def process_exited(self) -> None:
        self.process_gone.set()
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
    contain: bool = False,
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
        contain: run the command in a PID namespace of its own where the system allows it
            (:func:`namespace_prefix`), so that nothing it starts survives it.
    """
    loop = asyncio.get_running_loop()
    tag = secrets.token_hex(16)
    capture = _Capture(max_output_bytes, tail_bytes)
    prefix = await namespace_prefix() if contain else []
    report: _Report | None = None
    if prefix:
        report = _Report()
        init = [sys.executable, "-I", "-S", "-c", _INIT, str(report.write_fd), str(DRAIN_GRACE)]
        argv = [*prefix, *init, *argv]
        pass_fds = (*pass_fds, report.write_fd)
    try:
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
    except BaseException:
        if report is not None:
            report.close()
        raise
    pid = transport.get_pid()
    if input is not None:
        stdin = transport.get_pipe_transport(0)
        assert isinstance(stdin, asyncio.WriteTransport)
        stdin.write(input)
        stdin.close()  # after the buffer is written; a child that exits early just drops it
    if report is not None:
        report.watch(loop, collector)
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout):
                await collector.settled.wait()
        except TimeoutError:
            timed_out = True
        if collector.exited.is_set() and not collector.capped and report is None:
            # (A namespace's init gave that grace already.)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_GRACE):
                    await collector.eof.wait()
    finally:
        leftovers = stop_process_tree(pid, tag, namespaced=report is not None)
        await asyncio.shield(_reap(transport, collector))
        if report is not None:
            report.close()
    killed = timed_out or collector.capped
    exit_code = transport.get_returncode() if report is None else report.exit_code
    return ProcessOutcome(
        output=capture.head.decode("utf-8", "replace"),
        exit_code=None if killed else exit_code,
        timed_out=timed_out,
        truncated_bytes=capture.dropped,
        tail=_decode_tail(bytes(capture.tail)),
        capped=collector.capped,
        leftovers=leftovers,
    )


class _Report:
    """The pipe on which a namespace's init reports the command's exit status."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.exit_code: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._data = b""

    def watch(self, loop: asyncio.AbstractEventLoop, collector: _Collector) -> None:
        """Close our copy of the write end; mark ``collector`` exited when the status comes."""
        os.close(self.write_fd)
        self.write_fd = -1
        self._loop = loop

        def readable() -> None:
            try:
                chunk = os.read(self.read_fd, 64)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            self._data += chunk
            if chunk and not self._data.endswith(b"\n"):
                return
            loop.remove_reader(self.read_fd)
            with contextlib.suppress(ValueError):
                self.exit_code = int(self._data)
            # The command exited (or its init died, when nothing came): settle like an exit.
            collector.exited.set()
            collector.settled.set()

        loop.add_reader(self.read_fd, readable)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self.read_fd)
            self._loop = None
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                os.close(fd)
        self.read_fd = self.write_fd = -1


_namespace_prefix: list[str] | None = None


async def namespace_prefix() -> list[str]:
    """The ``unshare`` arguments that give a command its own PID namespace and ``/proc``.

    ``[]`` where that does not work here. Found out once per process, by trying.
    """
    global _namespace_prefix
    if _namespace_prefix is None:
        _namespace_prefix = await _probe_namespaces()
        if not _namespace_prefix:
            logger.info(
                "PID namespaces are unavailable here; commands are contained by process "
                "group and environment marker only"
            )
    return _namespace_prefix


async def _probe_namespaces() -> list[str]:
    unshare = shutil.which("unshare") if sys.platform.startswith("linux") else None
    if unshare is None or not hasattr(os, "pidfd_open") or not sys.executable:
        return []  # (the init runs on this Python)
    common = ["--pid", "--fork", "--mount-proc", "--kill-child", "--"]
    plain = [[unshare, *common]] if os.geteuid() == 0 else []
    plain.append([unshare, "--user", "--map-current-user", *common])
    # With setpriv, unshare dies with this process (even by kill -9), and --kill-child takes
    # the namespace with it: nothing a command started outlives the agent.
    setpriv = shutil.which("setpriv")
    guard = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
    candidates = [*([*guard, *prefix] for prefix in plain if guard), *plain]
    for prefix in candidates:
        try:
            probe = await asyncio.create_subprocess_exec(
                *prefix,
                "true",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            return []
        try:
            async with asyncio.timeout(_PROBE_TIMEOUT):
                code = await probe.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(probe.pid, signal.SIGKILL)
            await probe.wait()
            continue
        if code == 0:
            return prefix
    return []


async def _reap(transport: asyncio.SubprocessTransport, collector: _Collector) -> None:
    """Wait (bounded) until the killed command is reaped, then close its pipe."""
    try:
        async with asyncio.timeout(_REAP_GRACE):
            await collector.process_gone.wait()
    except TimeoutError:
        logger.warning("process %d: not reaped %gs after SIGKILL", transport.get_pid(), _REAP_GRACE)
    # Output written just before the kill may still be in the pipe: read it (bounded).
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_FLUSH_GRACE):
            await collector.eof.wait()
    # Closing our end of the pipe ends the wait for output that something we could not find
    # (it left the group and dropped the marker) may still hold open.
    transport.close()


def stop_process_tree(pid: int, tag: str, *, namespaced: bool = False) -> int:
    """SIGKILL the group ``pid`` leads and every live process carrying ``tag``.

    When ``namespaced``, also every process in the PID namespace ``pid`` (an ``unshare``)
    made.

    Returns:
        How many processes the command left were found and killed: not ``pid`` itself, nor
        a namespace's init or the command it ran.
    """
    namespace = _child_namespace(pid) if namespaced else None
    # Freeze the group first: a shell whose child is killed would otherwise go on to its next
    # command (``sleep 10; echo late >> log``) in the moment before its own turn comes.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGSTOP)
    killed: set[int] = set()
    for _ in range(_MAX_SWEEPS):
        found = _kill_tagged(pid, tag, namespace)
        # The group too, in case /proc cannot be searched here.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if not found:
            break
        killed |= found
    return len(killed)


def _child_namespace(pid: int) -> str | None:
    """The PID namespace ``pid``'s children live in, when it is not this process's own."""
    try:
        theirs = os.readlink(f"/proc/{pid}/ns/pid_for_children")
        ours = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None  # gone: its namespace died with it (unshare --kill-child)
    return theirs if theirs != ours else None


def _kill_tagged(group: int, tag: str, namespace: str | None) -> set[int]:
    """Kill this user's live processes in ``group``, carrying ``tag``, or in ``namespace``.

    Returns those that count as left behind (see :func:`stop_process_tree`). What the
    command left is killed before ``group``'s leader and a namespace's own processes: once
    those die, the kernel kills the rest of the namespace unseen.
    """
    if not hasattr(os, "pidfd_open"):
        return set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    marker = f"{TAG_VARIABLE}={tag}".encode()
    uid = os.getuid()
    held: list[tuple[int, int, int]] = []
    try:
        for name in entries:
            if not name.isdigit():
                continue
            pid = int(name)
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                continue  # gone already, or not ours to see
            try:
                match = _matches(pid, uid, group, marker, namespace)
            except OSError:
                match = _NO  # it exited (or is not ours) meanwhile
            if match == _NO:
                os.close(pidfd)
            else:
                held.append((_OWN if pid == group else match, pid, pidfd))
        found: set[int] = set()
        for match, pid, pidfd in sorted(held):  # _LEFT_BEHIND first
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                if match == _LEFT_BEHIND:
                    found.add(pid)
        return found
    finally:
        for _, _, pidfd in held:
            os.close(pidfd)


#: :func:`_matches` results: not ours; ours and left behind; ours but the command's own
#: (a namespace's init and the command it ran, or the process started).
_NO, _LEFT_BEHIND, _OWN = 0, 1, 2


def _matches(pid: int, uid: int, group: int, marker: bytes, namespace: str | None) -> int:
    """Whether ``pid`` is ``uid``'s, alive, and in ``group``, in ``namespace`` or marked.

    :data:`_OWN` for a namespace's init (PID 1) and its command (PID 2). The caller holds a
    pidfd of ``pid``, so the files read here belong to that process or, if it exited, to
    nothing that a signal through the pidfd could reach.
    """
    if os.stat(f"/proc/{pid}").st_uid != uid:
        return _NO
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    if fields[0] in (b"Z", b"X"):
        return _NO  # already dead, awaiting its parent
    if namespace is not None and os.readlink(f"/proc/{pid}/ns/pid") == namespace:
        return _OWN if _inner_pid(pid) in (1, 2) else _LEFT_BEHIND
    if int(fields[2]) == group:
        return _LEFT_BEHIND
    with open(f"/proc/{pid}/environ", "rb") as f:
        environ = f.read()
    return _LEFT_BEHIND if marker in environ.split(b"\0") else _NO


def _inner_pid(pid: int) -> int:
    """``pid``'s number in its innermost PID namespace."""
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"NSpid:"):
                return int(line.split()[-1])
    return pid


def _decode_tail(data: bytes) -> str:
    """Decode a tail that may start inside a multi-byte character."""
    start = 0
    while start < min(len(data), 3) and 0x80 <= data[start] <= 0xBF:
        start += 1
    return data[start:].decode("utf-8", "replace")
