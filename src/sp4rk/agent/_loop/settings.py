"""The executor's configuration, as every run of it reads it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sp4rk.agent.audit import AuditLog
from sp4rk.agent.budget import Budget
from sp4rk.agent.config import CircuitBreakerConfig, ToolResultBudget
from sp4rk.agent.events import Events
from sp4rk.agent.hitl import HITLHandler
from sp4rk.agent.journal import RunJournal
from sp4rk.agent.taint import TaintPolicy
from sp4rk.agent.types import Step
from sp4rk.agent.verify import EditVerifyRunner
from sp4rk.llm.tokens import TokenCounter
from sp4rk.tools.builtins.finish import FinishTool
from sp4rk.tools.context import RunContext
from sp4rk.tools.result_cache import ToolResultCache
from sp4rk.tools.truncation import ToolTruncationConfig

FinishGuard = Callable[[RunContext], "str | Awaitable[str | None] | None"]
PauseChecker = Callable[[RunContext], "bool | Awaitable[bool]"]
MessageSource = Callable[[RunContext], "str | Awaitable[str]"]

#: Seconds an async host callback (finish guard, pause checker, message source) may take.
HOST_CALLBACK_TIMEOUT = 60.0

logger = logging.getLogger("sp4rk.agent")


@dataclass(slots=True)
class ExecutorSettings:
    """The executor's configuration (each run works on a shallow copy)."""

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
    non_cacheable: set[str] = field(default_factory=set)
    """Tools added with ``add_non_cacheable_tools`` (beyond those whose traits say so)."""
    mutation_required: bool = False
    checklist_gate: bool = True
    plan_step_id: str = ""
    plan_index: int = 0
    plan_total: int = 0
    verify_runner: EditVerifyRunner | None = None
    verify_max_chars: int = 0
    taint_policy: TaintPolicy = field(default_factory=TaintPolicy)
    audit_log: AuditLog | None = None
    journal: RunJournal | None = None
    budget: Budget | None = None
    finish: FinishTool = field(default_factory=FinishTool)
    """The ``finish`` tool offered to every run (typed with ``output_type``)."""
