"""Lifecycle events: what the executor reports as it goes.

Events are best-effort observations: the executor calls each method synchronously, and an
exception raised by one is logged and ignored, so a broken display never stops a run.
Subclass :class:`Events` and override only what you need: the executor does not even call
the methods a sink leaves alone. The first thirteen callbacks are the core ones (a step's
start, thought, calls and results, context fill, finishing, ...); the rest (the run's start and
end, each model call, each tool call's record and approvals) came later, as no-ops, so that
every existing sink keeps working.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from sp4rk.agent.audit import AuditEntry
    from sp4rk.agent.budget import BudgetReport
    from sp4rk.agent.types import ExecutorResult
    from sp4rk.llm.caller import LLMCaller
    from sp4rk.llm.types import ChatRequest, ChatResponse

_log = logging.getLogger("sp4rk.agent")

#: Why a tool call ended in error: the tool failed, its arguments did not parse, the human
#: rejected it, nobody approved a call that needed it, it repeated an identical call, or its
#: response was cut at the output limit (so it never ran).
ToolErrorType = Literal[
    "tool_error", "parse_error", "rejected", "not_approved", "repeated_call", "response_truncated"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStart:
    """What a run starts with (``Events.run_start``)."""

    llm: LLMCaller
    """The model caller of the run (wrapped in a ``DumpCaller`` when the context dumps)."""
    redact: Callable[[str], str]
    """The credential masking dumps use: pass any text you export through it."""
    first_step: int
    """The number of the run's first step (above 1 for a resumed run)."""
    max_steps: int
    resumed: bool
    """The run continues a checkpoint."""
    step_id: str = ""
    """``RunContext.step_id``: the task's id when the run is a sub-agent's."""
    plan_step_id: str = ""
    """The plan step the executor works on (``Executor.set_plan_context``)."""
    task: str = ""
    """``RunContext.task_description`` (content: a sub-agent's task)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallEnd:
    """One model call of a step, retries after a context overflow included."""

    request: ChatRequest | None
    """The last request sent (``None`` when the call failed before one was built)."""
    response: ChatResponse | None
    """The answer, or ``None`` when the call failed."""
    error: BaseException | None
    attempts: int
    """Requests sent: more than one when the context was compacted after an overflow."""
    duration: float
    """Seconds, from the first request to the answer (compactions included)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEnd:
    """How one tool call ended (``Events.tool_call_end``), whether it ran or not."""

    tool: str
    call_id: str
    arguments: str
    """The arguments that ran (a human may have changed them), as JSON text."""
    observation: str
    """What the model sees: the processed result, or why the call did not run."""
    is_error: bool
    error_type: ToolErrorType | None = None
    approved: bool = False
    """The human-in-the-loop handler allowed the call before it ran."""
    truncated: bool = False
    """The result was cut to fit (the full result stays in the result cache, if any)."""
    cached: bool = False
    """The call read an earlier result back from the result cache (``tool_result_read``)."""


class Events:
    """No-op base for event sinks; every method may be overridden independently."""

    def step_start(self, step_num: int) -> None:
        """A step begins."""

    def thought(self, step_num: int, content: str, reasoning: str) -> None:
        """The model replied with text and/or reasoning."""

    def tool_call(
        self, step_num: int, call_idx: int, tool_name: str, args_preview: str, source: str
    ) -> None:
        """A tool call is about to be checked and run."""

    def tool_result(
        self, step_num: int, call_idx: int, result_len: int, preview: str, is_error: bool
    ) -> None:
        """A tool call produced its observation (``result_len`` in characters)."""

    def step_complete(self, step_num: int, duration: float) -> None:
        """A step ended normally after ``duration`` seconds."""

    def sub_agent_launch(self, step_id: str, description: str) -> None:
        """A sub-agent started."""

    def sub_agent_complete(self, step_id: str, success: bool, duration: float) -> None:
        """A sub-agent ended."""

    def assistant_chunk(self, content: str) -> None:
        """A piece of the model's reply text arrived."""

    def assistant_done(self, content: str, input_tokens: int, output_tokens: int) -> None:
        """The model's reply is complete."""

    def context_fill(
        self, fill_percent: float, used_tokens: int, max_tokens: int, status: str, step_id: str
    ) -> None:
        """The context fill was checked after a step."""

    def context_compaction(self, before_percent: float, after_percent: float, step_id: str) -> None:
        """The context was compacted."""

    def finishing(self, step_num: int, summary: str) -> None:
        """The model is finishing with ``summary`` (before the gates decide)."""

    def executor_diagnostic(self, step_num: int, event: str, details: dict[str, Any]) -> None:
        """A named diagnostic: nudges, breaker trips, gate decisions, compaction retries."""

    def run_start(self, run: RunStart) -> None:
        """``Executor.run`` begins.

        The run's events fire in the task that awaits ``run``, or in the tasks it starts for
        concurrent tool calls (which inherit its context variables), never in another run's.
        """

    def run_end(self, result: ExecutorResult | None, error: BaseException | None) -> None:
        """``Executor.run`` returns ``result``, or raises ``error`` (cancellation included)."""

    def model_call_start(self, step_num: int) -> None:
        """The step's model call begins."""

    def model_call_end(self, step_num: int, call: ModelCallEnd) -> None:
        """The step's model call answered or failed."""

    def tool_execute_start(self, step_num: int, call_idx: int) -> None:
        """An approved call starts running, in the task that runs it.

        Calls of one response that run concurrently each run in a task of their own, so a
        context variable set here holds for that call's tool until ``tool_execute_end``.
        """

    def tool_execute_end(self, step_num: int, call_idx: int) -> None:
        """The tool returned (or raised, or was cancelled)."""

    def tool_call_end(self, step_num: int, call_idx: int, call: ToolCallEnd) -> None:
        """A call's full record, right after its ``tool_result``."""

    def approval(self, step_num: int, call_idx: int, entry: AuditEntry) -> None:
        """An approval decision on a call that needed one (what goes to the audit log)."""

    def usage_update(self, step_num: int, report: BudgetReport) -> None:
        """A model call was counted: what the run has spent so far, and its limits.

        ``report.summary()`` is a status line; ``report.describe()`` each limit's use.
        """


