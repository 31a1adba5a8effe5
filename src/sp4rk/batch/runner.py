"""One attempt at one task of a batch: start its run, or resume it from the store, to its end.

The same code runs in ``sp4rk batch``'s own process and in a Ray worker. What it knows about
a task comes from the runs store, never from memory, so any process may take the next
attempt::

    no run yet            copy the workspace, create the run (one transaction), run it
    finished / stopped    nothing to run: the result is read back from the store
    failed, attempts left resume it (a model error may pass)
    paused / interrupted  claim it, close what a crash cut short, resume it

Resuming never runs a completed call again, and a call that was running when its process died
is answered "outcome unknown" (see :mod:`sp4rk.store.recovery`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sp4rk._internal.proc import allowlisted_environment
from sp4rk.agent import (
    Checkpoint,
    Executor,
    ExecutorResult,
    JsonlAuditLog,
    RunState,
    command_verify_runner,
)
from sp4rk.batch.approvals import Approve, BatchApprovals
from sp4rk.batch.models import BatchModel, CallLog, MeteredCaller, ModelCache, failure_kind
from sp4rk.batch.results import BatchResult
from sp4rk.batch.tasks import BatchTask
from sp4rk.batch.workspace import task_folder
from sp4rk.memory import ContextWindow
from sp4rk.store import (
    RunBusyError,
    RunRecord,
    SQLRunStore,
    StoreJournal,
    Usage,
    ended_by_accepted_finish,
)
from sp4rk.store.records import RunStatus
from sp4rk.store.recovery import responses_with_finish
from sp4rk.tools import Registry, RunContext
from sp4rk.tools.base import Tool
from sp4rk.tools.builtins import builtin_tools
from sp4rk.tools.builtins.finish import parse_finish_answer

_log = logging.getLogger("sp4rk.batch")

#: Added to the environment of shell commands and the verify command: no stale bytecode
#: when a file is edited twice within one second.
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}
#: Told to the model when its workspace had to be copied afresh on resume (another machine).
WORKSPACE_RESTORED = (
    "Note: this run continues on another machine, and its workspace was restored from the "
    "task's original files: changes made to files before the interruption are gone. Check "
    "the files before relying on earlier results."
)


@functools.cache
def shared_tools() -> tuple[Tool, ...]:
    """The built-in tools, built once per process for every run.

    They work in each run's ``RunContext.workspace``. Building them costs tens of
    milliseconds: more than a short run's whole executor time.
    """
    return tuple(builtin_tools(None, shell_env=NO_BYTECODE))


TaskStatus = Literal["ended", "failed", "paused"]
"""``ended``: the run finished or stopped at a limit (final). ``failed``: it raised (may be
retried). ``paused``: it stopped resumably (or another live process drives it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchSettings:
    """What every task of one batch shares; sent to Ray workers with each task."""

    batch: str
    """The batch's id in the store (by default the results file's absolute path)."""
    store: str
    """The runs store: a path or a database URL (each process opens its own connection)."""
    work_dir: Path
    """Holds ``workspaces/`` (one folder per task) and ``audit/`` (approval logs)."""
    model: str
    """The model of tasks that name none."""
    max_steps: int = 30
    approve: Approve = "never"
    system_prompt: str = ""
    max_attempts: int = 3
    """Attempts a task gets when its run fails with an error or its worker dies."""

    @property
    def workspaces(self) -> Path:
        """Where each task's run has its own workspace folder."""
        return self.work_dir / "workspaces"

    @property
    def audit(self) -> Path:
        """Where each run's approval audit log is written."""
        return self.work_dir / "audit"


@dataclass(slots=True, kw_only=True)
class TaskOutcome:
    """What one attempt at a task came to (picklable: Ray workers return it)."""

    task_id: str
    status: TaskStatus
    result: BatchResult | None = None
    """The task's result line (``ended``, and ``failed`` in case no attempt is left)."""
    failure: str = ""
    """What kind of failure (``failed``), or why a task was left (``paused``)."""
    attempts: int = 0
    """Attempts so far at the task, this one included."""
    resumed: bool = False
    """This attempt continued a run from the store."""
    steps: int = 0
    """Steps this attempt added."""
    calls: list[tuple[float, float]] = field(default_factory=list)
    """When each model call of this attempt ran (wall clock)."""
    cpu_seconds: float = 0.0
    """CPU time of the attempt (set where one process runs one attempt: Ray workers)."""


@dataclass(slots=True)
class TaskEnv:
    """What an attempt needs from the process it runs in."""

    settings: BatchSettings
    store: SQLRunStore
    models: ModelCache
    prepare: Callable[[BatchTask, Path], None]
    """Fills a folder with a fresh copy of the task's workspace."""
    pausing: Callable[[], bool]
    """Whether the batch was asked to pause (checked at every step boundary)."""


async def run_task(task: BatchTask, env: TaskEnv, *, takeover: bool = False) -> TaskOutcome:
    """One attempt at ``task``; ``takeover`` when its previous driver is known to be gone.

    Raises:
        asyncio.CancelledError: the batch was stopped; the run is saved as paused.
    """
    settings, store = env.settings, env.store
    spec = task.model or settings.model
    try:
        model = env.models.get(spec)
        link = store.batch_task(settings.batch, task.id)
        if link is None:
            folder = task_folder(settings.workspaces, task.id)
            env.prepare(task, folder)
            record = store.create_batch_run(
                settings.batch,
                task.id,
                task=task.task,
                workspace=str(folder),
                model=model.spec,
                settings=_stored_settings(task, settings),
            )
            return await _drive(task, env, record, None, model=model, attempts=1)
        record = store.get_run(link.run_id)
        if record.status in ("finished", "stopped") or (
            record.status == "failed" and link.attempts >= settings.max_attempts
        ):
            return _ended(task, store, record, link.attempts)
        record = store.claim_run(record.id, takeover=takeover)
        attempts = store.count_attempt(settings.batch, task.id)
        folder = Path(record.workspace)
        if not folder.is_dir():
            env.prepare(task, folder)
            store.queue_message(record.id, WORKSPACE_RESTORED)
        checkpoint = store.recover(record.id, prices=model.prices)
        if ended_by_accepted_finish(checkpoint):
            _finish_recovered(store, record, checkpoint)
            return _ended(task, store, store.get_run(record.id), attempts)
        return await _drive(task, env, record, checkpoint, model=model, attempts=attempts)
    except RunBusyError as exc:
        return TaskOutcome(task_id=task.id, status="paused", failure=f"busy: {exc}")
    except Exception as exc:  # the store, the workspace, a model that cannot be built here
        return failed_early(task, exc)


async def _drive(
    task: BatchTask,
    env: TaskEnv,
    record: RunRecord,
    checkpoint: Checkpoint | None,
    *,
    model: BatchModel,
    attempts: int,
) -> TaskOutcome:
    settings, store = env.settings, env.store
    folder = Path(record.workspace)
    state = checkpoint.state if checkpoint is not None else None
    calls = CallLog()
    registry = Registry(shared_tools())
    window = ContextWindow(
        model.context_tokens,
        min(4096, model.context_tokens // 8),
        system_prompt=settings.system_prompt,
        task=record.task,
    )
    if checkpoint is not None:
        window.seed_steps(checkpoint)
    executor = Executor(
        MeteredCaller(model.caller, calls),
        registry,
        task.max_steps or settings.max_steps,
        hitl=BatchApprovals(settings.approve),
        resume_steps=checkpoint,
        resume_state=state,
        pause_checker=lambda ctx: env.pausing(),
        budget=task.make_budget(model.prices),
    )
    executor.set_journal(StoreJournal(store, record.id, state=state))
    executor.set_audit_log(JsonlAuditLog(settings.audit / f"{record.id}.jsonl"))
    if task.verify:
        executor.set_verify_on_edit(
            command_verify_runner(
                ["/bin/sh", "-c", task.verify],
                cwd=folder,
                env=allowlisted_environment(NO_BYTECODE),
            )
        )
    before = len(checkpoint) if checkpoint is not None else 0
    outcome = TaskOutcome(
        task_id=task.id,
        status="ended",
        attempts=attempts,
        resumed=checkpoint is not None,
        calls=calls.intervals,
    )
    try:
        result = await executor.run(registry.list(), window, RunContext(workspace=folder))
    except asyncio.CancelledError:
        _end(store, record, "paused", "cancelled", "", executor.last_state)
        raise
    except Exception as exc:
        _log.debug("run %s of task %r failed", record.id, task.id, exc_info=True)
        message = f"{exc}" if str(exc) else type(exc).__name__
        _end(store, record, "failed", "error", "", executor.last_state, error=message)
        outcome.status = "failed"
        outcome.failure = failure_kind(exc)
        outcome.steps = len(executor.last_steps) - before
        outcome.result = read_result(task.id, store, record.id)
        return outcome
    outcome.steps = len(result.steps) - before
    status = _status(result)
    _end(
        store,
        record,
        status,
        result.exit_reason.value,
        result.output,
        result.state,
        responses=result.model_responses,
    )
    if status == "paused":
        outcome.status = "paused"
        outcome.failure = "paused"
        return outcome
    outcome.result = read_result(task.id, store, record.id)
    return outcome


def _status(result: ExecutorResult) -> RunStatus:
    if result.finished:
        return "finished"
    if result.paused:
        return "paused"
    return "stopped"


def _end(
    store: SQLRunStore,
    record: RunRecord,
    status: RunStatus,
    exit_reason: str,
    output: str,
    state: RunState | None,
    *,
    error: str = "",
    responses: int | None = None,
) -> None:
    """Record how the run ended, with what it spent (the state's totals, resumes included)."""
    usage = None
    if state is not None:
        spent = state.budget
        usage = Usage(spent.input_tokens, spent.output_tokens, spent.cost)
    store.end_run(
        record.id,
        status=status,
        exit_reason=exit_reason,
        output=output,
        error=error,
        usage=usage,
        responses=responses,
    )


def read_result(task_id: str, store: SQLRunStore, run_id: str) -> BatchResult:
    """The result line of an ended run, read from the store (a line written again is equal)."""
    record = store.get_run(run_id)
    return BatchResult(
        id=task_id,
        run_id=record.id,
        exit_reason=record.exit_reason or "error",
        finished=record.status == "finished",
        output=record.output,
        steps=record.step_count,
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        cost_usd=record.cost_usd,
        seconds=store.run_seconds(run_id),
        error=record.error,
    )


def _ended(task: BatchTask, store: SQLRunStore, record: RunRecord, attempts: int) -> TaskOutcome:
    """A task whose run is over already (its line was lost, or it is being read again)."""
    failed = record.status == "failed"
    return TaskOutcome(
        task_id=task.id,
        status="failed" if failed else "ended",
        result=read_result(task.id, store, record.id),
        failure="error" if failed else "",
        attempts=attempts,
    )


def _finish_recovered(store: SQLRunStore, record: RunRecord, checkpoint: Checkpoint) -> None:
    """A run whose process died between its accepted finish and marking it finished."""
    last = checkpoint[-1]
    output = last.thought
    if last.action is not None:
        try:
            output = parse_finish_answer(last.action.input)
        except ValueError:
            output = ""
    responses = responses_with_finish(checkpoint.state)
    _end(store, record, "finished", "finished", output, checkpoint.state, responses=responses)


def failed_early(task: BatchTask, exc: BaseException) -> TaskOutcome:
    """An attempt that failed before its run could drive (the scheduler counts its tries)."""
    message = f"{exc}" if str(exc) else type(exc).__name__
    _log.debug("task %r failed before its run started", task.id, exc_info=True)
    return TaskOutcome(
        task_id=task.id,
        status="failed",
        failure=failure_kind(exc),
        attempts=1,
        result=BatchResult(
            id=task.id,
            run_id="",
            exit_reason="error",
            finished=False,
            output="",
            steps=0,
            input_tokens=0,
            output_tokens=0,
            cost_usd=0.0,
            seconds=0.0,
            error=message,
        ),
    )


def _stored_settings(task: BatchTask, settings: BatchSettings) -> dict[str, object]:
    """What the run record keeps of its configuration (for ``sp4rk show``).

    Commands are kept for display only: a resume takes them from the task file again.
    """
    return {
        "max_steps": task.max_steps or settings.max_steps,
        "approve": settings.approve,
        "verify": task.verify,
        "system_prompt": settings.system_prompt,
        "budget": dict(task.budget),
        "batch": settings.batch,
        "task_id": task.id,
    }
