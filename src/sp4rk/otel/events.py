"""``OpenTelemetryEvents``: an event sink that turns runs into GenAI spans, events and metrics.

Spans, per the OpenTelemetry GenAI semantic conventions:

- ``invoke_agent {agent_name}``: the run; exit reason, finished flag, steps and token totals
  when it ends, context fill updated after every step; every executor diagnostic (nudges,
  breaker trips and reprieves, gate rejections, live messages, verify-on-edit) and every
  compaction as a span event;
- ``chat {model}``: one per step's model call, retries after a context overflow and the
  reactive compaction between them included (their events land on it);
- ``execute_tool {tool}``: one per tool call, from its announcement to its observation,
  approval decisions as events; it is the current span while the tool runs, so a
  sub-agent the tool starts is traced under it.

The sink keeps each run's state in a context variable set at ``run_start``, so one instance
serves any number of concurrent or nested runs (sub-agents included). Every string it
exports passes through the run's credential masking (``RunStart.redact``, the one dumps
use); prompts, completions, tool arguments and results are exported only with
``capture_content=True``.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from sp4rk import __version__
from sp4rk.agent import (
    AuditEntry,
    BreakerSet,
    Events,
    ExecutorResult,
    ExitReason,
    ModelCallEnd,
    RunStart,
    ToolCallEnd,
)
from sp4rk.llm.cassette import redactor_for
from sp4rk.llm.router import split_model
from sp4rk.otel._messages import PromptEncoder, finish_reason, output_messages

#: The semantic conventions version the attribute names follow.
SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
#: Exit reasons of a run that did what it was asked (or was paused to resume later).
_OK_EXITS = frozenset({ExitReason.FINISHED, ExitReason.IMPLICIT_FINISH, ExitReason.PAUSED})
#: Diagnostic details that carry content (a verify runner's output): exported only on capture.
_CONTENT_DETAILS = frozenset({"note"})
#: The conventions' advisory buckets for ``gen_ai.client.token.usage`` and ``...duration``.
_TOKEN_BUCKETS = [4**i for i in range(14)]
_DURATION_BUCKETS = [0.01 * 2**i for i in range(14)]

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
AGENT_NAME = "gen_ai.agent.name"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
ERROR_TYPE = "error.type"

Redact = Callable[[str], str]
_mask_key_shaped: Redact = redactor_for(None)


def _breaker_diagnostics() -> dict[str, tuple[str, str]]:
    """Each breaker diagnostic: its event name → (breaker, ``"nudge"`` or ``"abort"``)."""
    table: dict[str, tuple[str, str]] = {}
    for breaker in BreakerSet():
        trip = breaker.trip("")
        table[trip.nudge_event] = (breaker.name, "nudge")
        table[trip.abort_event] = (breaker.name, "abort")
    return table


_BREAKER_DIAGNOSTICS = _breaker_diagnostics()


@dataclass(slots=True, eq=False)
class _Run:
    """What the sink tracks of one run."""

    span: Span
    redact: Redact
    provider: str
    model: str
    recording: bool
    """The run's span records (else its trace is sampled out: no child spans, metrics only)."""
    step: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    chat: Span | None = None
    chat_token: Token[Context] | None = None
    tools: dict[tuple[int, int], Span] = field(default_factory=dict)
    announced: dict[tuple[int, int], str] = field(default_factory=dict)
    """The tool name each open tool span was started with (a cached read shows its tool)."""
    running: dict[tuple[int, int], Token[Context]] = field(default_factory=dict)
    prompts: PromptEncoder | None = None
    """Encodes the prompts for content capture (``None`` without it)."""
    fill: dict[str, Any] = field(default_factory=dict)
    """The latest context fill, as attributes (on each model call, and the run at its end)."""
    otel_token: Token[Context] | None = None
    """Undoes ``run_start``'s change of the current OpenTelemetry context."""
    token: Token[_Run | None] | None = None
    """Undoes ``run_start``'s change of the sink's current run."""

    def innermost(self) -> Span:
        """The model call in progress, else the run: where diagnostics go."""
        return self.chat if self.chat is not None else self.span


