"""The tasks of a batch: one JSON object per line, every line checked before anything runs.

::

    {"id": "fix-42", "task": "Make tests/test_api.py pass", "workspace": "repos/api",
     "model": "openai:gpt-4.1", "max_steps": 40, "budget": {"max_cost_usd": 0.5},
     "verify": "python -m pytest -x -q"}

Only ``id`` and ``task`` are required. ``workspace`` is a folder (relative to the task file's
folder) that each run gets its own copy of; ``budget`` takes the limits of
:class:`sp4rk.agent.Budget` (``max_tokens`` means input plus output tokens). The file is
trusted configuration, like ``sp4rk.toml``: ``verify`` is a command that runs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sp4rk._internal import safejson
from sp4rk.agent import Budget
from sp4rk.agent.budget import LIMITS
from sp4rk.batch.errors import BatchError
from sp4rk.llm.pricing import PriceTable

#: Longest task line read, in bytes.
MAX_LINE_BYTES = 1 << 20
#: Longest task id.
MAX_ID_CHARS = 200
#: Problems listed in one error before the rest are counted.
MAX_PROBLEMS = 10
#: The keys of a task line.
TASK_KEYS = ("id", "task", "workspace", "model", "max_steps", "budget", "verify")
#: The keys of a task's budget (the limits of ``Budget``, and ``max_tokens``).
BUDGET_KEYS = (*LIMITS, "max_tokens")


class TaskFileError(BatchError):
    """The task file cannot be used; the message lists each bad line and what to fix."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchTask:
    """One task of a batch, checked.

    ``workspace`` is an absolute folder (copied for the run) or ``None`` for an empty one;
    ``model``, ``max_steps`` are ``None`` where the batch's defaults apply.
    """

    id: str
    task: str
    workspace: Path | None = None
    model: str | None = None
    max_steps: int | None = None
    budget: Mapping[str, float] = field(default_factory=dict)
    """Budget limits by name (see :data:`BUDGET_KEYS`)."""
    verify: str = ""
    """A shell command run in the workspace after each edit; the model sees its result."""

    def __post_init__(self) -> None:
        problem = _id_problem(self.id) or _task_problem(self.task)
        if problem:
            raise ValueError(problem)
        if self.workspace is not None and not Path(self.workspace).is_absolute():
            raise ValueError(f"task {self.id!r}: workspace must be an absolute path")
        if self.max_steps is not None and _steps_problem(self.max_steps):
            raise ValueError(f"task {self.id!r}: {_steps_problem(self.max_steps)}")
        problem = _budget_problem(self.budget)
        if problem:
            raise ValueError(f"task {self.id!r}: {problem}")

    def make_budget(self, prices: PriceTable | None = None) -> Budget:
        """The run's :class:`~sp4rk.agent.Budget` (no limits when the line set none)."""
        return _budget(self.budget, prices)

    def to_line(self) -> dict[str, Any]:
        """The task as a task-file line (what :func:`parse_task` reads back)."""
        line: dict[str, Any] = {"id": self.id, "task": self.task}
        if self.workspace is not None:
            line["workspace"] = str(self.workspace)
        if self.model is not None:
            line["model"] = self.model
        if self.max_steps is not None:
            line["max_steps"] = self.max_steps
        if self.budget:
            line["budget"] = dict(self.budget)
        if self.verify:
            line["verify"] = self.verify
        return line


def load_tasks(path: str | os.PathLike[str]) -> list[BatchTask]:
    """Read and check the task file ``path`` (JSON lines; blank lines are skipped).

    Relative workspaces are resolved against the file's folder.

    Raises:
        TaskFileError: the file cannot be read, holds no task, or has bad lines (each named
            with its line number and the fix), or two tasks share an id.
    """
    file = Path(path).expanduser()
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise TaskFileError(f"cannot read the task file {file}: {exc.strerror or exc}") from exc
    return parse_tasks(raw.splitlines(), base=file.resolve().parent, source=str(file))


