"""Per-run state: everything one call to ``Executor.run`` reads and changes."""

from __future__ import annotations

import copy
import enum
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sp4rk._internal.conformance import conforms
from sp4rk.agent._loop.steps import (
    CHECKLIST_TOOL,
    is_productive,
    is_successful_mutation,
    is_successful_update,
)
from sp4rk.agent.config import CircuitBreakerConfig, ToolResultBudget
from sp4rk.agent.debug import DumpCaller
from sp4rk.agent.events import Events
from sp4rk.agent.hitl import HITLHandler
from sp4rk.agent.protocols import (
    ContextManager,
    InterjectionConsumer,
    LLMCaller,
    ToolExecutor,
    supports_streaming,
)
from sp4rk.agent.types import ExecutorResult, ExitReason, Step
from sp4rk.agent.verify import EditVerifyRunner
from sp4rk.llm.tokens import TokenCounter
from sp4rk.llm.types import ToolDefinition
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME, FinishTool
from sp4rk.tools.builtins.result_read import tool_result_read
from sp4rk.tools.context import RunContext
from sp4rk.tools.registry import Registry
from sp4rk.tools.result_cache import ToolResultCache
from sp4rk.tools.truncation import ToolTruncationConfig

FinishGuard = Callable[[RunContext], "str | Awaitable[str | None] | None"]
PauseChecker = Callable[[RunContext], "bool | Awaitable[bool]"]
MessageSource = Callable[[RunContext], "str | Awaitable[str]"]

RESULT_READ_TOOL = "tool_result_read"
#: Seconds an async host callback (finish guard, pause checker, message source) may take.
HOST_CALLBACK_TIMEOUT = 60.0
#: Internal meta-tools whose results are cached only when cut.
DEFAULT_NON_CACHEABLE = frozenset(
    {
        "tool_result_read",
        "finish",
        "read_step_output",
        "list_step_outputs",
        "read_final_result",
        "read_attachment",
        "store_fact",
        "search_facts",
        "update_checklist",
    }
)

logger = logging.getLogger("sp4rk.agent")


class Flow(enum.Enum):
    """How a step ended, when it did not end the run."""

    COMPLETED = "completed"
    """Normal step: post-step checks (wrap-up, checklist staleness, compaction) follow."""
    INTERCEPTED = "intercepted"
    """A breaker or a rejection cut the step short: post-step checks are skipped."""
    NUDGED = "nudged"
    """A text reply was answered with a nudge: no ``step_complete``, straight to the next step."""


@dataclass(slots=True)
class ExecutorSettings:
    """The executor's configuration, read by every run (each run copies what it mutates)."""

    max_steps: int
    token_counter: TokenCounter
    events: Events
    suppress_assistant_events: bool
    tool_result_budget: ToolResultBudget
    circuit_breaker: CircuitBreakerConfig
    hitl: HITLHandler
    resume_steps: list[Step]
    pause_checker: PauseChecker | None
    user_message_source: MessageSource | None
    parallel_tool_calls: bool
    logger: logging.Logger = logger
    reasoning_effort: str = ""
    tool_cache: ToolResultCache | None = None
    per_tool_truncation: dict[str, ToolTruncationConfig] = field(default_factory=dict)
    pre_warning_percent: int = 0
    finish_guard: FinishGuard | None = None
    non_cacheable: set[str] = field(default_factory=lambda: set(DEFAULT_NON_CACHEABLE))
    mutation_required: bool = False
    checklist_gate: bool = True
    plan_step_id: str = ""
    plan_index: int = 0
    plan_total: int = 0
    verify_runner: EditVerifyRunner | None = None
    verify_max_chars: int = 0


class SafeEvents:
    """Calls event methods, logging (never raising) what they raise.

    Methods the sink inherits unchanged from the no-op ``Events`` base are skipped.
    """

    __slots__ = ("_events", "_live", "_log")

    def __init__(self, events: Events, log: logging.Logger | logging.LoggerAdapter[Any]) -> None:
        self._events = events
        self._log = log
        sink = type(events)
        self._live = {
            name
            for name in vars(Events)
            if not name.startswith("_") and getattr(sink, name, None) is not vars(Events)[name]
        }

    def __call__(self, name: str, *args: Any) -> None:
        if name not in self._live:
            return
        try:
            getattr(self._events, name)(*args)
        except Exception:
            self._log.exception("event handler %s raised; ignoring", name)


@dataclass(slots=True)
class BreakerCounters:
    """Circuit-breaker bookkeeping for one run."""

    repeat_key: str = ""
    repeat_count: int = 0
    repeat_last_error: bool = False
    truncations: int = 0
    parse_tool: str = ""
    parse_count: int = 0
    fruitless: int = 0
    fruitless_nudged: bool = False
    same_tool: str = ""
    same_key: str = ""
    same_len: int = 0
    same_count: int = 0
    same_last_error: bool = False
    same_nudged: bool = False
    disabled: set[str] = field(default_factory=set)


