"""The approval audit log: who or what approved which call, with which arguments, and when.

Every decision on a call that needed a human (its policy, a judge, or taint) is appended,
bound to the exact arguments that ran (their SHA-256 too), so a reviewer can later tell what
was approved and why. ``JsonlAuditLog`` appends one JSON object per line to a file that is
only ever opened for appending.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from sp4rk._internal.serde import Serializable

Decision = Literal["approved", "modified", "rejected", "refused"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry(Serializable):
    """One approval decision."""

    time: str
    """When it was decided (ISO 8601, UTC)."""
    step: int
    """The run's step."""
    tool: str
    call_id: str
    arguments: str
    """The exact arguments that ran (or would have run), as JSON text."""
    arguments_sha256: str
    decision: Decision
    """``approved``/``modified`` (ran), ``rejected`` by the human, ``refused``: nobody
    approved a call that needed it."""
    decided_by: str
    """The HITL handler's class (``hitl:MyHandler``), or ``policy`` when no one decided."""
    reason: str
    """Why approval was needed: the policy, a judge's finding, or the taint."""
    plan_step_id: str = ""
    human_reason: str = ""
    """What the human gave as the reason for the decision (a rejection's reason), if any."""

    @classmethod
    def now(
        cls,
        *,
        step: int,
        tool: str,
        call_id: str,
        arguments: str,
        decision: Decision,
        decided_by: str,
        reason: str,
        plan_step_id: str = "",
        human_reason: str = "",
    ) -> AuditEntry:
        """An entry stamped with the current time and the arguments' hash."""
        digest = hashlib.sha256(arguments.encode("utf-8", "replace")).hexdigest()
        return cls(
            time=datetime.now(UTC).isoformat(timespec="milliseconds"),
            step=step,
            tool=tool,
            call_id=call_id,
            arguments=arguments,
            arguments_sha256=digest,
            decision=decision,
            decided_by=decided_by,
            reason=reason,
            plan_step_id=plan_step_id,
            human_reason=human_reason,
        )


@runtime_checkable
class AuditLog(Protocol):
    """Where approval decisions go (``Executor.set_audit_log``)."""

    def record(self, entry: AuditEntry) -> None:
        """Append ``entry``; never rewrite earlier ones."""
        ...


@dataclass
class MemoryAuditLog:
    """An audit log held in memory (tests, short scripts)."""

    entries: list[AuditEntry] = field(default_factory=list)

    def record(self, entry: AuditEntry) -> None:
        """Append ``entry``."""
        self.entries.append(entry)


class JsonlAuditLog:
    """An append-only JSON-lines audit file, readable by its owner only.

    Each entry is written with one ``write`` on a descriptor opened with ``O_APPEND`` and
    flushed to disk, so entries from several processes never interleave or vanish in a crash.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def record(self, entry: AuditEntry) -> None:
        """Append ``entry`` as one line."""
        line = (json.dumps(entry.to_dict(), ensure_ascii=False) + "\n").encode("utf-8", "replace")
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        with self._lock:
            fd = os.open(self.path, flags, 0o600)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    def entries(self) -> list[AuditEntry]:
        """Every entry in the file, oldest first."""
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [AuditEntry.from_dict(json.loads(line)) for line in lines if line.strip()]
