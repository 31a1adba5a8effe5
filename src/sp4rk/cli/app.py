"""The ``sp4rk`` command: its subcommands, their options and help, and exit statuses."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec

import click

from sp4rk import __version__
from sp4rk.cli import listing
from sp4rk.cli.batch import batch
from sp4rk.cli.config import (
    APPROVE_MODES,
    FileConfig,
    load_config,
    resolve_settings,
    stored_settings,
)
from sp4rk.cli.errors import EXIT_FINISHED, EXIT_USAGE, CommandError, UsageProblem
from sp4rk.cli.models import build_model
from sp4rk.cli.session import Launch, announce, drive, interactive
from sp4rk.cli.toolset import builtin_registry, mcp_tools
from sp4rk.cli.view import JsonView, TextView, View
from sp4rk.store import (
    RunNotFoundError,
    SQLiteRunStore,
    StoreError,
    default_store_path,
    ended_by_accepted_finish,
    open_store,
    store_timeout,
)
from sp4rk.tools.builtins.finish import parse_finish_answer

P = ParamSpec("P")
#: Keys of the workspace configuration that a resumed run takes from the file (the rest
#: was fixed when the run started and comes from the store).
RESUME_FILE_KEYS = ("verify", "mcp", "price")

STORE_HELP = (
    "The runs store (SQLite). Default: $SP4RK_STORE, else $XDG_STATE_HOME/sp4rk/runs.db "
    "(~/.local/state/sp4rk/runs.db)."
)


def _store_option(fn: Callable[P, int]) -> Callable[P, int]:
    return click.option(
        "--store",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help=STORE_HELP,
    )(fn)


def _store_url_option(fn: Callable[P, int]) -> Callable[P, int]:
    """``--store`` of the commands that only read: a path, or a database URL (batches)."""
    return click.option(
        "--store",
        metavar="PATH|URL",
        default=None,
        help=STORE_HELP + " Or the URL of a batch's store (postgresql://...).",
    )(fn)


def _handled(fn: Callable[P, int]) -> Callable[P, int]:
    """Turn expected failures into one line on stderr (and a JSON event) and an exit status."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> int:
        try:
            return fn(*args, **kwargs)
        except (CommandError, StoreError) as exc:
            code = EXIT_USAGE if isinstance(exc, UsageProblem | RunNotFoundError) else 1
            if kwargs.get("as_json"):
                event = {"event": "error", "message": str(exc), "exit_code": code}
                sys.stdout.write(json.dumps(event) + "\n")
            click.echo(f"sp4rk: error: {exc}", err=True)
            return code

    return wrapper


def _open_store(path: Path | None) -> SQLiteRunStore:
    return SQLiteRunStore(
        path if path is not None else default_store_path(), timeout=store_timeout()
    )


def _view(as_json: bool, quiet: bool) -> View:
    return JsonView() if as_json else TextView(quiet=quiet)


@click.group(
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "-V", "--version", prog_name="sp4rk")
@click.option("-v", "--verbose", count=True, help="Log to stderr (-v info, -vv debug).")
@click.pass_context
def cli(ctx: click.Context, verbose: int) -> int:
    """Run an AI agent on a folder, watch it, steer it, pause and resume it.

    The agent reads, edits, runs commands and tests, asks you before anything risky,
    and every step is saved as it happens, so a run survives a crash.

    \b
    Try it:
      sp4rk run "Make the failing test pass" --model anthropic:claude-sonnet-4-5
      sp4rk run "List the TODOs in src/" --model local      # offline, small demo model
      sp4rk runs                                            # what ran, and how it ended
      sp4rk show last                                       # the latest run, step by step
      sp4rk resume 1a2b3c4d "also update the changelog"     # continue a paused run

    Keys come from the usual variables (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...).
    A workspace may hold sp4rk.toml (or [tool.sp4rk] in pyproject.toml) with its model,
    approvals, verify command, limits and MCP servers. See docs/cli.md.
    """
    if verbose:
        logging.basicConfig(
            level=logging.DEBUG if verbose > 1 else logging.INFO,
            stream=sys.stderr,
            format="%(levelname)s %(name)s: %(message)s",
        )
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
    return EXIT_FINISHED


cli.add_command(batch)


