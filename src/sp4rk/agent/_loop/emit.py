"""Events as the loop fires them: typed, best-effort, and free when nobody listens.

Each method mirrors one of :class:`~sp4rk.agent.Events`, so mypy checks every call the loop
makes. A sink's exception is logged and ignored (events never stop a run); methods the sink
inherits unchanged from the no-op base are skipped without a call.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sp4rk.agent.events import Events

if TYPE_CHECKING:
    from sp4rk.agent.budget import BudgetReport

Log = logging.Logger | logging.LoggerAdapter[Any]


class EventProxy:
    """Forwards typed event calls to a sink, safely."""

    __slots__ = ("_live", "_log", "_sink")

    def __init__(self, sink: Events, log: Log) -> None:
        self._sink = sink
        self._log = log
        cls = type(sink)
        self._live = frozenset(
            name
            for name, base in vars(Events).items()
            if not name.startswith("_")
            and (own := getattr(cls, name, None)) is not base
            and (own is not None or hasattr(sink, name))
        )

    def wants(self, name: str) -> bool:
        """Whether the sink receives event ``name`` (to skip building costly arguments)."""
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

    def tool_result(
        self, step_num: int, call_idx: int, result_len: int, preview: str, is_error: bool
    ) -> None:
        self._fire("tool_result", step_num, call_idx, result_len, preview, is_error)

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

    def usage_update(self, step_num: int, report: BudgetReport) -> None:
        self._fire("usage_update", step_num, report)
