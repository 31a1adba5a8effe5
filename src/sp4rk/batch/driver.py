"""What both schedulers share: pausing and stopping, progress events, and settling outcomes.

:class:`BatchControl` is how a host pauses a batch (Ctrl-C once: every run pauses at its next
step boundary, no new one starts) or stops it (twice: runs are cut now, every completed step
kept). :class:`BatchListener` hears what happens, for a progress display. :class:`Driver`
turns each attempt's outcome into a result line, a retry, or a task left for next time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sp4rk.batch.report import BatchReport, Tally
from sp4rk.batch.results import BatchResult, ResultsFile
from sp4rk.batch.runner import BatchSettings, TaskOutcome, read_result
from sp4rk.store import SQLRunStore, StoreError

_log = logging.getLogger("sp4rk.batch")


class BatchControl:
    """Pause or stop a running batch, from any thread or a signal handler."""

    def __init__(self) -> None:
        self._pausing = threading.Event()
        self._stopping = threading.Event()
        self._on_stop: list[Callable[[], None]] = []
        self._on_pause: list[Callable[[], None]] = []

    @property
    def pausing(self) -> bool:
        """A pause was asked for: runs pause at their next boundary, none starts."""
        return self._pausing.is_set()

    @property
    def stopping(self) -> bool:
        """A stop was asked for: runs are cut now (their completed steps are kept)."""
        return self._stopping.is_set()

    def pause(self) -> None:
        """Pause every run at its next step boundary; start no new one."""
        if not self._pausing.is_set():
            self._pausing.set()
            for callback in list(self._on_pause):
                callback()

    def stop(self) -> None:
        """Stop every run now (a pause first, if none was asked for)."""
        self.pause()
        if not self._stopping.is_set():
            self._stopping.set()
            for callback in list(self._on_stop):
                callback()

    def on_pause(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when a pause is asked for (schedulers use it)."""
        self._on_pause.append(callback)

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when a stop is asked for (schedulers use it)."""
        self._on_stop.append(callback)


class BatchListener:
    """Hears a batch's progress; override what you need (every method does nothing here).

    Methods are called in the scheduling process, from one thread, and must return quickly.
    """

    def batch_started(self, *, backend: str, tasks: int, skipped: int, to_run: int) -> None:
        """The batch starts: ``skipped`` tasks had results already, ``to_run`` will run."""

    def task_started(self, task_id: str) -> None:
        """An attempt at the task starts (on Ray: is submitted)."""

    def task_ended(self, result: BatchResult) -> None:
        """The task's result line was written."""

    def task_paused(self, task_id: str, why: str) -> None:
        """The task stopped resumably (paused, stopped, or busy in another process)."""

    def task_retried(self, task_id: str, attempt: int, why: str) -> None:
        """The task failed (``why``) and gets attempt number ``attempt``."""

    def batch_ended(self, report: BatchReport) -> None:
        """The batch is over (done, or paused)."""


class Driver:
    """Settles outcomes: writes result lines, decides retries, keeps the tally."""

    def __init__(
        self,
        settings: BatchSettings,
        store: SQLRunStore,
        results: ResultsFile,
        listener: BatchListener,
        tally: Tally,
    ) -> None:
        self.settings = settings
        self.store = store
        self.results = results
        self.listener = listener
        self.tally = tally
        self.tries: dict[str, int] = {}
        """Attempts started at each task by this invocation."""
        self.running: set[str] = set()

    def start(self, task_id: str) -> None:
        """An attempt at ``task_id`` starts."""
        self.tries[task_id] = self.tries.get(task_id, 0) + 1
        self.running.add(task_id)
        self.listener.task_started(task_id)

    def settle(self, outcome: TaskOutcome) -> bool:
        """Record an attempt's outcome; whether the task should be tried again."""
        task_id = outcome.task_id
        self.running.discard(task_id)
        self.tally.attempt(outcome)
        if outcome.status == "paused":
            self.listener.task_paused(task_id, outcome.failure or "paused")
            return False
        if outcome.status == "failed" and self._attempts_left(task_id, outcome.attempts):
            self._retry(task_id, outcome.failure or "error")
            return True
        if outcome.result is not None:
            self._write(outcome.result)
        return False

    def worker_died(self, task_id: str, why: str, kind: str = "worker died") -> bool:
        """An attempt's process died (Ray); whether the task should be tried again.

        Without attempts left, the task's run is ended as failed and its line written.
        """
        self.running.discard(task_id)
        self.tally.failure(kind)
        if self._attempts_left(task_id, 0):
            self._retry(task_id, kind)
            return True
        tries = self.tries.get(task_id, 0)
        message = f"its attempts ended without a result {tries} times (last: {why})"
        self._write(self._give_up(task_id, message))
        return False

    def left(self, task_id: str, why: str) -> None:
        """An attempt ended without an outcome (the batch was stopped); it resumes next time."""
        self.running.discard(task_id)
        self.listener.task_paused(task_id, why)

    def _attempts_left(self, task_id: str, attempts: int) -> bool:
        limit = self.settings.max_attempts
        return attempts < limit and self.tries.get(task_id, 0) < limit

    def _retry(self, task_id: str, why: str) -> None:
        self.tally.retries += 1
        self.listener.task_retried(task_id, self.tries.get(task_id, 0) + 1, why)

    def _write(self, result: BatchResult) -> None:
        self.results.append(result)
        self.tally.result(result)
        self.listener.task_ended(result)

    def _give_up(self, task_id: str, message: str) -> BatchResult:
        """End the task's run as failed (its last driver is gone) and read its result."""
        link = None
        try:
            link = self.store.batch_task(self.settings.batch, task_id)
            if link is not None:
                self.store.claim_run(link.run_id, takeover=True)
                self.store.end_run(link.run_id, status="failed", exit_reason="error", error=message)
                return read_result(task_id, self.store, link.run_id)
        except StoreError as exc:
            _log.warning("could not record the end of task %r in the store: %s", task_id, exc)
        return BatchResult(
            id=task_id,
            run_id=link.run_id if link is not None else "",
            exit_reason="error",
            finished=False,
            output="",
            steps=0,
            input_tokens=0,
            output_tokens=0,
            cost_usd=None,
            seconds=0.0,
            error=message,
        )