class OpenTelemetryEvents(Events):
    """Every run as OpenTelemetry GenAI traces and metrics.

    Args:
        tracer_provider: where spans go (default: the global one, set by the application
            or by ``configure_from_environment``).
        meter_provider: where metrics go (default: the global one).
        capture_content: also export prompts, completions, tool arguments and results
            (masked like dumps). Off by default: they may hold anything the model read.
        agent_name: ``gen_ai.agent.name``, in the run span's name and every metric.

    Metrics: ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``
    (histograms, per model call), ``sp4rk.agent.runs`` (runs by exit reason) and
    ``sp4rk.agent.breaker.trips`` (trips by breaker and action).

    Raises:
        TypeError: a provider that is not an OpenTelemetry provider, or a non-bool
            ``capture_content``.
        ValueError: an empty ``agent_name``.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        capture_content: bool = False,
        agent_name: str = "sp4rk",
        conversation_id: str = "",
    ) -> None:
        _check_provider(tracer_provider, "tracer_provider", "get_tracer", "TracerProvider")
        _check_provider(meter_provider, "meter_provider", "get_meter", "MeterProvider")
        if not isinstance(capture_content, bool):
            raise TypeError(f"capture_content must be a bool, got {capture_content!r}")
        check_agent_name(agent_name)
        self.agent_name = agent_name
        self.capture_content = capture_content
        self.conversation_id = conversation_id
        """Your id of the run (``gen_ai.conversation.id`` on its span): the ``sp4rk``
        command sets its run id, so that a trace leads to ``sp4rk show ID``."""
        self._tracer = trace.get_tracer("sp4rk", __version__, tracer_provider, SCHEMA_URL)
        meter = metrics.get_meter("sp4rk", __version__, meter_provider, SCHEMA_URL)
        self._token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used per model call, by token type",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of each model call, retries included",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._runs = meter.create_counter(
            "sp4rk.agent.runs", unit="{run}", description="Agent runs, by exit reason"
        )
        self._trips = meter.create_counter(
            "sp4rk.agent.breaker.trips",
            unit="{trip}",
            description="Circuit-breaker trips, by breaker and action (nudge or abort)",
        )
        self._current: ContextVar[_Run | None] = ContextVar("sp4rk_otel_run", default=None)

    # --- the run --------------------------------------------------------------------------

    def run_start(self, run: RunStart) -> None:  # noqa: D102
        provider, model = describe_model(run.llm)
        attributes: dict[str, Any] = {
            OPERATION: "invoke_agent",
            AGENT_NAME: self.agent_name,
            PROVIDER: provider,
            "sp4rk.run.first_step": run.first_step,
            "sp4rk.run.max_steps": run.max_steps,
            "sp4rk.run.resumed": run.resumed,
        }
        if model:
            attributes[REQUEST_MODEL] = model
        if self.conversation_id:
            attributes["gen_ai.conversation.id"] = self.conversation_id
        if run.step_id:
            attributes["sp4rk.run.step_id"] = run.redact(run.step_id)
        if run.plan_step_id:
            attributes["sp4rk.plan.step_id"] = run.redact(run.plan_step_id)
        if self.capture_content and run.task:
            attributes["sp4rk.run.task"] = run.redact(run.task)
        span = self._tracer.start_span(
            f"invoke_agent {self.agent_name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        state = _Run(span, run.redact, provider, model, span.is_recording())
        if self.capture_content:
            state.prompts = PromptEncoder(run.redact)
        state.otel_token = otel_context.attach(trace.set_span_in_context(span))
        state.token = self._current.set(state)

    def run_end(self, result: ExecutorResult | None, error: BaseException | None) -> None:  # noqa: D102
        state = self._current.get()
        if state is None:
            return
        for span in [*state.tools.values(), *([state.chat] if state.chat else [])]:
            span.set_status(Status(StatusCode.ERROR, "the run ended first"))
            span.end()
        span = state.span
        attributes: dict[str, Any] = {
            **state.fill,
            "sp4rk.run.steps": state.model_calls,
            INPUT_TOKENS: state.input_tokens,
            OUTPUT_TOKENS: state.output_tokens,
            "sp4rk.run.finished": result is not None and result.finished,
        }
        outcome = {AGENT_NAME: self.agent_name}
        if result is not None:
            reason = result.exit_reason
            attributes["sp4rk.run.exit_reason"] = reason.value
            attributes["sp4rk.run.paused"] = result.paused
            if self.capture_content:
                attributes["sp4rk.run.output"] = state.redact(result.output)
            outcome["sp4rk.run.exit_reason"] = reason.value
            if reason not in _OK_EXITS:
                span.set_status(Status(StatusCode.ERROR, f"stopped: {reason.value}"))
                attributes[ERROR_TYPE] = outcome[ERROR_TYPE] = reason.value
        elif error is not None:
            outcome["sp4rk.run.exit_reason"] = "error"
            outcome[ERROR_TYPE] = _record_error(span, error, state.redact)
        span.set_attributes(attributes)
        self._runs.add(1, outcome)
        span.end()
        if state.otel_token is not None:
            otel_context.detach(state.otel_token)
        if state.token is not None:
            with contextlib.suppress(ValueError):  # another context than it started in
                self._current.reset(state.token)

    def context_fill(  # noqa: D102
        self, fill_percent: float, used_tokens: int, max_tokens: int, status: str, step_id: str
    ) -> None:
        state = self._current.get()
        if state is None:
            return
        # Kept, not set: a span is exported once, when it ends, so the run's span gets the
        # last fill then, and every model call the fill its prompt started from.
        state.fill = {
            "sp4rk.context.fill_percent": fill_percent,
            "sp4rk.context.used_tokens": used_tokens,
            "sp4rk.context.max_tokens": max_tokens,
            "sp4rk.context.status": status,
        }

    def context_compaction(self, before_percent: float, after_percent: float, step_id: str) -> None:  # noqa: D102
        state = self._current.get()
        if state is None or not state.recording:
            return
        state.innermost().add_event(
            "sp4rk.context_compaction",
            {
                "sp4rk.step": state.step,
                "before_percent": before_percent,
                "after_percent": after_percent,
            },
        )

    def executor_diagnostic(self, step_num: int, event: str, details: dict[str, Any]) -> None:  # noqa: D102
        state = self._current.get()
        if state is None:
            return
        breaker = _BREAKER_DIAGNOSTICS.get(event)
        trip: dict[str, str] = {}
        if breaker is not None:
            trip = {"sp4rk.breaker": breaker[0], "sp4rk.breaker.action": breaker[1]}
            self._trips.add(1, {AGENT_NAME: self.agent_name, **trip})
        if not state.recording:
            return
        attributes: dict[str, Any] = {"sp4rk.step": step_num}
        for key, value in details.items():
            if key in _CONTENT_DETAILS and not self.capture_content:
                continue
            exported = _attribute(value, state.redact)
            if exported is not None:
                attributes[key] = exported
        state.innermost().add_event(f"sp4rk.{event}", {**attributes, **trip})

    # --- model calls ----------------------------------------------------------------------

    def model_call_start(self, step_num: int) -> None:  # noqa: D102
        state = self._current.get()
        if state is None:
            return
        state.step = step_num
        if not state.recording:
            return
        attributes: dict[str, Any] = {
            OPERATION: "chat",
            PROVIDER: state.provider,
            "sp4rk.step": step_num,
            **state.fill,
        }
        if state.model:
            attributes[REQUEST_MODEL] = state.model
        span = self._tracer.start_span(
            f"chat {state.model}" if state.model else "chat",
            context=trace.set_span_in_context(state.span),
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )
        state.chat = span
        state.chat_token = otel_context.attach(trace.set_span_in_context(span))

    def model_call_end(self, step_num: int, call: ModelCallEnd) -> None:  # noqa: D102
        state = self._current.get()
        if state is None:
            return
        span, state.chat = state.chat, None
        if state.chat_token is not None:
            otel_context.detach(state.chat_token)
            state.chat_token = None
        metric: dict[str, Any] = {OPERATION: "chat", PROVIDER: state.provider}
        if state.model:
            metric[REQUEST_MODEL] = state.model
        attributes: dict[str, Any] = {}
        response = call.response
        if response is not None:
            state.model_calls += 1
            if response.model:
                metric[RESPONSE_MODEL] = attributes[RESPONSE_MODEL] = state.redact(response.model)
            usage = response.usage
            if usage.total_tokens > 0:
                state.input_tokens += usage.input_tokens
                state.output_tokens += usage.output_tokens
                attributes[INPUT_TOKENS] = usage.input_tokens
                attributes[OUTPUT_TOKENS] = usage.output_tokens
                self._token_usage.record(
                    usage.input_tokens, {**metric, "gen_ai.token.type": "input"}
                )
                self._token_usage.record(
                    usage.output_tokens, {**metric, "gen_ai.token.type": "output"}
                )
        if span is not None:
            self._end_chat(span, call, attributes, state)
        if call.error is not None:
            metric[ERROR_TYPE] = _error_type(call.error)
        self._duration.record(call.duration, metric)

    def _end_chat(
        self, span: Span, call: ModelCallEnd, attributes: dict[str, Any], state: _Run
    ) -> None:
        """Finish a model call's span: request, response and error on top of ``attributes``."""
        if call.attempts > 1:
            attributes["sp4rk.model_call.attempts"] = call.attempts
        request, response = call.request, call.response
        if request is not None:
            if request.max_tokens > 0:
                attributes["gen_ai.request.max_tokens"] = request.max_tokens
            if state.prompts is not None:
                attributes.update(state.prompts.attributes(request.messages))
        if response is not None:
            if response.stop_reason:
                attributes["gen_ai.response.finish_reasons"] = [finish_reason(response.stop_reason)]
            if self.capture_content:
                attributes["gen_ai.output.messages"] = output_messages(response, state.redact)
        span.set_attributes(attributes)
        if call.error is not None:
            _record_error(span, call.error, state.redact)
        span.end()

    # --- tool calls -----------------------------------------------------------------------

    def tool_call(  # noqa: D102
        self, step_num: int, call_idx: int, tool_name: str, args_preview: str, source: str
    ) -> None:
        state = self._current.get()
        if state is None or not state.recording:
            return
        tool = state.redact(tool_name)
        span = self._tool_span(state, step_num, call_idx, tool)
        if source not in ("", "core"):
            span.set_attribute("sp4rk.tool.source", state.redact(source))
        state.tools[step_num, call_idx] = span
        state.announced[step_num, call_idx] = tool

    def tool_execute_start(self, step_num: int, call_idx: int) -> None:  # noqa: D102
        state = self._current.get()
        span = None if state is None else state.tools.get((step_num, call_idx))
        if state is not None and span is not None:
            token = otel_context.attach(trace.set_span_in_context(span))
            state.running[step_num, call_idx] = token

    def tool_execute_end(self, step_num: int, call_idx: int) -> None:  # noqa: D102
        state = self._current.get()
        token = None if state is None else state.running.pop((step_num, call_idx), None)
        if token is not None:
            otel_context.detach(token)

    def approval(self, step_num: int, call_idx: int, entry: AuditEntry) -> None:  # noqa: D102
        state = self._current.get()
        if state is None or not state.recording:
            return
        attributes = {
            "sp4rk.approval.decision": entry.decision,
            "sp4rk.approval.decided_by": state.redact(entry.decided_by),
            "sp4rk.approval.reason": state.redact(entry.reason),
            "sp4rk.approval.arguments_sha256": entry.arguments_sha256,
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = state.redact(entry.arguments)
        span = state.tools.get((step_num, call_idx), state.span)
        span.set_attribute("sp4rk.tool.approval", entry.decision)
        span.add_event("sp4rk.approval", attributes)

    def tool_call_end(self, step_num: int, call_idx: int, call: ToolCallEnd) -> None:  # noqa: D102
        state = self._current.get()
        if state is None or not state.recording:
            return
        tool = state.redact(call.tool)  # a model may name a tool that does not exist
        span = state.tools.pop((step_num, call_idx), None)
        if span is None:  # ``finish`` is not announced: its span is its record
            span = self._tool_span(state, step_num, call_idx, tool)
        attributes: dict[str, Any] = {"sp4rk.tool.result_chars": len(call.observation)}
        if tool != state.announced.pop((step_num, call_idx), tool):
            span.update_name(f"execute_tool {tool}")  # a cached read announced as its tool
            attributes["gen_ai.tool.name"] = tool
        if call.call_id:
            attributes["gen_ai.tool.call.id"] = state.redact(call.call_id)
        # Flags only when set: fewer attributes, and an absent flag reads as false.
        for flag, value in (
            ("sp4rk.tool.approved", call.approved),
            ("sp4rk.tool.truncated", call.truncated),
            ("sp4rk.tool.cached", call.cached),
        ):
            if value:
                attributes[flag] = True
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = state.redact(call.arguments)
            attributes["gen_ai.tool.call.result"] = state.redact(call.observation)
        if call.is_error:
            kind = call.error_type or "tool_error"
            span.set_status(Status(StatusCode.ERROR, kind))
            attributes[ERROR_TYPE] = kind
        span.set_attributes(attributes)
        span.end()

    def _tool_span(self, state: _Run, step_num: int, call_idx: int, tool: str) -> Span:
        return self._tracer.start_span(
            f"execute_tool {tool}",
            context=trace.set_span_in_context(state.span),
            kind=SpanKind.INTERNAL,
            attributes={
                OPERATION: "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.type": "function",
                "sp4rk.step": step_num,
                "sp4rk.tool.call_index": call_idx,
            },
        )

    # --- sub-agents (reported by ``run_sub_agent`` where it is called) --------------------

    def sub_agent_launch(self, step_id: str, description: str) -> None:  # noqa: D102
        redact = self._redact()
        attributes = {"sp4rk.sub_agent.step_id": redact(step_id)}
        if self.capture_content:
            attributes["sp4rk.sub_agent.description"] = redact(description)
        trace.get_current_span().add_event("sp4rk.sub_agent_launch", attributes)

    def sub_agent_complete(self, step_id: str, success: bool, duration: float) -> None:  # noqa: D102
        trace.get_current_span().add_event(
            "sp4rk.sub_agent_complete",
            {
                "sp4rk.sub_agent.step_id": self._redact()(step_id),
                "sp4rk.sub_agent.success": success,
                "sp4rk.sub_agent.duration_s": duration,
            },
        )

    def _redact(self) -> Redact:
        state = self._current.get()
        return _mask_key_shaped if state is None else state.redact


def describe_model(llm: object) -> tuple[str, str]:
    """``(gen_ai.provider.name, gen_ai.request.model)`` of a caller, through its decorators.

    A ``Router`` names the provider its model string's prefix names; a caller that is not a
    provider (a test double) is named by its class.
    """
    for _ in range(16):  # DumpCaller, LoggingLLMCaller, ... keep the caller they wrap in .inner
        inner = getattr(llm, "inner", None)
        if inner is None:
            break
        llm = inner
    name, model = getattr(llm, "name", None), getattr(llm, "model", None)
    provider = name if isinstance(name, str) and name else type(llm).__name__
    model = model if isinstance(model, str) else ""
    if provider == "router":
        prefix, model = split_model(model)
        provider = prefix or provider
    return provider, model


def _error_type(error: BaseException) -> str:
    """``error.type`` of an exception: its fully qualified class name."""
    kind, module = type(error).__qualname__, type(error).__module__
    return kind if module == "builtins" else f"{module}.{kind}"


def _record_error(span: Span, error: BaseException, redact: Redact) -> str:
    """Mark ``span`` failed with ``error`` (masked); return its ``error.type``."""
    kind = _error_type(error)
    message = redact(str(error))
    span.set_status(Status(StatusCode.ERROR, message or kind))
    span.set_attribute(ERROR_TYPE, kind)
    span.add_event(
        "exception",
        {
            "exception.type": kind,
            "exception.message": message,
            "exception.stacktrace": redact("".join(traceback.format_exception(error))),
        },
    )
    return kind


def _attribute(value: object, redact: Redact) -> Any:
    """``value`` as an attribute value (strings masked), or ``None`` to leave it out."""
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return [redact(v) for v in value]
    if value is None:
        return None
    return redact(str(value))


def check_agent_name(agent_name: object) -> None:
    """Refuse an empty or non-string agent name.

    Raises:
        ValueError: naming what was given.
    """
    if not isinstance(agent_name, str) or not agent_name.strip():
        raise ValueError(f"agent_name must be a non-empty string, got {agent_name!r}")


def _check_provider(provider: object, what: str, method: str, kind: str) -> None:
    if provider is not None and not callable(getattr(provider, method, None)):
        raise TypeError(
            f"{what} must be an OpenTelemetry {kind} (from opentelemetry.sdk, say), "
            f"got {type(provider).__name__}"
        )
