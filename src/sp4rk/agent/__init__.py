"""The ReAct executor and everything it plugs into.

``Executor`` drives a model through Thought → Action → Observation until it calls ``finish``,
a limit stops it, or the host pauses it. It depends only on narrow protocols (``LLMCaller``,
``ToolExecutor``, ``ContextManager``), so any provider, registry or context manager fits.
"""

from sp4rk._core.archive import StepArchiveError
from sp4rk.agent.account import BudgetAccount
from sp4rk.agent.audit import AuditEntry, AuditLog, JsonlAuditLog, MemoryAuditLog
from sp4rk.agent.breakers import BreakerSet, Verdict
from sp4rk.agent.budget import Budget, BudgetError, BudgetReport, BudgetState
from sp4rk.agent.checkpoint import (
    CHECKPOINT_SCHEMA_VERSION,
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
)
from sp4rk.agent.config import (
    CircuitBreakerConfig,
    ToolResultBudget,
    ToolTruncationConfig,
    default_circuit_breaker_config,
    default_tool_result_budget,
    default_tool_truncation_config,
)
from sp4rk.agent.debug import DumpCaller, LoggingLLMCaller, UsageTrackingCaller
from sp4rk.agent.events import (
    CompositeEvents,
    Events,
    ModelCallEnd,
    NoopEvents,
    RecordingEvents,
    RunStart,
    ToolCallEnd,
    ToolErrorType,
)
from sp4rk.agent.executor import Executor
from sp4rk.agent.gates import Gates
from sp4rk.agent.hitl import HITLHandler, HITLToolDecision, NoopHITLHandler, StepLimitResponse
from sp4rk.agent.journal import RunJournal, interrupted_steps
from sp4rk.agent.protocols import (
    CompactionStrategy,
    ContextManager,
    IncrementalTrajectoryStore,
    InterjectionConsumer,
    ListTrajectoryStore,
    LLMCaller,
    StepArchive,
    StreamingLLMCaller,
    ToolExecutor,
    ToolReviewer,
    TrajectoryStore,
    supports_streaming,
)
from sp4rk.agent.state import RunState, StepBudget
from sp4rk.agent.subagent import (
    SubAgentError,
    SubAgentResult,
    SubAgentTask,
    run_sub_agent,
    run_sub_agents_parallel,
)
from sp4rk.agent.taint import TaintPolicy, TaintState
from sp4rk.agent.types import (
    CompactionResult,
    ExecutorResult,
    ExitReason,
    FillCheck,
    NudgeKind,
    Step,
    VulnerableOutput,
)
from sp4rk.agent.verify import (
    DEFAULT_VERIFY_ON_EDIT_CAP,
    EditVerifyResult,
    EditVerifyRunner,
    command_verify_runner,
    format_verify_note,
)
from sp4rk.tools.builtins.finish import FinishTool, new_finish_tool
from sp4rk.tools.context import RunContext
from sp4rk.tools.result_cache import ToolResultCache, compute_tool_result_hash

__all__ = [
    "CHECKPOINT_SCHEMA_VERSION",
    "DEFAULT_VERIFY_ON_EDIT_CAP",
    "AuditEntry",
    "AuditLog",
    "BreakerSet",
    "Budget",
    "BudgetAccount",
    "BudgetError",
    "BudgetReport",
    "BudgetState",
    "Checkpoint",
    "CheckpointError",
    "CircuitBreakerConfig",
    "CompactionResult",
    "CompactionStrategy",
    "CompositeEvents",
    "ContextManager",
    "DumpCaller",
    "EditVerifyResult",
    "EditVerifyRunner",
    "Events",
    "Executor",
    "ExecutorResult",
    "ExitReason",
    "FillCheck",
    "FinishTool",
    "Gates",
    "HITLHandler",
    "HITLToolDecision",
    "IncrementalTrajectoryStore",
    "InterjectionConsumer",
    "JsonlAuditLog",
    "LLMCaller",
    "ListTrajectoryStore",
    "LoggingLLMCaller",
    "MemoryAuditLog",
    "ModelCallEnd",
    "NoopEvents",
    "NoopHITLHandler",
    "NudgeKind",
    "RecordingEvents",
    "RunContext",
    "RunJournal",
    "RunStart",
    "RunState",
    "Step",
    "StepArchive",
    "StepArchiveError",
    "StepBudget",
    "StepLimitResponse",
    "StreamingLLMCaller",
    "SubAgentError",
    "SubAgentResult",
    "SubAgentTask",
    "TaintPolicy",
    "TaintState",
    "ToolCallEnd",
    "ToolErrorType",
    "ToolExecutor",
    "ToolResultBudget",
    "ToolResultCache",
    "ToolReviewer",
    "ToolTruncationConfig",
    "TrajectoryStore",
    "UsageTrackingCaller",
    "Verdict",
    "VulnerableOutput",
    "command_verify_runner",
    "compute_tool_result_hash",
    "default_circuit_breaker_config",
    "default_tool_result_budget",
    "default_tool_truncation_config",
    "format_verify_note",
    "interrupted_steps",
    "load_checkpoint",
    "new_finish_tool",
    "run_sub_agent",
    "run_sub_agents_parallel",
    "save_checkpoint",
    "supports_streaming",
]
