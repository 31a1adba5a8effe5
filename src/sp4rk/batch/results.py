"""The results of a batch: one JSON line per task that ended, appended, never duplicated.

::

    {"id": "fix-42", "run_id": "1a2b3c4d", "exit_reason": "finished", "finished": true,
     "output": "...", "steps": 12, "input_tokens": 48210, "output_tokens": 2113,
     "cost_usd": 0.176, "seconds": 41.2}

``error`` is added for a run that failed. A task that paused has no line until it ends.

The file is written by one process at a time (an exclusive lock, so a second ``sp4rk batch``
on the same file is refused), each line with one ``write`` and an ``fsync``. A line cut short
by a crash is dropped when the file is opened again: the task's run is in the store, and its
line is written again from there.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sp4rk._internal import safejson
from sp4rk.batch.errors import BatchError

_log = logging.getLogger("sp4rk.batch")


class ResultsFileError(BatchError):
    """The results file cannot be used; the message says why and what to do."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchResult:
    """How one task ended: a line of the results file."""

    id: str
    run_id: str
    exit_reason: str
    """``finished``, an ``ExitReason`` value (``step_limit``, ``budget_exhausted``, …),
    or ``error``."""
    finished: bool
    output: str
    steps: int
    """Trajectory entries of the run."""
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    """``None`` when a model's price is unknown."""
    seconds: float
    """Wall-clock seconds the run ran, summed over its attempts."""
    error: str = ""

    def to_line(self) -> dict[str, Any]:
        """The result as a JSON object (``error`` only when there is one)."""
        line: dict[str, Any] = {
            "id": self.id,
            "run_id": self.run_id,
            "exit_reason": self.exit_reason,
            "finished": self.finished,
            "output": self.output,
            "steps": self.steps,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "seconds": round(self.seconds, 3),
        }
        if self.error:
            line["error"] = self.error
        return line

    @classmethod
    def from_line(cls, data: dict[str, Any]) -> BatchResult:
        """Read a result line back.

        Raises:
            ValueError: a key is missing or has the wrong type.
        """
        try:
            cost = data["cost_usd"]
            result = cls(
                id=str(data["id"]),
                run_id=str(data["run_id"]),
                exit_reason=str(data["exit_reason"]),
                finished=bool(data["finished"]),
                output=str(data["output"]),
                steps=int(data["steps"]),
                input_tokens=int(data["input_tokens"]),
                output_tokens=int(data["output_tokens"]),
                cost_usd=None if cost is None else float(cost),
                seconds=float(data["seconds"]),
                error=str(data.get("error", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a result line ({type(exc).__name__}: {exc})") from exc
        return result

    @property
    def failed(self) -> bool:
        """The run ended with an error (not a limit, not a finish)."""
        return self.exit_reason == "error"


class ResultsFile:
    """The results file, open for appending, locked against a second writer.

    Raises:
        ResultsFileError: the file cannot be opened, another process holds it, or a complete
            line in it is not a result line.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise ResultsFileError(
                f"cannot open the results file {self.path}: {exc.strerror or exc}; pass "
                "--out with a writable path"
            ) from exc
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._fd)
            raise ResultsFileError(
                f"another process is writing {self.path} (an sp4rk batch still running?); "
                "wait for it to end, or pass another --out"
            ) from exc
        try:
            self.done = self._read()
        except BaseException:
            self.close()
            raise

    def _read(self) -> dict[str, BatchResult]:
        """The results already in the file, by task id (a cut last line is dropped)."""
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size, 0) if size else b""
        end = data.rfind(b"\n") + 1
        if end < len(data):
            _log.warning("dropping a result line cut short by a crash in %s", self.path)
            os.ftruncate(self._fd, end)
            os.fsync(self._fd)
            data = data[:end]
        done: dict[str, BatchResult] = {}
        for number, line in enumerate(data.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                parsed = safejson.loads(line.decode("utf-8"))
                if not isinstance(parsed, dict):
                    raise ValueError("not a JSON object")
                result = BatchResult.from_line(parsed)
            except (ValueError, UnicodeDecodeError) as exc:
                raise ResultsFileError(
                    f"{self.path} line {number} is not a result line ({exc}); fix or remove "
                    "that line, or pass another --out"
                ) from exc
            done.setdefault(result.id, result)
        return done

    def append(self, result: BatchResult) -> None:
        """Write ``result``'s line durably (once per task: a second one is ignored)."""
        if result.id in self.done:
            _log.warning("task %r has a result already; not writing it twice", result.id)
            return
        data = (json.dumps(result.to_line(), ensure_ascii=False) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self._fd, data) :]
        os.fsync(self._fd)
        self.done[result.id] = result

    def close(self) -> None:
        """Release the lock and close the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
