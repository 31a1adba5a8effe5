"""Subprocesses in their own process group, with capped output and a hard timeout."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class ProcessOutcome:
    """What a finished (or killed) process left behind."""

    output: str
    exit_code: int | None
    timed_out: bool
    truncated_bytes: int


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str] | None,
    timeout: float,
    max_output_bytes: int,
    shell: bool = False,
) -> ProcessOutcome:
    """Run ``argv`` with stdin closed, stdout+stderr merged and capped while reading.

    The child leads its own process group; on timeout or cancellation the whole group is
    killed, so grandchildren (``sleep`` in a shell script) die too.
    """
    if shell:
        proc = await asyncio.create_subprocess_shell(
            argv[0],
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    else:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    chunks: list[bytes] = []
    kept = 0
    dropped = 0

    async def pump() -> None:
        nonlocal kept, dropped
        assert proc.stdout is not None
        while block := await proc.stdout.read(65536):
            room = max_output_bytes - kept
            if room > 0:
                chunks.append(block[:room])
                kept += min(room, len(block))
            dropped += max(0, len(block) - max(room, 0))

    timed_out = False
    try:
        try:
            await asyncio.wait_for(pump(), timeout)
            await asyncio.wait_for(proc.wait(), max(1.0, timeout))
        except TimeoutError:
            timed_out = True
    finally:
        if proc.returncode is None:
            _kill_group(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                await asyncio.shield(proc.wait())
    text = b"".join(chunks).decode("utf-8", "replace")
    return ProcessOutcome(text, None if timed_out else proc.returncode, timed_out, dropped)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
