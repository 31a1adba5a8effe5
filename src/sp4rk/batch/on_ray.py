"""Running a batch on Ray: each attempt at a task is a Ray task, on any node of the cluster.

The scheduler (this process) submits up to ``concurrency`` attempts at once and writes each
result line as soon as its attempt returns. A task carries its workspace as a packed archive
(put in Ray's object store once per source folder); the worker unpacks it into the batch's
workspaces folder on its node, unless the run's folder is there already (a resume on the same
node, or a shared filesystem). Workers open the runs store themselves, so it must be one they
all reach: the same SQLite file on one machine, or a PostgreSQL URL on a cluster.

A worker that dies (``kill -9``, a lost node, out of memory) fails its attempt with a Ray
error; the scheduler then submits the task again, up to its attempts, and the new attempt
takes the run over and resumes it from the store — never from the start, and never running a
completed call again. Ray's own task retries are off, so that every retry goes through here.

A pause is asked through the store (workers check it every half second, at step boundaries);
a stop cancels the attempts in flight (``ray.cancel(force=True)``): their runs keep every
committed step and resume next time.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sp4rk.batch.driver import BatchControl, Driver
from sp4rk.batch.errors import BatchError
from sp4rk.batch.models import ModelCache, ModelFactory
from sp4rk.batch.runner import BatchSettings, TaskEnv, TaskOutcome, failed_early, run_task
from sp4rk.batch.tasks import BatchTask
from sp4rk.batch.workspace import pack, unpack
from sp4rk.store import POSTGRES_SCHEMES, SQLRunStore, StoreError, open_store

_log = logging.getLogger("sp4rk.batch")

#: Seconds between a worker's looks at the store for a pause.
PAUSE_POLL = 0.5
#: Seconds the scheduler waits for an attempt before looking at pause and stop again.
WAIT_SLICE = 0.2


class RayMissingError(ImportError):
    """``--ray`` needs the ``ray`` extra."""


def import_ray() -> Any:
    """The ``ray`` module.

    Raises:
        RayMissingError: it is not installed (the message says how to install it).
    """
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise RayMissingError(
            f"--ray needs Ray: pip install 'sp4rk[ray]' ({exc}); or run without --ray"
        ) from exc


def run_on_ray(
    tasks: Sequence[BatchTask],
    settings: BatchSettings,
    factory: ModelFactory,
    driver: Driver,
    control: BatchControl,
    *,
    concurrency: int,
    address: str | None,
    cpus_per_task: float,
) -> float:
    """Run ``tasks`` as Ray tasks until each has a result, or the batch is paused or stopped.

    Connects to the cluster at ``address`` (``None``: ``$RAY_ADDRESS``, else a new local Ray
    instance) unless Ray is initialised already; a Ray instance started here is shut down at
    the end.

    Returns:
        The seconds it took to connect to Ray (or start it).
    """
    ray = import_ray()
    started = time.monotonic()
    started_here = not ray.is_initialized()
    if started_here:
        on_terminate = signal.getsignal(signal.SIGTERM)
        ray.init(address=address or None, include_dashboard=False)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, on_terminate)  # ray.init made SIGTERM exit at once
    startup = time.monotonic() - started
    try:
        _check_store_is_shared(ray, settings.store)
        _schedule(ray, tasks, settings, factory, driver, control, concurrency, cpus_per_task)
    finally:
        if started_here:
            ray.shutdown()
    return startup


def _check_store_is_shared(ray: Any, store: str) -> None:
    """Refuse an SQLite store on a cluster of several nodes: each node would open its own."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len(nodes) > 1 and not store.startswith(POSTGRES_SCHEMES):
        raise BatchError(
            f"this Ray cluster has {len(nodes)} nodes, and the runs store {store} is a file that "
            "each node would open on its own disk; pass --store postgresql://USER@HOST/DB, a "
            "store every node reaches"
        )


