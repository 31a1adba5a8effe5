"""One run of the loop: its configuration, state, collaborators and trajectory, wired once.

Each part owns what it changes: ``state`` (counters, breakers, gates) changes only through
its own methods, ``trajectory`` appends steps, ``tools`` answers for the tools. The phases in
this package read the parts and call those methods; none keeps state of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sp4rk._core.archive import StepArchive
from sp4rk._core.context import IncrementalTrajectoryStore, InterjectionHolder
from sp4rk._internal.conformance import conforms
from sp4rk.agent._legacy import state_from_steps
from sp4rk.agent._loop.archive import ObservationArchiver
from sp4rk.agent._loop.emit import EventProxy
from sp4rk.agent._loop.recorder import Recorder
from sp4rk.agent._loop.settings import ExecutorSettings
from sp4rk.agent._loop.toolbox import ToolBox
from sp4rk.agent.account import BudgetAccount
from sp4rk.agent.debug import DumpCaller
from sp4rk.agent.events import RunStart
from sp4rk.agent.gates import CHECKLIST_TOOL
from sp4rk.agent.hitl import HITLHandler
from sp4rk.agent.protocols import (
    ContextManager,
    InterjectionConsumer,
    LLMCaller,
    ToolExecutor,
    supports_streaming,
)
from sp4rk.agent.state import RunState
from sp4rk.agent.types import ExecutorResult, ExitReason
from sp4rk.llm.cassette import redactor_for
from sp4rk.tools.base import ToolDescriptor
from sp4rk.tools.context import RunContext


class RunScope:
    """Everything one call to ``Executor.run`` works with."""

    def __init__(
        self,
        settings: ExecutorSettings,
        state: RunState | None,
        llm: LLMCaller,
        tools: ToolExecutor,
        task_tools: Sequence[ToolDescriptor],
        cw: ContextManager,
        ctx: RunContext,
        *,
        first_group: int,
    ) -> None:
        """Wire a run.

        ``state`` is the state to resume; ``None`` starts afresh, or rebuilds the state of a
        schema-1 checkpoint from its steps.
        """
        self.settings = settings
        # A dump writer on the context records this run's requests and responses.
        self.llm: LLMCaller = llm if ctx.dump_writer is None else DumpCaller(llm, ctx.dump_writer)
        self.cw = cw
        self.log = logging.LoggerAdapter(
            settings.logger,
            {
                "plan_step_id": settings.plan_step_id,
                "plan_index": settings.plan_index,
                "plan_total": settings.plan_total,
            },
        )
        self.events = EventProxy(settings.events, self.log)
        self.cache = settings.tool_cache
        self.tools = ToolBox(
            tools,
            task_tools,
            with_result_reader=self.cache is not None,
            non_cacheable=settings.non_cacheable,
            log=self.log,
            finish=settings.finish,
        )
        resumed = settings.resume_steps
        if state is None:
            state = (
                state_from_steps(
                    resumed,
                    self.tools.traits,
                    settings.circuit_breaker,
                    first_group,
                    settings.max_steps,
                )
                if resumed
                else RunState(response_groups=first_group)
            )
        self.state = state
        # The budget account: a child of the context's when the run draws from another's.
        parent = ctx.budget if isinstance(ctx.budget, BudgetAccount) else None
        self.budget = BudgetAccount(settings.budget, state=state.budget, parent=parent)
        self.model_hint = _model_of(llm)
        """The model the caller says it calls: prices the first call of a cost budget."""
        self.latest_text = ""
        """The latest non-empty text the model wrote in this run (the best answer so far)."""
        self.answer_data: Any = None
        """The latest answer validated against the output type (``output_type`` only)."""
        self.ctx = ctx.replace(budget=self.budget)
        self.tool_ctx = self.ctx.replace(
            tool_result_cache=self.cache, per_tool_truncation=settings.per_tool_truncation
        )
        self.journal = settings.journal
        self.trajectory = Recorder(cw, state, self.tools, resumed, self.journal)
        self.checklist_offered = CHECKLIST_TOOL in self.tools.task_tool_names
        # Capabilities, decided once: runtime protocol checks are slow on the hot path.
        self.streams = supports_streaming(self.llm)
        self.consumes_interjections = conforms(cw, InterjectionConsumer)
        self.interjections = cw if conforms(cw, InterjectionHolder) else None
        self.asks_tool_calls = type(settings.hitl).on_tool_call is not HITLHandler.on_tool_call
        store = self.ctx.trajectory_store
        self.tail_store = _tail_store(store)
        """The trajectory store, when it takes only the new steps at each boundary."""
        self.synced = 0
        """Steps the tail store holds from the last sync."""
        self.archiver = ObservationArchiver(_archive_of(self.journal, store))

    @property
    def step(self) -> int:
        """The number of the current step (the model response being worked on)."""
        return self.state.iteration + 1

    def step_limit(self) -> int:
        """The last step number the budget allows."""
        return self.state.step_budget.limit(self.settings.max_steps)

    def report_start(self) -> None:
        """Fire ``run_start`` (its record is built only for a sink that listens)."""
        if not self.events.listens("run_start"):
            return
        self.events.run_start(
            RunStart(
                llm=self.llm,
                redact=redactor_for(self.llm),
                first_step=self.step,
                max_steps=self.settings.max_steps,
                resumed=self.state.iteration > 0 or bool(self.settings.resume_steps),
                step_id=self.ctx.step_id,
                plan_step_id=self.settings.plan_step_id,
                task=self.ctx.task_description,
            )
        )

    def diag(self, event: str, **details: Any) -> None:
        """Fire ``executor_diagnostic`` and log it at DEBUG."""
        if self.settings.plan_step_id:
            details.setdefault("plan_step_id", self.settings.plan_step_id)
        self.log.debug("diagnostic %s at step %d: %s", event, self.step, details)
        self.events.executor_diagnostic(self.step, event, details)

    def sync_trajectory(self) -> None:
        """Give the trajectory store (if any) the steps so far: only the new ones if it can."""
        steps = self.trajectory.steps
        if self.tail_store is not None:
            # The trajectory only grows: what the store holds before ``synced`` is unchanged.
            self.tail_store.sync_tail(self.synced, steps[self.synced :])
            self.synced = len(steps)
        elif (store := self.ctx.trajectory_store) is not None:
            store.sync(list(steps))

    def at_boundary(self) -> None:
        """A boundary: sync the trajectory store, commit to the journal, archive what is durable."""
        self.sync_trajectory()
        if self.journal is not None:
            self.budget.flush_clock()
            self.journal.on_boundary(self.trajectory.unjournaled(), self.state)
        self.archiver.after_boundary(self.trajectory.steps)

    def result(
        self, output: str, exit_reason: ExitReason, *, finished: bool, responded: bool = False
    ) -> ExecutorResult:
        """The run's result; commits pending steps first.

        ``responded``: the run ends after this step's model response (which then counts).
        """
        self.trajectory.commit()
        self.save_interjection()
        self.budget.flush_clock()
        if self.journal is not None:
            self.journal.on_boundary(self.trajectory.unjournaled(), self.state)
        spent = self.state.budget
        return ExecutorResult(
            output=output,
            steps=list(self.trajectory.steps),
            finished=finished,
            paused=exit_reason is ExitReason.PAUSED,
            exit_reason=exit_reason,
            state=self.state,
            usage=spent.usage,
            cost_usd=spent.cost,
            output_data=self.answer_data if exit_reason in _ANSWERED else None,
            model_responses=self.state.iteration + responded,
        )

    def restore_interjection(self) -> None:
        """Give a resumed run's saved interjection back to the context manager."""
        saved = self.state.pending_interjection
        holder = self.interjections
        if saved and holder is not None and not holder.pending_user_interjection:
            holder.set_pending_user_interjection(saved)

    def save_interjection(self) -> None:
        """Keep a resume interjection the context manager has not retired yet in the state."""
        if self.interjections is not None:
            self.state.keep_interjection(self.interjections.pending_user_interjection)


