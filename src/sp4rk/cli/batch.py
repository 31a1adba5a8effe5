"""``sp4rk batch TASKS.jsonl --out RESULTS.jsonl``: many tasks, a progress bar, a report.

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
    APPROVE_MODES,
    BatchControl,
    BatchError,
    BatchListener,
    BatchModel,
    BatchReport,
    BatchResult,
    run_batch,
)
from sp4rk.batch.on_ray import RayMissingError
from sp4rk.cli.config import DEFAULT_MAX_STEPS, DEFAULT_MODEL
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


@click.command()
@click.argument("tasks", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The results file (JSON lines, appended; one line per task that ended).",
)
@click.option(
    "--store",
    metavar="PATH|URL",
    default=None,
    help="The runs store: an SQLite file (default: as sp4rk run), sqlite:///PATH, or "
    "postgresql://USER@HOST/DB (for a cluster).",
)
@click.option(
    "--concurrency",
    "-c",
    type=int,
    default=8,
    show_default=True,
    metavar="N",
    help="Runs (or Ray tasks) in flight at once.",
)
@click.option(
    "--model",
    "-m",
    metavar="SPEC",
    default=None,
    help=f"The model of tasks that name none (default: {DEFAULT_MODEL}).",
)
@click.option(
    "--base-url", metavar="URL", default="", help="Server URL for openai-compatible: models."
)
@click.option(
    "--max-steps",
    type=int,
    default=DEFAULT_MAX_STEPS,
    show_default=True,
    metavar="N",
    help="The step limit of tasks that set none.",
)
@click.option(
    "--approve",
    type=click.Choice(APPROVE_MODES),
    default="never",
    show_default=True,
    help="Calls that need approval (file writes, flagged shell commands): never runs none, "
    "auto runs them all (each run has its own copy of its workspace).",
)
@click.option(
    "--system",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="A system prompt file for every run.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Where run workspaces and audit logs go (default: RESULTS.batch/).",
)
@click.option(
    "--retries",
    type=int,
    default=2,
    show_default=True,
    metavar="N",
    help="More attempts for a task whose run failed or whose worker died; each resumes the run.",
)
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    is_flag=False,
    flag_value="",
    default=None,
    help="Run the tasks on Ray: --ray for $RAY_ADDRESS or a local Ray instance, "
    "--ray=ADDRESS for that cluster (the ray extra).",
)
@click.option(
    "--ray-cpus",
    type=float,
    default=1.0,
    show_default=True,
    metavar="N",
    help="CPUs Ray reserves for each task.",
)
@click.option("--json", "as_json", is_flag=True, help="The report as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress; only the report.")
def batch(
    tasks: Path,
    out: Path,
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
    """Run every task of TASKS.jsonl, each in its own copy of its workspace; write RESULTS.

    \b
    Examples:
      sp4rk batch tasks.jsonl --out results.jsonl --model openai:gpt-4.1 -c 32
      sp4rk batch tasks.jsonl --out results.jsonl --ray            # a local Ray instance
      sp4rk batch tasks.jsonl --out results.jsonl --ray=ray://head:10001 \\
          --store postgresql://sp4rk@db/sp4rk

    Each line of TASKS.jsonl is {"id", "task", "workspace"?, "model"?, "max_steps"?,
    "budget"?, "verify"?}; each line of RESULTS is {"id", "run_id", "exit_reason",
    "finished", "output", "steps", "input_tokens", "output_tokens", "cost_usd",
    "seconds", "error"?}. Run the same command again to go on: finished tasks are skipped,
    paused and interrupted runs resume from their last step, no result is written twice.

    Ctrl-C pauses every run at its next step (twice: stops them now); either way the batch
    resumes when run again.

    \b
    Exit status: 0 every task has its result · 3 tasks are left (paused: run again) ·
    1 an error (the store, Ray) · 2 a usage error (the task file, an option, a model).
    """
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