def _schedule(
    ray: Any,
    tasks: Sequence[BatchTask],
    settings: BatchSettings,
    factory: ModelFactory,
    driver: Driver,
    control: BatchControl,
    concurrency: int,
    cpus_per_task: float,
) -> None:
    remote = ray.remote(attempt).options(num_cpus=cpus_per_task, max_retries=0)
    packed: dict[Path, Any] = {}
    queue = deque(tasks)
    pending: dict[Any, BatchTask] = {}
    takeover: set[str] = set()
    asked_pause = False

    def ship(task: BatchTask) -> Any:
        if task.workspace is None:
            return None
        if task.workspace not in packed:
            packed[task.workspace] = ray.put(pack(task.workspace))
        return packed[task.workspace]

    while True:
        while queue and not control.pausing and len(pending) < concurrency:
            task = queue.popleft()
            driver.start(task.id)
            ref = remote.remote(task, settings, factory, ship(task), task.id in takeover)
            pending[ref] = task
        if control.pausing and not asked_pause:
            asked_pause = True
            try:
                driver.store.pause_batch(settings.batch)
            except StoreError as exc:
                _log.warning("could not ask the workers to pause: %s", exc)
        if control.stopping:
            for ref, task in pending.items():
                ray.cancel(ref, force=True)
                driver.left(task.id, "stopped")
            return
        if not pending:
            return
        refs = list(pending)
        ready, rest = ray.wait(refs, num_returns=1, timeout=WAIT_SLICE)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        for ref in ready:
            task = pending.pop(ref)
            if _settle(ray, ref, task, driver):
                takeover.add(task.id)
                queue.append(task)


def _settle(ray: Any, ref: Any, task: BatchTask, driver: Driver) -> bool:
    """Hand an attempt's outcome to the driver; whether the task goes back in the queue."""
    errors = ray.exceptions
    try:
        outcome: TaskOutcome = ray.get(ref)
    except errors.TaskCancelledError:
        driver.left(task.id, "stopped")
        return False
    except errors.RayTaskError as exc:  # run_task raised: a bug, reported and retried
        _log.error("an attempt at task %r raised: %s", task.id, exc)
        return driver.worker_died(task.id, f"the attempt raised {type(exc).__name__}", "bug")
    except errors.RayError as exc:  # the worker or its node died
        return driver.worker_died(task.id, type(exc).__name__)
    return driver.settle(outcome)


class _Worker:
    """What a Ray worker process keeps between attempts: its store, models and event loop."""

    current: _Worker | None = None

    def __init__(self, settings: BatchSettings, factory: ModelFactory) -> None:
        self.key = (settings.store, settings.batch)
        self.settings = settings
        self.models = ModelCache(factory)
        self.loop = asyncio.new_event_loop()
        self._store: SQLRunStore | None = None
        self._checked = 0.0
        self._pausing = False

    @classmethod
    def get(cls, settings: BatchSettings, factory: ModelFactory) -> _Worker:
        worker = cls.current
        if worker is None or worker.key != (settings.store, settings.batch):
            if worker is not None:
                worker.close()
            worker = cls.current = _Worker(settings, factory)
        worker.settings = settings
        worker.models.factory = factory
        return worker

    @property
    def store(self) -> SQLRunStore:
        store = self._store
        if store is None or getattr(store, "broken", False):
            store = self._store = open_store(self.settings.store)
        return store

    def pausing(self) -> bool:
        now = time.monotonic()
        if now - self._checked >= PAUSE_POLL:
            self._checked = now
            try:
                self._pausing = self.store.batch_pausing(self.settings.batch)
            except StoreError as exc:
                _log.warning("could not look for a pause in the store: %s", exc)
        return self._pausing

    def close(self) -> None:
        self.loop.run_until_complete(self.models.aclose())
        self.loop.close()
        if self._store is not None:
            self._store.close()


def attempt(
    task: BatchTask,
    settings: BatchSettings,
    factory: ModelFactory,
    workspace: bytes | None,
    takeover: bool,
) -> TaskOutcome:
    """One attempt at ``task`` in a Ray worker (the remote function)."""
    started = time.process_time()
    worker = _Worker.get(settings, factory)
    try:
        store = worker.store
    except StoreError as exc:
        return failed_early(task, exc)

    def prepare(task: BatchTask, folder: Path) -> None:
        unpack(workspace, folder)

    env = TaskEnv(settings, store, worker.models, prepare, worker.pausing)
    worker._checked = 0.0  # look for a pause before the first step
    outcome = worker.loop.run_until_complete(run_task(task, env, takeover=takeover))
    outcome.cpu_seconds = time.process_time() - started
    return outcome
