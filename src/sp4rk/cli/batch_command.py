"""``sp4rk batch TASKS.jsonl --out RESULTS.jsonl``: its options and help.

What it does is in :mod:`sp4rk.cli.batch`, imported when the command runs: ``sp4rk --help``
lists this command without loading the batch machinery, the agent or the stores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sp4rk.cli.config import DEFAULT_MAX_STEPS, DEFAULT_MODEL

#: ``sp4rk.batch.APPROVE_MODES``, which cannot be imported here without the executor (a test
#: pins the two equal).
APPROVE_MODES = ("never", "auto")


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
def batch(tasks: Path, out: Path, **options: Any) -> int:
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
    from sp4rk.cli.batch import run_command

    return run_command(tasks, out, **options)  # keyword-only there: a missing one fails
