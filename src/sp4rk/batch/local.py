"""Running a batch in this process: up to ``concurrency`` runs at once on one event loop.

The executor spends about a millisecond of CPU per step, so one process keeps hundreds of runs
waiting on their models. Every run writes to the one runs store of this process (each commit
is durable before the run goes on); model objects are shared by the runs that use the same
spec. A failed attempt goes to the back of the queue for its next attempt.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from sp4rk.batch.driver import BatchControl, Driver
from sp4rk.batch.runner import TaskEnv, run_task
from sp4rk.batch.tasks import BatchTask
from sp4rk.batch.workspace import copy_fresh


def copy_workspace(task: BatchTask, folder: Path) -> None:
    """``TaskEnv.prepare`` of this machine: copy the task's folder."""
    copy_fresh(task.workspace, folder)


async def run_local(
    tasks: Sequence[BatchTask],
    env: TaskEnv,
    driver: Driver,
    control: BatchControl,
    concurrency: int,
) -> None:
    """Run ``tasks`` here until each has a result, or the batch is paused or stopped."""
    queue = deque(tasks)
    loop = asyncio.get_running_loop()
    workers: list[asyncio.Task[None]] = []

    async def work() -> None:
        while queue and not control.pausing:
            task = queue.popleft()
            driver.start(task.id)
            outcome = await run_task(task, env)
            if driver.settle(outcome):
                queue.append(task)

    def cancel_all() -> None:
        for worker in workers:
            worker.cancel()

    def on_stop() -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(cancel_all)

    control.on_stop(on_stop)
    workers.extend(asyncio.create_task(work()) for _ in range(min(concurrency, len(queue))))
    if control.stopping:
        cancel_all()
    for ended in await asyncio.gather(*workers, return_exceptions=True):
        if isinstance(ended, BaseException) and not isinstance(ended, asyncio.CancelledError):
            raise ended
    for task_id in sorted(driver.running):  # cut by a stop: saved as paused, resumable
        driver.left(task_id, "stopped")
