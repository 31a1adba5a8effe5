"""``run_batch``: every task of a task file to a result line, here or on Ray, resumably.

::

    from sp4rk.batch import run_batch

    report = run_batch("tasks.jsonl", "results.jsonl", model="openai:gpt-4.1", concurrency=32)
    summary = report.describe()  # the throughput report, as the command prints it

Running it again with the same results file and store skips the tasks that have a result
line, resumes the runs that paused or whose process died (from their last committed step),
and starts the rest. The batch is known in the store by the results file's absolute path.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from pathlib import Path

from sp4rk.batch.approvals import APPROVE_MODES, Approve
from sp4rk.batch.driver import BatchControl, BatchListener, Driver
from sp4rk.batch.errors import BatchError
from sp4rk.batch.local import copy_workspace, run_local
from sp4rk.batch.models import ModelCache, ModelFactory, default_model_factory
from sp4rk.batch.on_ray import run_on_ray
from sp4rk.batch.report import BatchReport, Tally
from sp4rk.batch.results import ResultsFile
from sp4rk.batch.runner import BatchSettings, TaskEnv
from sp4rk.batch.tasks import BatchTask, load_tasks
from sp4rk.store import POSTGRES_SCHEMES, default_store_path, open_store


def run_batch(
    tasks: str | os.PathLike[str] | Sequence[BatchTask],
    out: str | os.PathLike[str],
    *,
    store: str | os.PathLike[str] | None = None,
    model: str = "",
    model_factory: ModelFactory = default_model_factory,
    concurrency: int = 8,
    max_steps: int = 30,
    approve: Approve = "never",
    system_prompt: str = "",
    retries: int = 2,
    work_dir: str | os.PathLike[str] | None = None,
    ray: bool | str = False,
    ray_cpus: float = 1.0,
    listener: BatchListener | None = None,
    control: BatchControl | None = None,
) -> BatchReport:
    """Run every task that has no result line in ``out`` yet; the throughput report.

    Args:
        tasks: a task file (JSON lines, see :mod:`sp4rk.batch.tasks`) or checked tasks.
        out: the results file (JSON lines, appended).
        store: the runs store: a path, ``sqlite:///PATH`` or ``postgresql://...`` (default:
            the command line's, ``$SP4RK_STORE`` or ``~/.local/state/sp4rk/runs.db``).
        model: the model of tasks that name none.
        model_factory: builds a model from a spec (picklable for Ray).
        concurrency: runs (locally) or Ray tasks in flight at once.
        max_steps: the step limit of tasks that set none.
        approve: ``never`` denies calls that need a human, ``auto`` approves them.
        system_prompt: the system prompt of every run.
        retries: further attempts of a task whose run failed with an error or whose worker
            died; each resumes the run from the store.
        work_dir: holds each run's workspace and audit log (default: ``out`` without its
            suffix, plus ``.batch``).
        ray: ``False`` runs here; ``True`` on Ray (``$RAY_ADDRESS``, else a local instance);
            a string is the address of the cluster.
        ray_cpus: CPUs Ray reserves for each task.
        listener: hears progress.
        control: pauses or stops the batch (e.g. from a SIGINT handler).

    Raises:
        BatchError: bad input — the task file, the results file, an option, a model spec.
        StoreError: the store cannot be opened or written.
    """
    _check_options(concurrency, max_steps, retries, approve, ray_cpus, ray)
    task_list = load_tasks(tasks) if isinstance(tasks, str | os.PathLike) else list(tasks)
    _check_tasks(task_list, model)
    out_path = Path(out).expanduser().resolve()
    target = os.fspath(store) if store is not None else str(default_store_path())
    if not target.startswith((*POSTGRES_SCHEMES, "sqlite://")):
        target = str(Path(target).expanduser().resolve())
    settings = BatchSettings(
        batch=str(out_path),
        store=target,
        work_dir=Path(work_dir).expanduser().resolve()
        if work_dir is not None
        else out_path.parent / f"{out_path.stem}.batch",
        model=model,
        max_steps=max_steps,
        approve=approve,
        system_prompt=system_prompt,
        max_attempts=retries + 1,
    )
    listener = listener if listener is not None else BatchListener()
    control = control if control is not None else BatchControl()
    backend = "ray" if ray is not False else "local"
    with ResultsFile(out_path) as results, open_store(target) as opened:
        to_run = [t for t in task_list if t.id not in results.done]
        tally = Tally(backend, len(task_list), len(task_list) - len(to_run))
        driver = Driver(settings, opened, results, listener, tally)
        opened.open_batch(settings.batch)
        listener.batch_started(
            backend=backend, tasks=tally.tasks, skipped=tally.skipped, to_run=len(to_run)
        )
        wall, cpu = time.monotonic(), time.process_time()
        startup = 0.0
        if ray is False:
            asyncio.run(_here(to_run, settings, model_factory, driver, control, concurrency))
            cpu_seconds: float | None = time.process_time() - cpu
        else:
            _check_models(to_run, settings, ModelCache(model_factory), close=True)
            startup = run_on_ray(
                to_run,
                settings,
                model_factory,
                driver,
                control,
                concurrency=concurrency,
                address=ray if isinstance(ray, str) and ray else None,
                cpus_per_task=ray_cpus,
            )
            cpu_seconds = None  # the workers' CPU, summed from their attempts
        report = tally.report(time.monotonic() - wall, cpu_seconds, startup)
    listener.batch_ended(report)
    return report


async def _here(
    tasks: Sequence[BatchTask],
    settings: BatchSettings,
    factory: ModelFactory,
    driver: Driver,
    control: BatchControl,
    concurrency: int,
) -> None:
    models = ModelCache(factory)
    try:
        _check_models(tasks, settings, models, close=False)
        env = TaskEnv(settings, driver.store, models, copy_workspace, lambda: control.pausing)
        await run_local(tasks, env, driver, control, concurrency)
    finally:
        await models.aclose()


def _check_models(
    tasks: Sequence[BatchTask], settings: BatchSettings, models: ModelCache, *, close: bool
) -> None:
    """Build each model the tasks name, so a bad spec or a missing key stops the batch early."""
    first: dict[str, str] = {}
    for task in tasks:
        first.setdefault(task.model or settings.model, task.id)
    try:
        for spec, task_id in first.items():
            try:
                models.get(spec)
            except Exception as exc:
                raise BatchError(f"the model {spec!r} of task {task_id!r}: {exc}") from exc
    finally:
        if close:
            asyncio.run(models.aclose())


def _check_options(
    concurrency: int, max_steps: int, retries: int, approve: str, ray_cpus: float, ray: object
) -> None:
    for name, value, least in (
        ("concurrency", concurrency, 1),
        ("max_steps", max_steps, 1),
        ("retries", retries, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise BatchError(f"{name} must be a whole number of at least {least}, got {value!r}")
    if approve not in APPROVE_MODES:
        raise BatchError(f"approve must be one of {', '.join(APPROVE_MODES)}, got {approve!r}")
    if isinstance(ray_cpus, bool) or not isinstance(ray_cpus, int | float) or ray_cpus <= 0:
        raise BatchError(f"ray_cpus must be a positive number, got {ray_cpus!r}")
    if not isinstance(ray, bool | str):
        raise BatchError(f"ray must be False, True or a cluster address, got {ray!r}")


def _check_tasks(tasks: list[BatchTask], model: str) -> None:
    seen: set[str] = set()
    for task in tasks:
        if not isinstance(task, BatchTask):
            raise BatchError(f"tasks must be BatchTask objects or a task file, got {task!r}")
        if task.id in seen:
            raise BatchError(f"two tasks have the id {task.id!r}; ids must be unique")
        seen.add(task.id)
    if not tasks:
        raise BatchError("there is no task to run")
    modelless = [t.id for t in tasks if not t.model]
    if modelless and not model.strip():
        shown = ", ".join(repr(i) for i in modelless[:3])
        raise BatchError(
            f"tasks {shown}{' …' if len(modelless) > 3 else ''} name no model: give them a "
            '"model", or pass a default model (--model SPEC)'
        )
