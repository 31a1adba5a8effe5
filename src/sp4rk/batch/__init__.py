"""Batch runs: thousands of agent tasks from a JSON-lines file, here or on a Ray cluster.

::

    from sp4rk.batch import run_batch

    report = run_batch("tasks.jsonl", "results.jsonl", model="openai:gpt-4.1", concurrency=64)
    summary = report.describe()  # tasks/s, model-call concurrency, CPU per step, failures

Each task gets its own run in the runs store and its own copy of its workspace; each ended
task one line in the results file. Every step is committed as it happens, so a batch that was
paused, killed or cut by a lost worker resumes where it stopped when run again — finished
tasks are skipped, interrupted runs resume from their last step, and no result is written
twice. ``ray=True`` (the ``ray`` extra) runs the same tasks as Ray tasks; the store must then
be one every worker reaches (one machine's SQLite file, or PostgreSQL: the ``postgres``
extra). The ``sp4rk batch`` command is this function with a progress bar (docs/batch.md).
"""

from sp4rk.batch.approvals import APPROVE_MODES, Approve, BatchApprovals
from sp4rk.batch.driver import BatchControl, BatchListener
from sp4rk.batch.errors import BatchError
from sp4rk.batch.models import BatchModel, ModelFactory, default_model_factory
from sp4rk.batch.report import BatchReport
from sp4rk.batch.results import BatchResult, ResultsFile, ResultsFileError
from sp4rk.batch.run import run_batch
from sp4rk.batch.tasks import BatchTask, TaskFileError, load_tasks, parse_tasks

__all__ = [
    "APPROVE_MODES",
    "Approve",
    "BatchApprovals",
    "BatchControl",
    "BatchError",
    "BatchListener",
    "BatchModel",
    "BatchReport",
    "BatchResult",
    "BatchTask",
    "ModelFactory",
    "ResultsFile",
    "ResultsFileError",
    "TaskFileError",
    "default_model_factory",
    "load_tasks",
    "parse_tasks",
    "run_batch",
]
