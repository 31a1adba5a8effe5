"""Lifecycle events: what the executor reports as it goes.

Events are best-effort observations: the executor calls each method synchronously, and an
exception raised by one is logged and ignored, so a broken display never stops a run.
Subclass :class:`Events` and override only what you need.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sp4rk.agent.budget import BudgetReport

#: Events added after the first contract: a sink that does not subclass ``Events`` may lack
#: them (it then simply does not receive them).
ADDED_EVENTS = frozenset({"usage_update"})


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

    def usage_update(self, step_num: int, report: BudgetReport) -> None:
        """A model call was counted: what the run has spent so far, and its limits.

        ``report.summary()`` is a status line; ``report.describe()`` each limit's use.
        """


NoopEvents = Events


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

    def step_start(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("step_start", args))

    def thought(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("thought", args))

    def tool_call(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("tool_call", args))

    def tool_result(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("tool_result", args))

    def step_complete(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("step_complete", args))

    def sub_agent_launch(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("sub_agent_launch", args))

    def sub_agent_complete(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("sub_agent_complete", args))

    def assistant_chunk(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("assistant_chunk", args))

    def assistant_done(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("assistant_done", args))

    def context_fill(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("context_fill", args))

    def context_compaction(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("context_compaction", args))

    def finishing(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("finishing", args))

    def executor_diagnostic(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("executor_diagnostic", args))

    def usage_update(self, *args: Any) -> None:  # noqa: D102
        self.records.append(("usage_update", args))


def check_events(events: object) -> None:
    """Refuse an event sink whose methods the executor could not call.

    Events are called synchronously with positional arguments; an ``async def`` method would
    never run, and a wrong parameter list would fail only inside the run (and be ignored).

    Raises:
        TypeError: naming the method and how to fix it.
    """
    for name, base in vars(Events).items():
        if name.startswith("_") or not callable(base):
            continue
        method = getattr(events, name, None)
        if method is None:
            if isinstance(events, Events) or name in ADDED_EVENTS:
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
