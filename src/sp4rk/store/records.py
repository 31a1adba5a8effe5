"""What the runs store holds, as plain data: runs, their status, the tool-effect ledger.

And which run carries each task of a batch.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any, Literal

#: Where a run stands. ``interrupted`` is never written: it is a ``running`` run whose process
#: is gone (killed, crashed, rebooted), told apart by :meth:`RunRecord.display_status`.
RunStatus = Literal["running", "paused", "finished", "stopped", "failed"]
STATUSES: tuple[RunStatus, ...] = ("running", "paused", "finished", "stopped", "failed")

#: What the ledger knows about a tool call.
CallStatus = Literal["started", "completed", "answered", "interrupted", "not_run"]


@dataclass(slots=True, kw_only=True)
class RunRecord:
    """One run as the store keeps it (its steps and state are read separately)."""

    id: str
    task: str
    workspace: str
    model: str
    settings: dict[str, Any] = field(default_factory=dict)
    """How the run is configured (max steps, approvals, system prompt …), as JSON data."""
    status: RunStatus = "running"
    exit_reason: str = ""
    output: str = ""
    error: str = ""
    step_count: int = 0
    """Committed trajectory entries."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    """``None`` when the model's price is unknown."""
    owner: str = ""
    """``host:pid`` of the process driving the run (empty when none is)."""
    created_at: str = ""
    updated_at: str = ""

    def display_status(self) -> str:
        """The status, with ``interrupted`` for a running run whose process is gone."""
        if self.status == "running" and not owner_alive(self.owner):
            return "interrupted"
        return self.status


@dataclass(slots=True, frozen=True)
class Usage:
    """Tokens a run has used so far, and what they cost (``None``: price unknown)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@dataclass(slots=True, kw_only=True)
class LedgerEntry:
    """One tool call in the tool-effect ledger."""

    response_group: int
    position: int
    """The call's index among its response's tool calls."""
    step: int
    call_id: str
    tool: str
    arguments: str
    status: CallStatus
    started_at: str = ""
    finished_at: str = ""


@dataclass(slots=True, frozen=True, kw_only=True)
class BatchTaskLink:
    """Which run carries a task of a batch, and how many attempts it has had."""

    run_id: str
    attempts: int


def this_owner() -> str:
    """``host:pid`` of this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str) -> bool:
    """Whether the process named by ``owner`` may still be running.

    A process on another host cannot be checked, so it counts as alive.
    """
    if not owner:
        return False
    host, _, pid_text = owner.rpartition(":")
    if host != socket.gethostname():
        return True
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _not_a_zombie(pid)


def _not_a_zombie(pid: int) -> bool:
    """A killed child that nobody reaped yet still answers ``kill(pid, 0)``; it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[-1].split()
    except OSError:
        return True
    return not fields or fields[0] != "Z"
