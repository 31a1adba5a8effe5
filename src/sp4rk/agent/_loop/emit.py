"""Events as the loop fires them: typed, best-effort, and free when nobody listens.

Each method mirrors one of :class:`~sp4rk.agent.Events`, so mypy checks every call the loop
makes. A sink's exception is logged and ignored (events never stop a run); methods the sink
inherits unchanged from the no-op base are skipped without a call, and the records some
callbacks take are built only when the sink overrides them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sp4rk.agent.audit import AuditEntry
from sp4rk.agent.events import (
    Events,
    ModelCallEnd,
    RunStart,
    ToolCallEnd,
    ToolErrorType,
    listened,
)
from sp4rk.agent.types import ExecutorResult
from sp4rk.llm.types import ChatRequest, ChatResponse, ToolCall

if TYPE_CHECKING:
    from sp4rk.agent.budget import BudgetReport

Log = logging.Logger | logging.LoggerAdapter[Any]


class EventProxy:
    """Forwards typed event calls to a sink, safely."""

    __slots__ = ("_live", "_log", "_sink")

    def __init__(self, sink: Events, log: Log) -> None:
        self._sink = sink
        self._log = log
        self._live = listened(sink)

    def listens(self, name: str) -> bool:
        """Whether the sink overrides the callback ``name`` (build costly arguments only then)."""
        return name in self._live

    def _fire(self, name: str, *args: Any) -> None:
        if name not in self._live:
            return
        try:
            getattr(self._sink, name)(*args)
        except Exception:
            self._log.exception("event handler %s raised; ignoring", name)

    def step_start(self, step_num: int) -> None:
        self._fire("step_start", step_num)

    def thought(self, step_num: int, content: str, reasoning: str) -> None:
        self._fire("thought", step_num, content, reasoning)

    def tool_call(
        self, step_num: int, call_idx: int, tool_name: str, args_preview: str, source: str
    ) -> None:
        self._fire("tool_call", step_num, call_idx, tool_name, args_preview, source)

    def tool_done(
        self,
        step_num: int,
        call_idx: int,
        call: ToolCall,
        observation: str,
        *,
        error: ToolErrorType | None = None,
        arguments: str | None = None,
        approved: bool = False,
        truncated: bool = False,
        cached: bool = False,
    ) -> None:
        """``tool_result``, then ``tool_call_end`` with the call's record.

        ``error`` says why the call ended in error (``None``: it succeeded); ``arguments``
        are those that ran when a human changed them.
        """
        is_error = error is not None
        self._fire("tool_result", step_num, call_idx, len(observation), observation, is_error)
        if "tool_call_end" in self._live:
            record = ToolCallEnd(
                tool=call.name,
                call_id=call.id,
                arguments=call.input if arguments is None else arguments,
                observation=observation,
                is_error=is_error,
                error_type=error,
                approved=approved,
                truncated=truncated,
                cached=cached,
            )
            self._fire("tool_call_end", step_num, call_idx, record)

    def step_complete(self, step_num: int, duration: float) -> None:
        self._fire("step_complete", step_num, duration)

    def assistant_chunk(self, content: str) -> None:
        self._fire("assistant_chunk", content)

    def assistant_done(self, content: str, input_tokens: int, output_tokens: int) -> None:
        self._fire("assistant_done", content, input_tokens, output_tokens)

    def context_fill(
        self, fill_percent: float, used_tokens: int, max_tokens: int, status: str, step_id: str
    ) -> None:
        self._fire("context_fill", fill_percent, used_tokens, max_tokens, status, step_id)

    def context_compaction(self, before_percent: float, after_percent: float, step_id: str) -> None:
        self._fire("context_compaction", before_percent, after_percent, step_id)

    def finishing(self, step_num: int, summary: str) -> None:
        self._fire("finishing", step_num, summary)

    def executor_diagnostic(self, step_num: int, event: str, details: dict[str, Any]) -> None:
        self._fire("executor_diagnostic", step_num, event, details)

    def run_start(self, run: RunStart) -> None:
        self._fire("run_start", run)

    def run_end(self, result: ExecutorResult | None, error: BaseException | None) -> None:
        self._fire("run_end", result, error)

    def model_call_start(self, step_num: int) -> None:
        self._fire("model_call_start", step_num)

    def model_call_end(
        self,
        step_num: int,
        request: ChatRequest | None,
        response: ChatResponse | None,
        error: BaseException | None,
        *,
        attempts: int,
        duration: float,
    ) -> None:
        if "model_call_end" in self._live:
            record = ModelCallEnd(
                request=request,
                response=response,
                error=error,
                attempts=attempts,
                duration=duration,
            )
            self._fire("model_call_end", step_num, record)

    def tool_execute_start(self, step_num: int, call_idx: int) -> None:
        self._fire("tool_execute_start", step_num, call_idx)

    def tool_execute_end(self, step_num: int, call_idx: int) -> None:
        self._fire("tool_execute_end", step_num, call_idx)

    def approval(self, step_num: int, call_idx: int, entry: AuditEntry) -> None:
        self._fire("approval", step_num, call_idx, entry)

    def usage_update(self, step_num: int, report: BudgetReport) -> None:
        self._fire("usage_update", step_num, report)