def parse_tasks(
    lines: Iterable[bytes | str], *, base: Path, source: str = "the task file"
) -> list[BatchTask]:
    """Check task lines (``bytes`` or ``str``); workspaces resolve against ``base``.

    Raises:
        TaskFileError: as :func:`load_tasks`.
    """
    tasks: list[BatchTask] = []
    problems: list[str] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
        if not text.strip():
            continue
        if len(text.encode("utf-8", errors="replace")) > MAX_LINE_BYTES:
            problems.append(f"line {number}: longer than {MAX_LINE_BYTES} bytes")
            continue
        try:
            task = parse_task(text, base=base)
        except ValueError as exc:
            problems.append(f"line {number}: {exc}")
            continue
        if task.id in first_line:
            problems.append(
                f"line {number}: id {task.id!r} is used by line {first_line[task.id]} too; "
                "ids must be unique"
            )
            continue
        first_line[task.id] = number
        tasks.append(task)
    if problems:
        shown = problems[:MAX_PROBLEMS]
        more = len(problems) - len(shown)
        listing = "\n  ".join(shown + ([f"... and {more} more"] if more else []))
        raise TaskFileError(f"{source} has bad lines; fix them and run again:\n  {listing}")
    if not tasks:
        raise TaskFileError(
            f'{source} holds no task; write one JSON object per line: {{"id": "t1", "task": '
            '"what the agent should do"}'
        )
    return tasks


def parse_task(text: str, *, base: Path) -> BatchTask:
    """One task line, checked.

    Raises:
        ValueError: what is wrong with it, and what to write instead.
    """
    try:
        data = safejson.loads(text)
    except ValueError as exc:
        raise ValueError(f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError('a task is a JSON object: {"id": "...", "task": "..."}')
    unknown = sorted(set(data) - set(TASK_KEYS))
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}; the keys are {', '.join(TASK_KEYS)}")
    problem = _id_problem(data.get("id")) or _task_problem(data.get("task"))
    if problem:
        raise ValueError(problem)
    workspace = data.get("workspace")
    folder: Path | None = None
    if workspace is not None:
        if not isinstance(workspace, str) or not workspace.strip():
            raise ValueError("workspace must be a folder's path (a string)")
        folder = (base / Path(workspace).expanduser()).resolve()
        if not folder.is_dir():
            raise ValueError(f"the workspace {folder} does not exist or is not a folder")
    model = data.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ValueError("model must be a model spec such as openai:gpt-4.1 (a string)")
    max_steps = data.get("max_steps")
    if max_steps is not None and _steps_problem(max_steps):
        raise ValueError(_steps_problem(max_steps))
    budget = data.get("budget", {})
    if not isinstance(budget, dict):
        raise ValueError('budget must be an object such as {"max_cost_usd": 0.5}')
    problem = _budget_problem(budget)
    if problem:
        raise ValueError(problem)
    verify = data.get("verify", "")
    if not isinstance(verify, str):
        raise ValueError("verify must be a shell command (a string)")
    return BatchTask(
        id=data["id"],
        task=data["task"],
        workspace=folder,
        model=model.strip() if isinstance(model, str) else None,
        max_steps=max_steps,
        budget=budget,
        verify=verify,
    )


def _id_problem(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        return 'every task needs an "id": a non-empty string, unique in the file'
    if len(value) > MAX_ID_CHARS:
        return f"the id is longer than {MAX_ID_CHARS} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "the id holds control characters"
    return ""


def _task_problem(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        return 'every task needs a "task": what the agent should do (a non-empty string)'
    return ""


def _steps_problem(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return "max_steps must be a whole number of at least 1"
    return ""


def _budget_problem(budget: Mapping[str, Any]) -> str:
    unknown = sorted(set(budget) - set(BUDGET_KEYS))
    if unknown:
        return f"unknown budget limit {unknown[0]!r}; the limits are {', '.join(BUDGET_KEYS)}"
    if "max_tokens" in budget and "max_total_tokens" in budget:
        return "budget: give max_tokens or max_total_tokens, not both (they are one limit)"
    for name, value in budget.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"budget.{name} must be a number"
        if not math.isfinite(value) or value <= 0:
            return f"budget.{name} must be a positive number"
    try:
        _budget(budget, None)
    except (TypeError, ValueError) as exc:
        return f"budget: {exc}"
    return ""


def _budget(budget: Mapping[str, Any], prices: PriceTable | None) -> Budget:
    limits = {("max_total_tokens" if k == "max_tokens" else k): v for k, v in budget.items()}
    return Budget(**limits, prices=prices)
