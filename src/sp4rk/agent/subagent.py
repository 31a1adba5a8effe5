"""Sub-agents: run a task on its own executor, alone or many at once.

An executor runs one thing at a time, so every task brings a fresh ``Executor`` and context
window; the LLM caller, the tool registry, the result cache and the stores may be shared.

A task whose ``ctx`` carries a budget account (a tool's own context does, or
``RunContext(budget=BudgetAccount(...))``) draws from it: the sub-agent cannot spend more than
that account has left, and its spending shows in the account's totals. A sub-agent stopped by
its budget keeps its best answer so far as ``output``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sp4rk.agent._loop.replies import looks_like_printed_tool_call
from sp4rk.agent.events import Events
from sp4rk.agent.executor import Executor
from sp4rk.agent.protocols import ContextManager
from sp4rk.agent.types import ExitReason, Step
from sp4rk.tools.base import ToolDescriptor
from sp4rk.tools.context import RunContext


@dataclass(slots=True, init=False)
class SubAgentTask:
    """One task for a sub-agent: its executor, context window, tools and description.

    ``ctx`` is passed on to the sub-agent's run (workspace, stores, budget) without its
    ``trajectory_store``, which holds the parent's steps: the sub-agent would overwrite them.

    ``window`` was called ``cm`` in 0.1 (it is the run's ``ContextWindow``, not a Python
    context manager); ``cm=`` and ``task.cm`` keep working for one more release, with a
    ``DeprecationWarning``.
    """

    step_id: str
    executor: Executor
    window: ContextManager
    tools: Sequence[ToolDescriptor]
    description: str
    events: Events | None
    ctx: RunContext | None

    def __init__(
        self,
        step_id: str,
        executor: Executor,
        window: ContextManager | None = None,
        tools: Sequence[ToolDescriptor] = (),
        description: str = "",
        events: Events | None = None,
        ctx: RunContext | None = None,
        *,
        cm: ContextManager | None = None,
    ) -> None:
        if cm is not None:
            _warn_cm()
            if window is not None:
                raise TypeError("SubAgentTask got both window= and cm=: pass window= only")
            window = cm
        if window is None:
            raise TypeError("SubAgentTask needs window=, the sub-agent's ContextWindow")
        self.step_id = step_id
        self.executor = executor
        self.window = window
        self.tools = tools
        self.description = description
        self.events = events
        self.ctx = ctx

    @property
    def cm(self) -> ContextManager:
        """Deprecated name of :attr:`window`."""
        _warn_cm()
        return self.window


def _warn_cm() -> None:
    warnings.warn(
        "SubAgentTask.cm is deprecated: call it window (SubAgentTask(..., window=...)); "
        "cm will be removed in the release after next",
        DeprecationWarning,
        stacklevel=3,
    )


@dataclass(slots=True)
class SubAgentResult:
    """How a sub-agent's task ended. ``success`` means finished with a clean answer."""

    step_id: str
    output: str = ""
    steps: list[Step] = field(default_factory=list)
    error: BaseException | None = None
    success: bool = False
    output_data: Any = None
    """The validated answer when the sub-agent's executor has an ``output_type``."""


class SubAgentError(RuntimeError):
    """A sub-agent ended without a usable answer."""


async def run_sub_agent(task: SubAgentTask) -> SubAgentResult:
    """Run ``task`` and report, firing ``sub_agent_launch``/``sub_agent_complete`` on its events.

    Never raises for a failed task (the error is in the result); cancellation propagates.
    """
    events = task.events or Events()
    _safe(events.sub_agent_launch, task.step_id, task.description)
    # A trajectory store holds one run's steps: the parent's would be overwritten by these.
    ctx = (task.ctx or RunContext()).replace(
        step_id=task.step_id, task_description=task.description, trajectory_store=None
    )
    started = time.perf_counter()
    try:
        result = await task.executor.run(task.tools, task.window, ctx)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        _safe(events.sub_agent_complete, task.step_id, False, time.perf_counter() - started)
        return SubAgentResult(task.step_id, steps=list(task.executor.last_steps), error=exc)
    error: BaseException | None = None
    if result.exit_reason is ExitReason.BUDGET_EXHAUSTED:
        spent = result.state.budget.exhausted if result.state is not None else ""
        error = SubAgentError(f"sub-agent {task.step_id!r} used up its budget ({spent})")
    elif not result.finished:
        error = SubAgentError(
            result.output or f"sub-agent {task.step_id!r} did not complete within its step budget"
        )
    elif looks_like_printed_tool_call(result.output):
        error = SubAgentError(
            f"sub-agent {task.step_id!r} printed tool-call syntax as text instead of calling tools"
        )
    success = error is None
    _safe(events.sub_agent_complete, task.step_id, success, time.perf_counter() - started)
    return SubAgentResult(
        task.step_id, result.output, list(result.steps), error, success, result.output_data
    )


async def run_sub_agents_parallel(tasks: Sequence[SubAgentTask]) -> list[SubAgentResult]:
    """Run every task concurrently; results come back in input order.

    Raises:
        ValueError: when two tasks share an executor (an executor runs one thing at a time).
    """
    executors = [id(t.executor) for t in tasks]
    if len(set(executors)) != len(executors):
        raise ValueError("each SubAgentTask needs its own Executor; two tasks share one")
    return list(await asyncio.gather(*(run_sub_agent(t) for t in tasks)))


def _safe(fn: Callable[..., None], *args: object) -> None:
    try:
        fn(*args)
    except Exception:
        logging.getLogger("sp4rk.agent").exception("sub-agent event handler raised; ignoring")
