"""``Executor``: configuration, the single-flight guard, and the ``run``/``run_sync`` entry points.

The loop itself lives in :mod:`sp4rk.agent._loop`, one module per lifecycle phase.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence

from sp4rk._internal.aio import run_sync
from sp4rk._internal.conformance import conforms
from sp4rk.agent._legacy import iterations_in
from sp4rk.agent._loop.lifecycle import run_loop
from sp4rk.agent._loop.scope import RunScope
from sp4rk.agent._loop.settings import (
    ExecutorSettings,
    FinishGuard,
    MessageSource,
    PauseChecker,
)
from sp4rk.agent.audit import AuditLog
from sp4rk.agent.budget import Budget
from sp4rk.agent.checkpoint import Checkpoint
from sp4rk.agent.config import (
    CircuitBreakerConfig,
    ToolResultBudget,
    ToolTruncationConfig,
    default_circuit_breaker_config,
    default_tool_result_budget,
    default_tool_truncation_config,
)
from sp4rk.agent.events import Events, check_events
from sp4rk.agent.hitl import HITLHandler, check_hitl_handler
from sp4rk.agent.journal import RunJournal
from sp4rk.agent.protocols import ContextManager, LLMCaller, ToolExecutor
from sp4rk.agent.state import RunState
from sp4rk.agent.taint import TaintPolicy
from sp4rk.agent.types import ExecutorResult, Step
from sp4rk.agent.verify import EditVerifyRunner
from sp4rk.llm.tokens import SimpleTokenCounter, TokenCounter
from sp4rk.tools.base import ToolDescriptor
from sp4rk.tools.context import RunContext
from sp4rk.tools.result_cache import ToolResultCache
from sp4rk.tools.stores import InMemoryFactStore

_log = logging.getLogger("sp4rk.agent")
_log.addHandler(logging.NullHandler())


class Executor:
    """Drives an agent through Thought → Action → Observation until its task is done.

    Args:
        llm: the model (a provider, a router, or ``sp4rk.llm.testing.ScriptedLLM``).
        tools: runs the tools (usually a ``Registry``).
        max_steps: step budget; at the budget ``hitl.on_step_limit`` decides whether to go on.
        token_counter: counts tokens for the tool-result budget (default: 4 bytes/token).
        events: lifecycle event sink (default: no-op).
        suppress_assistant_events: hide ``assistant_chunk``/``assistant_done`` (sub-agents).
        tool_result_budget: Stage 2 truncation (default: 30 000 tokens, 40 % of the window).
        circuit_breaker: loop-protection thresholds (default: the reference's numbers).
        hitl: human-in-the-loop handler (default: approves nothing explicitly, denies limits).
        resume_steps: a checkpoint to continue from; seed the context manager with the same
            steps (``ContextWindow.seed_steps``). They count against ``max_steps``. A
            ``Checkpoint`` from ``load_checkpoint`` brings its run state along.
        resume_state: the ``RunState`` of the run being resumed (``result.state``), so it
            continues with the same budget, breaker counts and gate decisions. Without it the
            executor rebuilds what it safely can from the steps (never a budget grant).
        pause_checker: ``fn(ctx) -> bool`` checked at every step boundary.
        user_message_source: ``fn(ctx) -> str`` polled at every boundary for a live message.
        parallel_tool_calls: run consecutive read-only calls of one response concurrently
            (tools declare themselves read-only, e.g. ``@tool(read_only=True)``); approval
            still happens call by call, and observations are recorded in the model's order.
        budget: what the run may spend — tokens, cost, wall-clock time, tool calls (see
            :class:`~sp4rk.agent.Budget`); the spend survives pause and resume in the run
            state. A run whose ``ctx.budget`` carries an account draws from it as well.

    One executor runs one thing at a time: a second ``run`` while one is in flight raises
    ``RuntimeError``. Build a fresh executor per concurrent run (see ``run_sub_agents_parallel``).
    """

    def __init__(
        self,
        llm: LLMCaller,
        tools: ToolExecutor,
        max_steps: int,
        *,
        token_counter: TokenCounter | None = None,
        events: Events | None = None,
        suppress_assistant_events: bool = False,
        tool_result_budget: ToolResultBudget | None = None,
        circuit_breaker: CircuitBreakerConfig | None = None,
        hitl: HITLHandler | None = None,
        resume_steps: Sequence[Step] | None = None,
        pause_checker: PauseChecker | None = None,
        user_message_source: MessageSource | None = None,
        parallel_tool_calls: bool = False,
        resume_state: RunState | None = None,
        budget: Budget | None = None,
    ) -> None:
        if not conforms(llm, LLMCaller):
            raise TypeError(f"llm must have an async call(request) method, got {llm!r}")
        if not conforms(tools, ToolExecutor):
            raise TypeError(
                "tools must satisfy ToolExecutor (execute, get_tool_source, is_tool_untrusted, "
                f"cache_strategy); got {tools!r}. Use sp4rk.tools.Registry."
            )
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
        if resume_state is None and isinstance(resume_steps, Checkpoint):
            resume_state = resume_steps.state
        if resume_state is not None and not isinstance(resume_state, RunState):
            raise TypeError(
                f"resume_state must be a RunState (result.state), got {type(resume_state).__name__}"
            )
        if resume_state is not None and resume_steps:
            _check_resume(resume_steps, resume_state)

        _check_budget(budget)
        if events is not None:
            check_events(events)
        if hitl is not None:
            check_hitl_handler(hitl)
        self._llm = llm
        self._tools = tools
        self._settings = ExecutorSettings(
            max_steps=max_steps,
            token_counter=token_counter or SimpleTokenCounter(),
            events=events if events is not None else Events(),
            suppress_assistant_events=suppress_assistant_events,
            tool_result_budget=copy.copy(tool_result_budget or default_tool_result_budget()),
            circuit_breaker=copy.copy(circuit_breaker or default_circuit_breaker_config()),
            hitl=hitl if hitl is not None else HITLHandler(),
            resume_steps=list(resume_steps or ()),
            pause_checker=pause_checker,
            user_message_source=user_message_source,
            parallel_tool_calls=parallel_tool_calls,
            logger=_log,
            tool_cache=ToolResultCache(),
            per_tool_truncation=default_tool_truncation_config(),
            budget=budget,
        )
        self._resume_state = copy.deepcopy(resume_state)
        self._running = False
        self._response_groups = 0
        # Facts outlive a run: a second run (or a resume on this executor) can search them.
        self._facts = InMemoryFactStore()
        self.last_steps: list[Step] = []
        """The trajectory of the latest run, also after it raised."""
        self.last_state: RunState | None = None
        """The run state of the latest run, also after it raised."""

    # --- configuration --------------------------------------------------------------------

    def set_logger(self, logger: logging.Logger) -> None:
        """Log through ``logger`` instead of ``logging.getLogger("sp4rk.agent")``."""
        self._settings.logger = logger

    def set_reasoning_effort(self, effort: str) -> None:
        """Reasoning effort sent with every LLM call (``""`` = provider default)."""
        self._settings.reasoning_effort = effort

    def set_tool_cache(self, cache: ToolResultCache | None) -> None:
        """Share ``cache`` (for example between sub-agents); ``None`` disables caching."""
        self._settings.tool_cache = cache

    def set_per_tool_truncation(self, config: dict[str, ToolTruncationConfig] | None) -> None:
        """Stage 1 limits per tool (deep-copied); ``None`` switches Stage 1 off."""
        self._settings.per_tool_truncation = copy.deepcopy(dict(config or {}))

    def set_pre_warning_percent(self, percent: int) -> None:
        """Fill percentage at which the model is told to save findings (0 = never).

        Raises:
            ValueError: outside 0–100.
        """
        if not 0 <= percent <= 100:
            raise ValueError("pre-warning percent must be between 0 and 100")
        self._settings.pre_warning_percent = percent

    def set_finish_guard(self, guard: FinishGuard | None) -> None:
        """``fn(ctx) -> str | None`` (sync or async) asked before a finish is accepted.

        A non-empty string (or an exception) rejects the first finish with that reason; the
        next finish attempt is accepted whatever the guard says.
        """
        self._settings.finish_guard = guard

    def add_non_cacheable_tools(self, *names: str) -> None:
        """Tools whose results are cached only when truncated (meta-tools of your own)."""
        self._settings.non_cacheable.update(names)

    def set_mutation_required(self, required: bool) -> None:
        """Require a successful file change before finishing."""
        self._settings.mutation_required = required

    def set_checklist_gate_enabled(self, enabled: bool) -> None:
        """Switch the checklist gate (on by default when ``update_checklist`` is offered)."""
        self._settings.checklist_gate = enabled

    def set_plan_context(self, step_id: str, index: int, total: int) -> None:
        """Tag events and log records with the plan step this executor works on."""
        self._settings.plan_step_id = step_id
        self._settings.plan_index = index
        self._settings.plan_total = total

    def set_hitl_handler(self, handler: HITLHandler | None) -> None:
        """Replace the human-in-the-loop handler (``None`` restores the default)."""
        if handler is not None:
            check_hitl_handler(handler)
        self._settings.hitl = handler if handler is not None else HITLHandler()

    def set_verify_on_edit(
        self, runner: EditVerifyRunner | None, max_output_chars: int = 0
    ) -> None:
        """Run ``runner`` after each response that wrote or edited a file (``None`` disables).

        ``max_output_chars <= 0`` keeps the default cap of 4000 characters.
        """
        self._settings.verify_runner = runner
        self._settings.verify_max_chars = max_output_chars

    def set_taint_policy(self, policy: TaintPolicy | None) -> None:
        """How risky calls are escalated after untrusted content (``None``: never).

        By default, once the run has read untrusted content (web pages, MCP results, files),
        calls that reach the network, change files or that a server calls destructive need
        an explicit approval even when their policy allows them.
        """
        self._settings.taint_policy = policy if policy is not None else TaintPolicy(enabled=False)

    def set_audit_log(self, log: AuditLog | None) -> None:
        """Append every approval decision to ``log`` (for example ``JsonlAuditLog(path)``)."""
        if log is not None and not conforms(log, AuditLog):
            raise TypeError(f"an audit log needs a record(entry) method, got {log!r}")
        self._settings.audit_log = log

    def set_journal(self, journal: RunJournal | None) -> None:
        """Report every completed step, the run state and each call's start to ``journal``.

        A crash-safe store uses it to commit each boundary and to know which calls were in
        flight (see :mod:`sp4rk.agent.journal`); its exceptions stop the run.
        """
        if journal is not None and not conforms(journal, RunJournal):
            raise TypeError(f"a journal needs the RunJournal methods, got {journal!r}")
        self._settings.journal = journal

    def set_budget(self, budget: Budget | None) -> None:
        """Limit what each run may spend (``None``: no limits; usage is still counted).

        A resumed run keeps what it spent and what the human granted (``result.state``); the
        limits are the executor's at the time of the run.
        """
        _check_budget(budget)
        self._settings.budget = budget

    def set_pause_checker(self, checker: PauseChecker | None) -> None:
        """``fn(ctx) -> bool`` checked at every step boundary; ``True`` pauses the run."""
        self._settings.pause_checker = checker

    def set_user_message_source(self, source: MessageSource | None) -> None:
        """``fn(ctx) -> str`` polled at every boundary; a non-empty message reaches the model."""
        self._settings.user_message_source = source

    # --- running --------------------------------------------------------------------------

    async def run(
        self,
        task_tools: Sequence[ToolDescriptor],
        cw: ContextManager,
        ctx: RunContext | None = None,
    ) -> ExecutorResult:
        """Run the loop until the task is finished, the run is paused, or a limit stops it.

        Args:
            task_tools: the tools offered this run (``finish`` is added automatically, and
                ``tool_result_read`` when a result cache is set).
            cw: the context manager that owns the prompt history.
            ctx: values shared with tools (workspace, stores, trajectory store).

        Returns:
            The result; ``paused=True`` when the pause checker stopped the run.

        Raises:
            RuntimeError: when this executor is already running.
            LLMError: when the model call fails (after the provider's own retries).
            ContextWindowExceededError: when the context stays full after compaction.
            asyncio.CancelledError: when the task awaiting ``run`` is cancelled.
        """
        if self._running:
            raise RuntimeError(
                "this Executor is already running; runs on one instance must not overlap. "
                "Create one Executor per concurrent run."
            )
        _check_task_tools(task_tools)
        context = ctx or RunContext()
        if context.fact_store is None:
            context = context.replace(fact_store=self._facts)
        run = RunScope(
            copy.copy(self._settings),
            copy.deepcopy(self._resume_state),
            self._llm,
            self._tools,
            task_tools,
            cw,
            context,
            first_group=self._response_groups,
        )
        state = run.state
        run.restore_interjection()
        self._running = True
        result: ExecutorResult | None = None
        error: BaseException | None = None
        try:
            run.report_start()
            result = await run_loop(run)
            return result
        except BaseException as exc:
            error = exc
            run.trajectory.commit()  # calls that completed before the failure stay
            run.budget.flush_clock()
            run.save_interjection()
            if run.journal is not None:
                try:
                    run.journal.on_boundary(run.trajectory.unjournaled(), state)
                except Exception:  # the run's own exception is the one to report
                    run.log.exception("the journal failed to record the failed run's end")
            raise
        finally:
            self._response_groups = state.response_groups
            self.last_steps = list(run.trajectory.steps)
            self.last_state = state
            self._running = False
            try:
                run.sync_trajectory()
            except Exception:  # never mask the run's own outcome or exception
                run.log.exception("trajectory store failed on the final sync")
            run.events.run_end(result, error)
            error = None  # the exception's traceback holds this frame: no cycle through it

    def run_sync(
        self,
        task_tools: Sequence[ToolDescriptor],
        cw: ContextManager,
        ctx: RunContext | None = None,
    ) -> ExecutorResult:
        """Blocking twin of :meth:`run`, for scripts.

        Raises:
            RuntimeError: when called inside a running event loop; ``await run(...)`` there.
        """
        return run_sync(lambda: self.run(task_tools, cw, ctx), "executor.run")


def _check_budget(budget: object) -> None:
    if budget is not None and not isinstance(budget, Budget):
        raise TypeError(
            f"budget must be a sp4rk.agent.Budget (or None), got {type(budget).__name__}; "
            "for example Budget(max_cost_usd=1.0, max_seconds=600)"
        )


def _check_task_tools(task_tools: Sequence[ToolDescriptor]) -> None:
    """Fail fast, with the fix, when ``task_tools`` are not tool descriptors."""
    for d in task_tools:
        if not isinstance(d, ToolDescriptor):
            raise TypeError(
                f"task_tools must be ToolDescriptor objects (use registry.list()), got "
                f"{type(d).__name__}"
            )


def _check_resume(steps: Sequence[Step], state: RunState) -> None:
    """Refuse a state that is behind its steps (a state from another run, or an older save).

    Resumed with it, the next response would reuse a response group and merge into an
    earlier assistant message.
    """
    groups = max((s.response_group for s in steps), default=0)
    used = iterations_in(steps)
    if state.response_groups < groups or state.iteration < used:
        raise ValueError(
            f"resume_state does not belong to resume_steps: the steps hold {used} model "
            f"responses (response group {groups}) but the state has {state.iteration} "
            f"(group {state.response_groups}). Pass the steps and the state of the same "
            "result, or omit resume_state to rebuild it from the steps."
        )