#: Exit reasons whose output is the model's answer (and ``output_data`` its validated form).
_ANSWERED = frozenset(
    {ExitReason.FINISHED, ExitReason.IMPLICIT_FINISH, ExitReason.MUTATION_REQUIRED}
)


def _tail_store(store: object) -> IncrementalTrajectoryStore | None:
    """``store`` when it takes the new steps only, and ``sync`` is not its own override.

    A subclass that overrides ``sync`` of a class with ``sync_tail`` (a ``ListTrajectoryStore``
    that watches its syncs) was written for ``sync``: it keeps getting it.
    """
    if store is None or not conforms(store, IncrementalTrajectoryStore):
        return None
    mro = type(store).__mro__

    def depth(name: str) -> int:  # the class defining ``name``: 0 is the store's own class
        return next((i for i, c in enumerate(mro) if name in c.__dict__), 0)

    return store if depth("sync_tail") <= depth("sync") else None


def _archive_of(journal: object, store: object) -> StepArchive | None:
    """Where committed observations can be read back from: the journal, else the store."""
    for holder in (journal, store):
        if holder is not None and conforms(holder, StepArchive):
            return holder
    return None


def _model_of(llm: object) -> str:
    """The ``model`` a caller names, looking through decorators (``inner``); ``""`` if none."""
    for _ in range(8):
        model = getattr(llm, "model", None)
        if isinstance(model, str) and model:
            return model
        llm = getattr(llm, "inner", None)
        if llm is None:
            break
    return ""
