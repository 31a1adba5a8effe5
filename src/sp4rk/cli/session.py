"""Driving one run, new or resumed, to an exit status — with every step saved as it happens.

The executor gets the runs store as its journal (each boundary committed before the next
model call, each tool call recorded before and after it runs), the terminal as its human
(approvals, Ctrl-C, typed messages), and the view as its event sink. However the run ends —
finished, paused, stopped by a limit, cancelled, or failed — the store says so.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from sp4rk._internal.proc import allowlisted_environment
from sp4rk.agent import (
    Budget,
    Checkpoint,
    CompositeEvents,
    Events,
    Executor,
    ExecutorResult,
    ExitReason,
    JsonlAuditLog,
    command_verify_runner,
)
from sp4rk.cli.config import Settings
from sp4rk.cli.errors import (
    EXIT_ERROR,
    EXIT_FINISHED,
    EXIT_PAUSED,
    EXIT_UNFINISHED,
    CommandError,
)
from sp4rk.cli.models import Model
from sp4rk.cli.prompts import TerminalApprovals
from sp4rk.cli.terminal import Interrupts, LineInput
from sp4rk.cli.toolset import NO_BYTECODE, builtin_registry, mcp_tools
from sp4rk.cli.view import LiveStatus, View, ViewEvents
from sp4rk.llm import LLMError, ToolDefinition
from sp4rk.memory import ContextWindow
from sp4rk.store import RunRecord, SQLiteRunStore, StoreError, StoreJournal, Usage
from sp4rk.store.records import RunStatus
from sp4rk.tools import Registry, RunContext

_log = logging.getLogger("sp4rk.cli")


@dataclass(slots=True, kw_only=True)
class Launch:
    """A run ready to go: claimed in the store, configured, its model built."""

    store: SQLiteRunStore
    record: RunRecord
    checkpoint: Checkpoint | None
    """The steps and state to resume from (``None`` for a new run)."""
    settings: Settings
    model: Model
    view: View
    interactive: bool
    """The terminal can answer questions and send messages."""
    tracer: Events | None = None
    """Where the run's traces and metrics go (``--otel``; see :mod:`sp4rk.cli.tracing`)."""

    def budget(self) -> Budget:
        """What the run may spend: its limits, priced by the run's price table."""
        return self.settings.budget(self.model.prices(self.settings.price))


def audit_path(store_path: Path, run_id: str) -> Path:
    """The run's approval audit log, next to the store."""
    return store_path.parent / "audit" / f"{run_id}.jsonl"


def announce(launch: Launch, *, config_source: str = "") -> None:
    """The opening lines: the run's id, its model, and anything the human must know."""
    record, settings, view = launch.record, launch.settings, launch.view
    view.emit(
        "run",
        run_id=record.id,
        task=record.task,
        model=record.model,
        workspace=record.workspace,
        store=str(launch.store.path),
        resumed=launch.checkpoint is not None,
        approve=settings.approve,
        verify=settings.verify,
        max_steps=settings.max_steps,
        budget={str(k): v for k, v in launch.budget().limits().items()},
    )
    if launch.model.note:
        view.emit("warning", text=launch.model.note)
    if config_source:
        view.emit("notice", text=f"configuration from {config_source}")
    if settings.approve == "auto":
        view.emit(
            "warning",
            text="--approve auto: every call that needs approval will run WITHOUT asking you: "
            "file writes, flagged shell commands, and risky calls made after the run read "
            "untrusted content (a web page, an MCP result), which a prompt injection could "
            "have asked for",
        )
    elif settings.approve == "ask" and not launch.interactive:
        view.emit(
            "notice",
            text="no terminal to ask: calls that need approval will be denied "
            "(--approve auto allows them)",
        )
    if settings.verify:
        view.emit("notice", text=f"after each edit: {settings.verify}")
    if launch.interactive and not view.quiet:
        view.emit("notice", text="type a line to message the model · Ctrl-C pauses, twice stops")


