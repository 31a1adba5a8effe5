"""What ``sp4rk batch TASKS.jsonl --out RESULTS.jsonl`` does: many tasks, a progress bar, a report.

The command is :func:`sp4rk.batch.run_batch` with what a terminal adds: a live progress bar on
stderr (plain lines when stderr is not a terminal), Ctrl-C to pause every run (twice: stop
now), the throughput report on stdout, and models built as ``sp4rk run`` builds them
(``scripted:FILE.json`` and ``local`` included; relative paths in a task's model spec are
relative to the task file).
"""

from __future__ import annotations

import contextlib
import functools
import json
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sp4rk.batch import (
    BatchControl,
    BatchError,
    BatchListener,
    BatchModel,
    BatchReport,
    BatchResult,
    run_batch,
)
from sp4rk.batch.on_ray import RayMissingError
from sp4rk.cli.config import DEFAULT_MODEL
from sp4rk.cli.errors import EXIT_ERROR, EXIT_FINISHED, EXIT_PAUSED, EXIT_USAGE, CommandError
from sp4rk.cli.models import build_model
from sp4rk.cli.toolset import builtin_registry
from sp4rk.cli.view import cost_text, one_line, tokens_text
from sp4rk.llm import SimpleTokenCounter
from sp4rk.store import StoreError
from sp4rk.tools import ToolDescriptor


def batch_model(spec: str, *, base: str = "", base_url: str = "") -> BatchModel:
    """A task's model, built as ``sp4rk run`` builds it (picklable through ``partial``).

    ``scripted:`` and ``local:`` paths are relative to ``base`` (the task file's folder).

    Raises:
        UsageProblem, CommandError: as :func:`sp4rk.cli.models.build_model`.
    """
    prefix, _, rest = spec.strip().partition(":")
    if prefix in ("scripted", "local") and rest and base:
        rest_path = Path(rest).expanduser()
        if not rest_path.is_absolute():
            spec = f"{prefix}:{Path(base) / rest_path}"
    built = build_model(spec, base_url=base_url if prefix != "scripted" else "")
    prices = built.prices() if built.price is not None else None  # local and scripted: free
    context = built.context_tokens
    if built.overhead is not None:  # a local model's prompt also holds the tool listing
        context -= tool_listing_tokens(builtin_registry(Path.cwd()).list())
    return BatchModel(built.caller, built.spec, context, prices)


def tool_listing_tokens(tools: Sequence[ToolDescriptor]) -> int:
    """About how many tokens a listing of ``tools`` takes in a prompt (a local model's).

    ``sp4rk run`` asks the provider; a batch builds its models before any event loop runs,
    so it estimates.
    """
    listing = json.dumps([[t.name, t.description, t.input_schema] for t in tools])
    return SimpleTokenCounter().count(listing)


class PlainProgress(BatchListener):
    """One line per event on stderr (for logs and CI)."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.total = 0
        self.done = 0
        self.running = 0
        self.failed = 0
        self.tokens = 0
        self.cost: float | None = 0.0

    def _say(self, text: str) -> None:
        if not self.quiet:
            click.echo(text, err=True)

    def batch_started(self, *, backend: str, tasks: int, skipped: int, to_run: int) -> None:
        """The opening line."""
        self.total, self.done = tasks, skipped
        self._say(f"batch: {tasks} tasks · {skipped} done before · {to_run} to run ({backend})")

    def task_started(self, task_id: str) -> None:
        """Count it as running."""
        self.running += 1

    def task_ended(self, result: BatchResult) -> None:
        """A line per result."""
        self.running = max(0, self.running - 1)
        self.done += 1
        self.failed += result.failed
        self.tokens += result.input_tokens + result.output_tokens
        if self.cost is not None:
            self.cost = None if result.cost_usd is None else self.cost + result.cost_usd
        what = "error: " + one_line(result.error, 80) if result.failed else result.exit_reason
        width = len(str(self.total))
        self._say(
            f"[{self.done:>{width}}/{self.total}] {result.id}: {what} · {result.steps} steps · "
            f"running {self.running} · failed {self.failed} · {tokens_text(self.tokens)} tokens "
            f"· {cost_text(self.cost)}"
        )

    def task_paused(self, task_id: str, why: str) -> None:
        """A task left for the next invocation."""
        self.running = max(0, self.running - 1)
        self._say(f"{task_id}: {one_line(why, 100)} (resumes when the batch runs again)")

    def task_retried(self, task_id: str, attempt: int, why: str) -> None:
        """A failed attempt that gets another."""
        self.running = max(0, self.running - 1)
        self._say(f"{task_id}: {why}; attempt {attempt} resumes it")


class RichProgress(PlainProgress):
    """A live progress bar on stderr: done, running, failed, tokens and cost."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.progress = Progress(
            TextColumn("[bold]batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
            transient=False,
        )
        self.bar = self.progress.add_task("batch", total=None, status="")

    def _say(self, text: str) -> None:
        self.progress.console.print(text, highlight=False, markup=False)

    def _refresh(self) -> None:
        status = (
            f"running {self.running} · failed {self.failed} · {tokens_text(self.tokens)} tokens "
            f"· {cost_text(self.cost)}"
        )
        self.progress.update(self.bar, total=self.total, completed=self.done, status=status)

    def batch_started(self, *, backend: str, tasks: int, skipped: int, to_run: int) -> None:
        """Start the bar."""
        self.total, self.done = tasks, skipped
        self.progress.start()
        self._refresh()

    def task_started(self, task_id: str) -> None:
        """Count it as running."""
        super().task_started(task_id)
        self._refresh()

    def task_ended(self, result: BatchResult) -> None:
        """Advance the bar; failures are printed above it."""
        self.running = max(0, self.running - 1)
        self.done += 1
        self.failed += result.failed
        self.tokens += result.input_tokens + result.output_tokens
        if self.cost is not None:
            self.cost = None if result.cost_usd is None else self.cost + result.cost_usd
        if result.failed:
            self._say(f"✗ {result.id}: {one_line(result.error, 100)}")
        self._refresh()

    def task_paused(self, task_id: str, why: str) -> None:
        """Count it as no longer running."""
        self.running = max(0, self.running - 1)
        self._refresh()

    def task_retried(self, task_id: str, attempt: int, why: str) -> None:
        """Say so above the bar."""
        super().task_retried(task_id, attempt, why)
        self._refresh()

    def batch_ended(self, report: BatchReport) -> None:
        """Stop the bar."""
        self._refresh()
        self.progress.stop()