def _run_options(fn: Callable[P, int]) -> Callable[P, int]:
    options = [
        click.option(
            "--model",
            "-m",
            metavar="SPEC",
            default=None,
            help="provider:model (anthropic:claude-sonnet-4-5, openai:gpt-4.1, "
            "openai-compatible:MODEL with --base-url), local[:PATH.gguf], or "
            "scripted:FILE.json. Default: the bundled offline demonstration model.",
        ),
        click.option(
            "--base-url",
            metavar="URL",
            default=None,
            help="Server URL for openai-compatible: models (vLLM, llama.cpp, Ollama).",
        ),
        click.option(
            "--max-steps",
            type=int,
            default=None,
            metavar="N",
            help="Step budget; at the limit you are asked whether to go on. Default 30.",
        ),
        click.option(
            "--approve",
            type=click.Choice(APPROVE_MODES),
            default=None,
            help="Calls that need approval (file writes, risky shell commands): ask "
            "at the terminal (default; denied without one), auto-approve, or never.",
        ),
        click.option(
            "--verify",
            metavar="CMD",
            default=None,
            help="Run CMD after each edit and show the model the result, e.g. "
            '"python -m pytest -x -q".',
        ),
        click.option(
            "--json",
            "as_json",
            is_flag=True,
            help="One JSON object per line on stdout; the last is the result.",
        ),
        click.option(
            "--quiet", "-q", is_flag=True, help="Show only questions, the run's id and its result."
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@cli.command()
@click.argument("task")
@click.option(
    "--workspace",
    "-w",
    type=click.Path(path_type=Path),
    default=Path("."),
    show_default="the current directory",
    help="The folder the agent works in; its tools cannot leave it.",
)
@_run_options
@click.option(
    "--system",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="A system prompt file (instructions for the model).",
)
@_store_option
@_handled
def run(
    task: str,
    workspace: Path,
    model: str | None,
    base_url: str | None,
    max_steps: int | None,
    approve: str | None,
    verify: str | None,
    as_json: bool,
    quiet: bool,
    system: Path | None,
    store: Path | None,
) -> int:
    """Start an agent on TASK in a workspace, and show it working.

    \b
    Examples:
      sp4rk run "Fix the failing test in tests/test_api.py" --verify "pytest -x -q"
      sp4rk run "Summarise README.md" --model openai:gpt-4.1 --approve never
      sp4rk run "Rename foo to bar" -w ~/src/app --model openai-compatible:qwen3 \\
          --base-url http://localhost:8000/v1

    While it runs: type a line to send the model a message; Ctrl-C pauses at the next
    step (resume with sp4rk resume ID), Ctrl-C twice stops at once. Every step is
    saved as it happens, so a crash loses nothing.

    \b
    Exit status: 0 finished · 3 paused (resumable) · 4 ended unfinished (step limit,
    breaker, gate) · 1 error (provider, configuration, store) · 2 usage error.
    """
    if not task.strip():
        raise UsageProblem('the task is empty: sp4rk run "what the agent should do"')
    folder = workspace.expanduser().resolve()
    if not folder.is_dir():
        raise UsageProblem(
            f"the workspace {folder} does not exist or is not a folder; pass --workspace DIR"
        )
    config = load_config(folder)
    flags = {
        "model": model,
        "base_url": base_url,
        "max_steps": max_steps,
        "approve": approve,
        "verify": verify,
        "system": system,
    }
    settings = resolve_settings(flags, config, folder)
    built = build_model(
        settings.model, base_url=settings.base_url, context_tokens=settings.context_tokens
    )
    runs = _open_store(store)
    try:
        record = runs.create_run(
            task=task, workspace=str(folder), model=built.spec, settings=settings.to_store()
        )
        launch = Launch(
            store=runs,
            record=record,
            checkpoint=None,
            settings=settings,
            model=built,
            view=_view(as_json, quiet),
            interactive=interactive(),
        )
        announce(launch, config_source=config.source)
        return asyncio.run(drive(launch))
    finally:
        runs.close()


@cli.command()
@click.argument("run_id")
@click.argument("message", required=False)
@_run_options
@_store_option
@_handled
def resume(
    run_id: str,
    message: str | None,
    model: str | None,
    base_url: str | None,
    max_steps: int | None,
    approve: str | None,
    verify: str | None,
    as_json: bool,
    quiet: bool,
    store: Path | None,
) -> int:
    """Continue a paused, stopped, failed or interrupted run, optionally with a MESSAGE.

    \b
    Examples:
      sp4rk resume 1a2b3c4d
      sp4rk resume last "the tests live in tests/unit, not tests/"
      sp4rk resume 1a2b --max-steps 60        # more room after the step limit

    RUN_ID may be a unique prefix (4+ characters) or "last". The run keeps its task,
    workspace, model and settings; options given here replace them. A run whose process
    was killed mid-call resumes without running that call again: the model is told its
    outcome is unknown. The verify command and MCP servers come from the options and the
    workspace's configuration (the store never supplies a command to run).
    """
    runs = _open_store(store)
    try:
        record = runs.get_run(run_id)
        if record.status == "finished":
            raise UsageProblem(f"run {record.id} already finished; start a new one with sp4rk run")
        folder = Path(record.workspace)
        if not folder.is_dir():
            raise CommandError(
                f"the run's workspace {folder} no longer exists; restore it to resume the run"
            )
        loaded = load_config(folder)
        config = FileConfig(
            source=loaded.source,
            values={k: v for k, v in loaded.values.items() if k in RESUME_FILE_KEYS},
        )
        base = stored_settings(record.settings)
        base.model = record.model
        flags = {
            "model": model,
            "base_url": base_url,
            "max_steps": max_steps,
            "approve": approve,
            "verify": verify,
        }
        settings = resolve_settings(flags, config, folder, base=base)
        built = build_model(
            settings.model, base_url=settings.base_url, context_tokens=settings.context_tokens
        )
        record = runs.claim_run(record.id)
        if message:
            runs.queue_message(record.id, message)
        checkpoint = runs.recover(record.id)
        view = _view(as_json, quiet)
        launch = Launch(
            store=runs,
            record=record,
            checkpoint=checkpoint,
            settings=settings,
            model=built,
            view=view,
            interactive=interactive(),
        )
        if ended_by_accepted_finish(checkpoint):
            return _already_finished(launch)
        announce(launch, config_source=config.source)
        return asyncio.run(drive(launch))
    finally:
        runs.close()


def _already_finished(launch: Launch) -> int:
    """A run whose process died between its accepted finish and marking it finished."""
    assert launch.checkpoint is not None
    last = launch.checkpoint[-1]
    output = last.thought
    if last.action is not None:
        try:
            output = parse_finish_answer(last.action.input)
        except ValueError:
            output = ""
    record = launch.record
    launch.store.end_run(record.id, status="finished", exit_reason="finished", output=output)
    launch.view.emit(
        "result",
        run_id=record.id,
        exit_reason="finished",
        finished=True,
        output=output,
        steps=len(launch.checkpoint),
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        status="finished",
        cost_usd=record.cost_usd,
    )
    launch.view.answer(output)
    return EXIT_FINISHED


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="A JSON list instead of a table.")
@click.option("--limit", type=int, default=50, show_default=True, help="Newest runs shown.")
@_store_url_option
@_handled
def runs(as_json: bool, limit: int, store: str | None) -> int:
    """List runs, newest first: id, status, exit reason, steps, tokens, cost, age, task.

    \b
    Statuses: running · paused · finished · stopped (a limit or breaker ended it) ·
    failed (an error) · interrupted (its process died; resume it).
    """
    with open_store(store or default_store_path()) as opened:
        listing.print_runs(opened.list_runs(limit), as_json=as_json)
    return EXIT_FINISHED


@cli.command()
@click.argument("run_id", default="last")
@click.option("--json", "as_json", is_flag=True, help="The run and its steps as JSON.")
@_store_url_option
@_handled
def show(run_id: str, as_json: bool, store: str | None) -> int:
    """Show a run step by step: thoughts, tool calls, results, nudges and your messages.

    \b
    Examples:
      sp4rk show            # the latest run
      sp4rk show 1a2b3c4d
      sp4rk show 1a2b --json | jq '.steps | length'
    """
    with open_store(store or default_store_path()) as opened:
        record = opened.get_run(run_id)
        closing = [s for _, _, steps in opened.closing_steps(record.id) for s in steps]
        listing.print_run(record, opened.steps(record.id), closing, as_json=as_json)
    return EXIT_FINISHED


@cli.command()
@click.option(
    "--workspace",
    "-w",
    type=click.Path(path_type=Path),
    default=Path("."),
    show_default="the current directory",
    help="Where sp4rk.toml is read from.",
)
@click.option("--json", "as_json", is_flag=True, help="The tools as JSON.")
@_handled
def tools(workspace: Path, as_json: bool) -> int:
    """List the tools a run gets: built-ins and configured MCP servers' tools.

    Each has a policy (always_allow, user_confirm: asks you first, always_deny) and
    traits (read_only, mutating, ...). MCP servers come from [mcp.NAME] in sp4rk.toml.
    """
    folder = workspace.expanduser().resolve()
    if not folder.is_dir():
        raise UsageProblem(f"the workspace {folder} does not exist or is not a folder")
    config = load_config(folder)
    registry = builtin_registry(folder)
    view: View = TextView(quiet=True)

    async def collect() -> dict[str, str]:
        async with mcp_tools(config.values.get("mcp", {}), registry, view) as failed:
            listing.print_tools(registry, failed, as_json=as_json)
            return failed

    asyncio.run(collect())
    return EXIT_FINISHED


def invoke(argv: list[str] | None) -> Any:
    """Run the click group without its own ``sys.exit``; returns what the command returned."""
    return cli.main(args=argv, prog_name="sp4rk", standalone_mode=False)