async def drive(launch: Launch) -> int:
    """Run the executor to its end and record the outcome; the exit status."""
    store, record, settings, model, view = (
        launch.store,
        launch.record,
        launch.settings,
        launch.model,
        launch.view,
    )
    workspace = Path(record.workspace)
    checkpoint = launch.checkpoint
    state = checkpoint.state if checkpoint is not None else None
    prices = model.prices(settings.price)
    budget = settings.budget(prices)
    spent = state.budget if state is not None else None
    steps_granted = state.step_budget if state is not None else None
    status = LiveStatus(
        settings.max_steps,
        Usage(
            spent.input_tokens if spent else 0,
            spent.output_tokens if spent else 0,
            spent.cost if spent else (0.0 if model.price_known(prices) else None),
        ),
        granted=steps_granted.granted if steps_granted else 0,
        unlimited=steps_granted.unlimited if steps_granted else False,
    )
    usage = status.usage
    journal = StoreJournal(store, record.id, state=state, usage=usage)
    shown = ViewEvents(view, status, state.pending_messages if state is not None else [])
    journal.on_delivered = shown.delivered
    tracer = launch.tracer
    events: Events = shown if tracer is None else CompositeEvents(shown, tracer)
    pause = asyncio.Event()

    def on_message(text: str) -> None:
        try:
            journal.add_message(text)
        except StoreError as exc:
            view.emit("error", message=f"the message was not kept: {exc}")
            return
        view.emit("message_queued", text=text)

    lines = LineInput(on_message) if launch.interactive else None
    hitl = TerminalApprovals(settings.approve, view, lines, status, pause.is_set)
    registry = builtin_registry(workspace)
    executor = Executor(
        model.caller,
        registry,
        settings.max_steps,
        budget=budget,
        events=events,
        hitl=hitl,
        resume_steps=checkpoint,
        resume_state=state,
        pause_checker=lambda ctx: pause.is_set(),
        user_message_source=journal.next_message,
    )
    executor.set_journal(journal)
    executor.set_audit_log(JsonlAuditLog(audit_path(store.path, record.id)))
    if settings.verify:
        verify_env = allowlisted_environment(NO_BYTECODE)
        executor.set_verify_on_edit(
            command_verify_runner(["/bin/sh", "-c", settings.verify], cwd=workspace, env=verify_env)
        )

    stopped = False

    def on_pause() -> None:
        pause.set()
        view.emit("warning", text="pausing at the next step boundary (Ctrl-C again stops now)")
        if lines is not None:
            lines.withdraw()

    try:
        async with mcp_tools(settings.mcp, registry, view):
            window = await _window(launch, registry)
            run = asyncio.ensure_future(
                executor.run(registry.list(), window, RunContext(workspace=workspace))
            )

            def on_stop() -> None:
                nonlocal stopped
                stopped = True
                run.cancel()

            with Interrupts(on_pause, on_stop):
                if lines is not None:
                    lines.start()
                try:
                    result = await run
                except asyncio.CancelledError:
                    if not stopped:
                        raise
                    return _ended(
                        launch,
                        "paused",
                        "cancelled",
                        "",
                        len(executor.last_steps),
                        usage(),
                        finished=False,
                    )
    except (LLMError, CommandError, StoreError) as exc:
        return _failed(launch, f"{exc}", usage(), len(executor.last_steps))
    except Exception as exc:
        _log.debug("run %s failed", record.id, exc_info=True)
        return _failed(launch, f"{type(exc).__name__}: {exc}", usage(), len(executor.last_steps))
    finally:
        await _close(model)
    return _finished(launch, result)


async def _window(launch: Launch, registry: Registry) -> ContextWindow:
    """The run's context window: the model's, less what its provider adds to every prompt."""
    model, settings = launch.model, launch.settings
    size = model.context_tokens
    if model.overhead is not None:
        definitions = [
            ToolDefinition(d.name, d.description, d.input_schema) for d in registry.list()
        ]
        size -= await model.overhead(definitions)
    window = ContextWindow(
        size,
        min(4096, model.context_tokens // 8),
        system_prompt=settings.system_prompt,
        task=launch.record.task,
    )
    if launch.checkpoint is not None:
        window.seed_steps(launch.checkpoint)
    return window


def _finished(launch: Launch, result: ExecutorResult) -> int:
    status: RunStatus
    if result.finished:
        status, code = "finished", EXIT_FINISHED
    elif result.paused:
        status, code = "paused", EXIT_PAUSED
    else:
        status, code = "stopped", EXIT_UNFINISHED
    return _ended(
        launch,
        status,
        result.exit_reason.value,
        result.output,
        result.model_responses,
        Usage(result.usage.input_tokens, result.usage.output_tokens, result.cost_usd),
        finished=result.finished,
        code=code,
        exhausted=result.state.budget.exhausted
        if result.exit_reason is ExitReason.BUDGET_EXHAUSTED and result.state is not None
        else "",
    )


def _ended(
    launch: Launch,
    status: RunStatus,
    exit_reason: str,
    output: str,
    steps: int,
    usage: Usage,
    *,
    finished: bool,
    code: int = EXIT_PAUSED,
    exhausted: str = "",
) -> int:
    record = launch.record
    try:
        launch.store.end_run(
            record.id,
            status=status,
            exit_reason=exit_reason,
            output=output,
            usage=usage,
            responses=steps,
        )
    except StoreError as exc:
        launch.view.emit("error", message=f"the run's end was not recorded: {exc}")
        code = EXIT_ERROR
    launch.view.emit(
        "result",
        run_id=record.id,
        exit_reason=exit_reason,
        finished=finished,
        output=output,
        steps=steps,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        status=status,
        cost_usd=usage.cost_usd,
        exhausted_limit=exhausted,
    )
    if finished or status == "stopped":
        launch.view.answer(output)
    return code


def _failed(launch: Launch, message: str, usage: Usage, steps: int) -> int:
    record = launch.record
    launch.view.emit("error", message=message)
    try:
        launch.store.end_run(
            record.id, status="failed", exit_reason="error", error=message, usage=usage
        )
    except StoreError as exc:
        launch.view.emit("error", message=f"the run's end was not recorded: {exc}")
    launch.view.emit(
        "result",
        run_id=record.id,
        exit_reason="error",
        finished=False,
        output="",
        steps=steps,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        status="failed",
        cost_usd=usage.cost_usd,
        exhausted_limit="",
        error=message,
    )
    return EXIT_ERROR


async def _close(model: Model) -> None:
    close = getattr(model.caller, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # closing must never hide the run's outcome
            _log.debug("closing the model failed", exc_info=True)


def interactive() -> bool:
    """Whether a human can answer at this terminal."""
    return sys.stdin.isatty()