NoopEvents = Events

#: Every callback, in order: the thirteen core ones, then the lifecycle ones.
EVENT_NAMES: tuple[str, ...] = tuple(
    name for name, value in vars(Events).items() if not name.startswith("_") and callable(value)
)
_BASE = {name: vars(Events)[name] for name in EVENT_NAMES}
#: Callbacks a sink that does not subclass ``Events`` may lack (added after sp4rk 0.1).
_OPTIONAL = frozenset(EVENT_NAMES[EVENT_NAMES.index("run_start") :])


class RecordingEvents(Events):
    """Records every event as ``(name, args)``, for tests and debugging."""

    def __init__(self) -> None:
        self.records: list[tuple[str, tuple[Any, ...]]] = []

    def names(self) -> list[str]:
        """Event names in order."""
        return [name for name, _ in self.records]

    def of(self, name: str) -> list[tuple[Any, ...]]:
        """Arguments of every event called ``name``."""
        return [args for n, args in self.records if n == name]

    def diagnostics(self, event: str | None = None) -> list[dict[str, Any]]:
        """Details of every diagnostic (named ``event``, if given)."""
        return [a[2] for a in self.of("executor_diagnostic") if event is None or a[1] == event]


class CompositeEvents(Events):
    """Sends one run's events to several sinks (a live view and tracing, say), in order.

    A sink that raises is logged and skipped: the other sinks still get the event, and the
    run goes on. Each sink is called only for the callbacks it overrides.

    Raises:
        TypeError: a sink whose methods the executor could not call (see ``check_events``).
    """

    def __init__(self, *events: Events) -> None:
        for sink in events:
            check_events(sink)
        self.events = events
        self._handlers = {
            name: tuple(getattr(sink, name) for sink in events if name in listened(sink))
            for name in EVENT_NAMES
        }
        self.listening = frozenset(name for name, fns in self._handlers.items() if fns)
        """The callbacks at least one sink overrides."""

    def _fan_out(self, name: str, args: tuple[Any, ...]) -> None:
        for handler in self._handlers[name]:
            try:
                handler(*args)
            except Exception:
                _log.exception("event sink %r raised in %s; ignoring", handler.__self__, name)


def listened(events: object) -> frozenset[str]:
    """The callbacks ``events`` overrides; the executor skips the others without a call."""
    if isinstance(events, CompositeEvents):
        return events.listening
    cls = type(events)
    return frozenset(
        name for name in EVENT_NAMES if getattr(cls, name, _BASE[name]) is not _BASE[name]
    )


def _recorder(name: str) -> Callable[..., None]:
    def record(self: RecordingEvents, *args: Any) -> None:
        self.records.append((name, args))

    return record


def _forwarder(name: str) -> Callable[..., None]:
    def forward(self: CompositeEvents, *args: Any) -> None:
        self._fan_out(name, args)

    return forward


def _define(cls: type[Events], make: Callable[[str], Callable[..., None]]) -> None:
    """Give ``cls`` one method per callback, made by ``make(name)``."""
    for name in EVENT_NAMES:
        method = make(name)
        method.__name__, method.__qualname__ = name, f"{cls.__name__}.{name}"
        method.__doc__ = _BASE[name].__doc__
        setattr(cls, name, method)


_define(RecordingEvents, _recorder)
_define(CompositeEvents, _forwarder)


def check_events(events: object) -> None:
    """Refuse an event sink whose methods the executor could not call.

    Events are called synchronously with positional arguments; an ``async def`` method would
    never run, and a wrong parameter list would fail only inside the run (and be ignored).

    Raises:
        TypeError: naming the method and how to fix it.
    """
    for name, base in _BASE.items():
        method = getattr(events, name, None)
        if method is None:
            if isinstance(events, Events) or name in _OPTIONAL:
                continue
            raise TypeError(
                f"{type(events).__name__} has no {name}(): subclass sp4rk.agent.Events and "
                "override only the events you need"
            )
        _check_callable(events, name, method, base, want_async=False)


def _check_callable(owner: object, name: str, method: Any, base: Any, *, want_async: bool) -> None:
    """``method`` must be callable like ``base`` (same positional arity) and (a)sync as asked."""
    what = f"{type(owner).__name__}.{name}"
    if not callable(method):
        raise TypeError(f"{what} is not callable")
    if inspect.iscoroutinefunction(method) != want_async:
        kind = "async def" if want_async else "a plain def (events are called synchronously)"
        raise TypeError(f"{what} must be {kind}")
    arity = len(inspect.signature(base).parameters) - 1  # without self
    try:
        inspect.signature(method).bind(*([None] * arity))
    except TypeError as exc:
        expected = ", ".join(list(inspect.signature(base).parameters)[1:])
        raise TypeError(f"{what} must accept ({expected}): {exc}") from None
    except ValueError:  # a builtin without a signature: nothing to check
        return