class Run:
    """One run of the loop: settings, collaborators, the trajectory and the run's counters."""

    def __init__(
        self,
        settings: ExecutorSettings,
        llm: LLMCaller,
        tools: ToolExecutor,
        task_tools: Sequence[Any],
        cw: ContextManager,
        ctx: RunContext,
        first_group: int,
    ) -> None:
        self.s = settings
        # A dump writer on the context records this run's requests and responses.
        self.llm: LLMCaller = llm if ctx.dump_writer is None else DumpCaller(llm, ctx.dump_writer)
        self.tools = tools
        self.cw = cw
        # Capabilities, decided once: runtime protocol checks are slow on the hot path.
        self.streams = supports_streaming(self.llm)
        self.consumes_interjections = conforms(cw, InterjectionConsumer)
        self.asks_tool_calls = type(settings.hitl).on_tool_call is not HITLHandler.on_tool_call
        # sp4rk's Registry already turns every failure into an error result.
        self.tools_never_raise = type(tools).execute is Registry.execute
        self.ctx = ctx
        self.log = logging.LoggerAdapter(
            settings.logger,
            {
                "plan_step_id": settings.plan_step_id,
                "plan_index": settings.plan_index,
                "plan_total": settings.plan_total,
            },
        )
        self.emit = SafeEvents(settings.events, self.log)
        self.breaker = copy.copy(settings.circuit_breaker)
        self.counters = BreakerCounters()
        self.cache = settings.tool_cache
        self.tool_ctx = ctx.replace(
            tool_result_cache=self.cache,
            per_tool_truncation=settings.per_tool_truncation,
        )
        self.definitions, self.task_tool_names = _tool_definitions(task_tools, self.cache)
        self.offered = {d.name for d in self.definitions}
        self.own_result_reader = (
            self.cache is not None and RESULT_READ_TOOL not in self.task_tool_names
        )
        self.finish_tool = FinishTool()
        self.result_reader = tool_result_read
        self.checklist_available = CHECKLIST_TOOL in self.task_tool_names

        self.all_steps: list[Step] = []
        self.productive_calls = 0
        self.productive_since_update = 0
        self.last_update_at = -1
        self.mutated = False
        for step in settings.resume_steps:
            self._append(step)
        self.pending: list[Step] = []
        self.step = 1
        self.eff_max = settings.max_steps
        self.unlimited = False
        self.group_counter = first_group

        self.text_nudges = 0
        self.guard_rejected = False
        self.mutation_nudged = False
        self.checklist_missing_nudged = False
        self.checklist_unchecked_nudged = False
        self.stale_nudges = 0
        self.wrap_up_done = False
        self.pre_warning_done = False
        self.verify_pending = False

    # --- recording ------------------------------------------------------------------------

    def record(self, step: Step) -> None:
        """Add a step of the current response; committed when the response is done."""
        self.pending.append(step)

    def pending_tokens(self) -> int:
        """Tokens the current response's observations will add (not yet in the context)."""
        count = self.s.token_counter.count
        return sum(count(s.observation) for s in self.pending) if self.pending else 0

    def commit(self) -> None:
        """Append the current response's steps to the trajectory and the context manager."""
        for step in self.pending:
            self._append(step)
            self.cw.add_step(step)
        self.pending.clear()

    def record_nudge(self, text: str, **fields: Any) -> None:
        """Record a nudge-only step and commit it at once."""
        self.commit()
        step = Step(user_nudge=text, **fields)
        self._append(step)
        self.cw.add_step(step)

    def _append(self, step: Step) -> None:
        """Add a step to the trajectory, keeping the gates' running counts."""
        self.all_steps.append(step)
        if is_successful_update(step):
            self.last_update_at = len(self.all_steps) - 1
            self.productive_since_update = 0
        elif is_productive(step):
            self.productive_calls += 1
            self.productive_since_update += 1
        if is_successful_mutation(step):
            self.mutated = True

    def past_budget(self) -> bool:
        """Whether this step lies beyond the step budget (the boundary must be asked)."""
        return not self.unlimited and self.step > self.eff_max

    def source_of(self, name: str) -> str:
        """Where a tool comes from: its registry source, or ``"core"`` for the executor's own."""
        return self.tools.get_tool_source(name) if name in self.task_tool_names else "core"

    def diag(self, event: str, **details: Any) -> None:
        """Fire ``executor_diagnostic`` and log it at DEBUG."""
        if self.s.plan_step_id:
            details.setdefault("plan_step_id", self.s.plan_step_id)
        self.log.debug("diagnostic %s at step %d: %s", event, self.step, details)
        self.emit("executor_diagnostic", self.step, event, details)

    def sync_trajectory(self) -> None:
        """Give the trajectory store (if any) a snapshot of the steps so far."""
        store = self.ctx.trajectory_store
        if store is not None:
            store.sync(list(self.all_steps))

    def result(self, output: str, exit_reason: ExitReason, *, finished: bool) -> ExecutorResult:
        """The run's result; commits pending steps first."""
        self.commit()
        return ExecutorResult(
            output=output,
            steps=list(self.all_steps),
            finished=finished,
            paused=exit_reason is ExitReason.PAUSED,
            exit_reason=exit_reason,
        )

    def next_group(self) -> int:
        """A new response-group number: every LLM response gets one.

        Numbering responses (not only multi-call ones) lets a resumed run recount the
        iterations a checkpoint holds, so it continues with exactly the same budget.
        """
        self.group_counter += 1
        return self.group_counter


def _tool_definitions(
    task_tools: Sequence[Any], cache: ToolResultCache | None
) -> tuple[list[ToolDefinition], set[str]]:
    definitions: list[ToolDefinition] = []
    seen: set[str] = set()
    for d in task_tools:
        if d.name in seen:
            continue
        seen.add(d.name)
        description = f"[MCP] {d.description}" if d.source_category == "mcp" else d.description
        definitions.append(ToolDefinition(d.name, description, d.input_schema))
    names = set(seen)
    if cache is not None and RESULT_READ_TOOL not in seen:
        definitions.append(
            ToolDefinition(
                RESULT_READ_TOOL, tool_result_read.description, tool_result_read.input_schema
            )
        )
    if FINISH_TOOL_NAME not in seen:
        finish = FinishTool()
        definitions.append(
            ToolDefinition(FINISH_TOOL_NAME, finish.description, finish.input_schema)
        )
    return definitions, names
