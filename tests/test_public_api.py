"""The public surface: every name of the API contract (python-api.md) exists where it should."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest

CONTRACT: dict[str, set[str]] = {
    "sp4rk.llm": {
        "Message",
        "ContentBlock",
        "ToolCall",
        "ToolDefinition",
        "ReasoningItem",
        "TokenUsage",
        "ChatRequest",
        "ChatResponse",
        "TokenCounter",
        "SimpleTokenCounter",
        "LLMError",
        "ContextWindowExceededError",
        "RateLimitError",
        "OpenAIChatProvider",
        "OpenAIResponsesProvider",
        "AnthropicProvider",
        "Router",
    },
    "sp4rk.llm.testing": {"ScriptedLLM", "FunctionLLM"},
    "sp4rk.llm.pricing": {
        "DEFAULT_PRICES",
        "PRICES_AS_OF",
        "ModelPrice",
        "PriceTable",
        "default_price_table",
    },
    "sp4rk.tools": {
        "ToolResult",
        "ToolDescriptor",
        "ToolPolicy",
        "CacheMode",
        "Tool",
        "ContentBackedReader",
        "ToolError",
        "tool",
        "Registry",
        "RunContext",
    },
    "sp4rk.tools.builtins": {"builtin_tools", "register_builtins"},
    "sp4rk.agent": {
        "Executor",
        "Step",
        "ExecutorResult",
        "ExitReason",
        "FillCheck",
        "CircuitBreakerConfig",
        "default_circuit_breaker_config",
        "ToolTruncationConfig",
        "default_tool_truncation_config",
        "ToolResultBudget",
        "default_tool_result_budget",
        "ToolResultCache",
        "compute_tool_result_hash",
        "FinishTool",
        "new_finish_tool",
        "LLMCaller",
        "StreamingLLMCaller",
        "supports_streaming",
        "ToolExecutor",
        "ContextManager",
        "CompactionStrategy",
        "CompactionResult",
        "VulnerableOutput",
        "TrajectoryStore",
        "IncrementalTrajectoryStore",
        "StepArchive",
        "StepArchiveError",
        "InterjectionConsumer",
        "Events",
        "NoopEvents",
        "HITLHandler",
        "HITLToolDecision",
        "StepLimitResponse",
        "NoopHITLHandler",
        "EditVerifyResult",
        "DEFAULT_VERIFY_ON_EDIT_CAP",
        "DumpCaller",
        "LoggingLLMCaller",
        "SubAgentTask",
        "SubAgentResult",
        "run_sub_agent",
        "run_sub_agents_parallel",
        "RunContext",
        "Budget",
        "BudgetAccount",
        "BudgetError",
        "BudgetReport",
        "BudgetState",
        # sp4rk's own, beyond the contract: observability (issue 14)
        "CompositeEvents",
        "RunStart",
        "ModelCallEnd",
        "ToolCallEnd",
        "ToolErrorType",
    },
    "sp4rk.otel": {"OpenTelemetryEvents", "configure_from_environment"},
    # sp4rk's own: batch runs (issue 16) and the shared runs store they use
    "sp4rk.batch": {
        "run_batch",
        "BatchTask",
        "BatchResult",
        "BatchReport",
        "BatchControl",
        "BatchListener",
        "BatchModel",
        "BatchError",
        "TaskFileError",
        "ResultsFileError",
        "load_tasks",
        "default_model_factory",
    },
    "sp4rk.store": {
        "SQLRunStore",
        "SQLiteRunStore",
        "PostgresRunStore",
        "StoreJournal",
        "open_store",
        "default_store_path",
    },
    "sp4rk.memory": {
        "ContextWindow",
        "SlidingWindowStrategy",
        "SummarizationStrategy",
        "HierarchicalStrategy",
        "ObservationMaskingStrategy",
    },
}


@pytest.mark.parametrize("module_name", sorted(CONTRACT))
def test_contract_names_are_exported(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = set(getattr(module, "__all__", ()))
    missing = CONTRACT[module_name] - exported
    assert not missing, f"{module_name} does not export {sorted(missing)}"
    for name in exported:
        assert hasattr(module, name), f"{module_name}.__all__ names missing {name}"


def test_the_console_entry_point_exists() -> None:
    from sp4rk.cli import main

    assert callable(main)
    assert main([]) == 0


def params(fn: object) -> list[str]:
    return list(inspect.signature(fn).parameters)  # type: ignore[arg-type]


def test_executor_signature() -> None:
    from sp4rk.agent import Executor

    assert params(Executor.__init__) == [
        "self",
        "llm",
        "tools",
        "max_steps",
        "token_counter",
        "events",
        "suppress_assistant_events",
        "tool_result_budget",
        "circuit_breaker",
        "hitl",
        "resume_steps",
        "pause_checker",
        "user_message_source",
        "parallel_tool_calls",
        "resume_state",
        "budget",
        "output_type",
    ]
    assert params(Executor.run) == ["self", "task_tools", "cw", "ctx"]
    assert params(Executor.run_sync) == ["self", "task_tools", "cw", "ctx"]
    for setter in (
        "set_logger",
        "set_reasoning_effort",
        "set_tool_cache",
        "set_per_tool_truncation",
        "set_pre_warning_percent",
        "set_finish_guard",
        "add_non_cacheable_tools",
        "set_mutation_required",
        "set_checklist_gate_enabled",
        "set_plan_context",
        "set_hitl_handler",
        "set_verify_on_edit",
        "set_pause_checker",
        "set_user_message_source",
        "set_budget",
    ):
        assert callable(getattr(Executor, setter)), setter
    assert params(Executor.set_verify_on_edit) == ["self", "runner", "max_output_chars"]


def fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_data_shapes() -> None:
    from sp4rk.agent import EditVerifyResult, ExecutorResult, FillCheck, Step, ToolResultBudget
    from sp4rk.llm import ChatRequest, ChatResponse, Message

    assert fields(Step) == [
        "thought",
        "reasoning_content",
        "reasoning_items",
        "action",
        "observation",
        "is_error",
        "tokens_used",
        "user_nudge",
        "response_group",
        "is_untrusted",
        "cache_hash",
        "nudge_kind",
        "notes_length",
    ]
    assert fields(ExecutorResult) == [
        "output",
        "steps",
        "finished",
        "paused",
        "exit_reason",
        "state",
        "usage",
        "cost_usd",
        "output_data",
        "model_responses",
    ]
    assert fields(FillCheck) == ["percent", "status", "used", "max"]
    assert fields(EditVerifyResult) == ["output", "exit_code", "timed_out", "timeout", "error"]
    assert ToolResultBudget() == ToolResultBudget(hard_cap_tokens=30_000, max_fill_fraction=0.4)
    assert fields(Message) == [
        "role",
        "content",
        "content_blocks",
        "reasoning_content",
        "tool_calls",
        "tool_call_id",
        "reasoning_items",
    ]
    assert fields(ChatRequest) == [
        "model",
        "messages",
        "tools",
        "max_tokens",
        "call_purpose",
        "temperature",
        "top_p",
        "top_k",
        "presence_penalty",
        "reasoning_effort",
    ]
    assert fields(ChatResponse) == ["model", "message", "reasoning", "usage", "stop_reason"]


def test_defaults_equal_the_reference_numbers() -> None:
    from sp4rk.agent import default_circuit_breaker_config, default_tool_truncation_config

    cfg = default_circuit_breaker_config()
    # The reference's numbers, except repeat_abort_threshold: 4, not 5, so that an identical
    # loop stops no later than OpenHands' StuckDetector (issue 19); then the stuck detectors.
    assert dataclasses.astuple(cfg) == (3, 4, 3, 3, 5, 8, 48, 8, 12, 128, 4, 1, 1, 3, 6)
    limits = default_tool_truncation_config()
    assert limits["read_file"].max_lines == 50_000 and limits["web_fetch"].max_bytes == 2_097_152
    assert default_tool_truncation_config() is not limits


def test_exit_reasons() -> None:
    from sp4rk.agent import ExitReason

    assert {e.name for e in ExitReason} >= {
        "FINISHED",
        "IMPLICIT_FINISH",
        "PAUSED",
        "STEP_LIMIT",
        "REPEAT_ABORT",
        "TRUNCATION_ABORT",
        "PARSE_ERROR_ABORT",
        "FRUITLESS_ABORT",
        "SAME_TOOL_ABORT",
        "MUTATION_REQUIRED",
    }


def test_events_have_the_thirteen_callbacks_in_order_then_sp4rks_own() -> None:
    from sp4rk.agent import Events, HITLHandler, NoopEvents, NoopHITLHandler

    names = [n for n in vars(Events) if not n.startswith("_")]
    assert names[13:] == [
        "run_start",
        "run_end",
        "model_call_start",
        "model_call_end",
        "tool_execute_start",
        "tool_execute_end",
        "tool_call_end",
        "approval",
        "usage_update",
    ]
    assert names[:13] == [
        "step_start",
        "thought",
        "tool_call",
        "tool_result",
        "step_complete",
        "sub_agent_launch",
        "sub_agent_complete",
        "assistant_chunk",
        "assistant_done",
        "context_fill",
        "context_compaction",
        "finishing",
        "executor_diagnostic",
    ]
    assert NoopEvents is Events and NoopHITLHandler is HITLHandler


def test_more_contract_signatures() -> None:
    from sp4rk.agent import (
        DumpCaller,
        FinishTool,
        HITLHandler,
        HITLToolDecision,
        LoggingLLMCaller,
        SubAgentResult,
        SubAgentTask,
        ToolResultCache,
    )
    from sp4rk.memory import ContextWindow
    from sp4rk.tools import ToolDescriptor

    assert params(ToolResultCache.store) == [
        "self",
        "tool_name",
        "content",
        "file_path",
        "mtime",
        "size",
        "source",
        "digest",
    ]
    assert params(ToolResultCache.get) == ["self", "hash_or_prefix"]
    assert params(ToolResultCache.check_coherence) == ["self", "hash"]
    assert params(ToolResultCache.__init__)[:2] == ["self", "mcp_ttl"]
    assert params(HITLHandler.on_tool_call) == ["self", "ctx", "tool_name", "input"]
    assert params(HITLHandler.on_step_limit) == [
        "self",
        "ctx",
        "current_step",
        "max_steps",
        "reason",
    ]
    assert fields(HITLToolDecision) == ["allow", "modified_input", "reason", "abstain"]
    assert params(DumpCaller.__init__) == ["self", "inner", "writer", "logger"]
    assert params(LoggingLLMCaller.__init__) == ["self", "inner", "provider", "logger"]
    assert fields(SubAgentTask) == [
        "step_id",
        "executor",
        "window",  # ``cm`` in 0.1: still accepted, with a DeprecationWarning
        "tools",
        "description",
        "events",
        "ctx",
    ]
    assert params(SubAgentTask.__init__)[-1] == "cm"
    assert fields(SubAgentResult) == [
        "step_id",
        "output",
        "steps",
        "error",
        "success",
        "output_data",  # added: a typed sub-agent's answer
    ]
    assert fields(ToolDescriptor) == [
        "name",
        "description",
        "input_schema",
        "source",
        "group",
        "source_category",
        "traits",
    ]
    assert FinishTool().input_schema["required"] == ["answer"]
    assert params(ContextWindow.__init__) == [
        "self",
        "max_tokens",
        "output_limit",
        "token_counter",
        "system_prompt",
        "task",
        "strategy",
        "keep_last_n",
        "prune_threshold_percent",
        "safety_margin_percent",
        "thresholds",
    ]


def test_provider_constructor_signature() -> None:
    from sp4rk.llm import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider

    for provider in (OpenAIChatProvider, OpenAIResponsesProvider, AnthropicProvider):
        assert params(provider.__init__)[:7] == [
            "self",
            "model",
            "api_key",
            "base_url",
            "client",
            "max_retries",
            "timeout",
        ], provider