@contextlib.contextmanager
def interrupts(control: BatchControl, say: PlainProgress) -> Iterator[None]:
    """Ctrl-C pauses every run at its next step boundary; a second Ctrl-C (or SIGTERM) stops."""
    presses = 0

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            say._say("pausing: each run stops at its next step (Ctrl-C again stops them now)")
            control.pause()
        else:
            control.stop()

    def on_terminate(signum: int, frame: FrameType | None) -> None:
        control.stop()

    old_int = signal.signal(signal.SIGINT, on_interrupt)
    old_term = signal.signal(signal.SIGTERM, on_terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


def run_command(
    tasks: Path,
    out: Path,
    *,
    store: str | None,
    concurrency: int,
    model: str | None,
    base_url: str,
    max_steps: int,
    approve: str,
    system: Path | None,
    work_dir: Path | None,
    retries: int,
    ray_address: str | None,
    ray_cpus: float,
    as_json: bool,
    quiet: bool,
) -> int:
    """``sp4rk batch`` with its options (``cli/batch_command.py``); returns the exit status."""
    try:
        system_prompt = system.read_text(encoding="utf-8") if system is not None else ""
    except (OSError, UnicodeDecodeError) as exc:
        return _refuse(f"cannot read the system prompt {system}: {exc}", EXIT_USAGE, as_json)
    base = str(tasks.expanduser().resolve().parent)
    factory = functools.partial(batch_model, base=base, base_url=base_url)
    interactive = sys.stderr.isatty() and not quiet and not as_json
    listener: PlainProgress = (
        RichProgress(Console(stderr=True)) if interactive else PlainProgress(quiet or as_json)
    )
    control = BatchControl()
    try:
        with interrupts(control, listener):
            report = run_batch(
                tasks,
                out,
                store=store,
                model=model or DEFAULT_MODEL,
                model_factory=factory,
                concurrency=concurrency,
                max_steps=max_steps,
                approve="auto" if approve == "auto" else "never",
                system_prompt=system_prompt,
                retries=retries,
                work_dir=work_dir,
                ray=False if ray_address is None else (ray_address or True),
                ray_cpus=ray_cpus,
                listener=listener,
                control=control,
            )
    except (BatchError, RayMissingError) as exc:
        return _refuse(str(exc), EXIT_USAGE, as_json)
    except (StoreError, CommandError, OSError) as exc:
        return _refuse(str(exc), EXIT_ERROR, as_json)
    if as_json:
        click.echo(json.dumps(report.to_dict()))
    else:
        click.echo(report.describe())
        if not report.done:
            click.echo(f"run the same command again to resume the {report.paused} tasks left")
    return EXIT_FINISHED if report.done else EXIT_PAUSED


def _refuse(message: str, code: int, as_json: bool) -> int:
    if as_json:
        click.echo(json.dumps({"event": "error", "message": message, "exit_code": code}))
    click.echo(f"sp4rk: error: {message}", err=True)
    return code
