"""The ``sp4rk`` command: its subcommands, their options and help, and exit statuses.

Each command imports its work (the agent, the store, the tools, the terminal view) when it
runs, so that ``sp4rk --help``, ``sp4rk CMD --help`` and ``sp4rk --version`` load only click
and the configuration's names (``bench/startup.py`` times ``sp4rk --help``; a test pins what
each of them loads).
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec

import click

from sp4rk import __version__
from sp4rk.cli.batch_command import batch
from sp4rk.cli.config import (
    APPROVE_MODES,
    FileConfig,
    Settings,
    load_config,
    resolve_settings,
    stored_settings,
)
from sp4rk.cli.errors import EXIT_FINISHED, EXIT_USAGE, CommandError, UsageProblem

if TYPE_CHECKING:
    from sp4rk.cli.models import Model
    from sp4rk.cli.session import Launch
    from sp4rk.cli.view import View
    from sp4rk.store import SQLiteRunStore

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
        from sp4rk.store import RunNotFoundError, StoreError

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
    from sp4rk.store import SQLiteRunStore, default_store_path, store_timeout

    return SQLiteRunStore(
        path if path is not None else default_store_path(), timeout=store_timeout()
    )


def _view(as_json: bool, quiet: bool) -> View:
    from sp4rk.cli.view import JsonView, TextView

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
            "--max-cost",
            type=float,
            default=None,
            metavar="USD",
            help="Budget in US dollars for the whole run; checked before each model call. "
            "Needs the model's price (built in for Claude and GPT models; else price in "
            "sp4rk.toml).",
        ),
        click.option(
            "--max-tokens",
            type=int,
            default=None,
            metavar="N",
            help="Budget of input + output tokens for the whole run.",
        ),
        click.option(
            "--max-time",
            default=None,
            metavar="DURATION",
            help="Wall-clock budget: seconds, or 90s, 10m, 1h. A paused run's clock stands still.",
        ),
        click.option(
            "--max-tool-calls",
            type=int,
            default=None,
            metavar="N",
            help="Budget of tool calls for the whole run.",
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
        click.option(
            "--otel",
            is_flag=True,
            help="Export traces and metrics with OpenTelemetry, configured by the OTEL_* "
            "variables (needs the SDK: pip install opentelemetry-sdk "
            "opentelemetry-exporter-otlp).",
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
    max_cost: float | None,
    max_tokens: int | None,
    max_time: str | None,
    max_tool_calls: int | None,
    approve: str | None,
    verify: str | None,
    as_json: bool,
    quiet: bool,
    otel: bool,
    system: Path | None,
    store: Path | None,
) -> int:
    """Start an agent on TASK in a workspace, and show it working.

    \b
    Examples:
      sp4rk run "Fix the failing test in tests/test_api.py" --verify "pytest -x -q"
      sp4rk run "Summarise README.md" --model openai:gpt-4.1 --approve never
      sp4rk run "Add type hints to utils.py" --max-cost 0.50 --max-time 10m
      sp4rk run "Rename foo to bar" -w ~/src/app --model openai-compatible:qwen3 \\
          --base-url http://localhost:8000/v1

    While it runs: type a line to send the model a message; Ctrl-C pauses at the next
    step (resume with sp4rk resume ID), Ctrl-C twice stops at once. Every step is
    saved as it happens, so a crash loses nothing.

    A budget (--max-cost, --max-tokens, --max-time, --max-tool-calls) is checked before
    anything is spent; at a limit you are asked whether to go on, and the model is told
    when it nears one so it can wrap up.

    \b
    Exit status: 0 finished · 3 paused (resumable) · 4 ended unfinished (step limit,
    budget, breaker, gate) · 1 error (provider, configuration, store) · 2 usage error.
    """
    import asyncio

    from sp4rk.cli.session import Launch, announce, drive, interactive
    from sp4rk.cli.tracing import tracing

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
        "max_cost": max_cost,
        "max_tokens": max_tokens,
        "max_time": max_time,
        "max_tool_calls": max_tool_calls,
        "approve": approve,
        "verify": verify,
        "system": system,
    }
    settings = resolve_settings(flags, config, folder)
    built = _built(settings)
    view = _view(as_json, quiet)
    tracer = tracing(view) if otel else None
    runs = _open_store(store)
    try:
        record = runs.create_run(
            task=task, workspace=str(folder), model=built.spec, settings=settings.to_store()
        )
        if tracer is not None:
            tracer.conversation_id = record.id
        launch = Launch(
            store=runs,
            record=record,
            checkpoint=None,
            settings=settings,
            model=built,
            view=view,
            interactive=interactive(),
            tracer=tracer,
        )
        announce(launch, config_source=config.source)
        return asyncio.run(drive(launch))
    finally:
        runs.close()


def _built(settings: Settings) -> Model:
    """The run's model; a cost budget needs its price.

    Raises:
        UsageProblem: ``--max-cost`` for a model whose price is unknown.
    """
    from sp4rk.cli.models import build_model
    from sp4rk.llm.pricing import PRICES_AS_OF

    built = build_model(
        settings.model, base_url=settings.base_url, context_tokens=settings.context_tokens
    )
    if settings.max_cost is not None and not built.price_known(built.prices(settings.price)):
        raise UsageProblem(
            f"--max-cost needs the price of {built.spec}, which sp4rk's price table "
            f"(sp4rk.llm.pricing, list prices of {PRICES_AS_OF}) does not know: set "
            "price = { input = USD, output = USD } (per million tokens) in the workspace's "
            "sp4rk.toml, or limit tokens with --max-tokens instead"
        )
    return built


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
    max_cost: float | None,
    max_tokens: int | None,
    max_time: str | None,
    max_tool_calls: int | None,
    approve: str | None,
    verify: str | None,
    as_json: bool,
    quiet: bool,
    otel: bool,
    store: Path | None,
) -> int:
    """Continue a paused, stopped, failed or interrupted run, optionally with a MESSAGE.

    \b
    Examples:
      sp4rk resume 1a2b3c4d
      sp4rk resume last "the tests live in tests/unit, not tests/"
      sp4rk resume 1a2b --max-steps 60        # more room after the step limit
      sp4rk resume 1a2b --max-cost 2          # the whole run may now cost $2

    RUN_ID may be a unique prefix (4+ characters) or "last". The run keeps its task,
    workspace, model and settings; options given here replace them. Budgets are for the
    whole run: what was spent before the resume counts, so raise a limit the run hit
    (--max-cost 2 after a $1 budget gives it $1 more). A run whose process
    was killed mid-call resumes without running that call again: the model is told its
    outcome is unknown. The verify command and MCP servers come from the options and the
    workspace's configuration (the store never supplies a command to run).
    """
    import asyncio

    from sp4rk.cli.session import Launch, announce, drive, interactive
    from sp4rk.cli.tracing import tracing
    from sp4rk.store import ended_by_accepted_finish

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
            "max_cost": max_cost,
            "max_tokens": max_tokens,
            "max_time": max_time,
            "max_tool_calls": max_tool_calls,
            "approve": approve,
            "verify": verify,
        }
        settings = resolve_settings(flags, config, folder, base=base)
        built = _built(settings)
        view = _view(as_json, quiet)
        tracer = tracing(view) if otel else None
        record = runs.claim_run(record.id, model=built.spec, settings=settings.to_store())
        if tracer is not None:
            tracer.conversation_id = record.id
        if message:
            runs.queue_message(record.id, message)
        checkpoint = runs.recover(record.id, prices=built.prices(settings.price))
        launch = Launch(
            store=runs,
            record=record,
            checkpoint=checkpoint,
            settings=settings,
            model=built,
            view=view,
            interactive=interactive(),
            tracer=tracer,
        )
        if ended_by_accepted_finish(checkpoint):
            return _already_finished(launch)
        announce(launch, config_source=config.source)
        return asyncio.run(drive(launch))
    finally:
        runs.close()


def _already_finished(launch: Launch) -> int:
    """A run whose process died between its accepted finish and marking it finished."""
    from sp4rk.store.recovery import responses_with_finish
    from sp4rk.tools.builtins.finish import parse_finish_answer

    assert launch.checkpoint is not None
    last = launch.checkpoint[-1]
    output = last.thought
    if last.action is not None:
        try:
            output = parse_finish_answer(last.action.input)
        except ValueError:
            output = ""
    record = launch.record
    responses = responses_with_finish(launch.checkpoint.state)
    launch.store.end_run(
        record.id, status="finished", exit_reason="finished", output=output, responses=responses
    )
    launch.view.emit(
        "result",
        run_id=record.id,
        exit_reason="finished",
        finished=True,
        output=output,
        steps=responses if responses is not None else record.step_count,
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        status="finished",
        cost_usd=record.cost_usd,
        exhausted_limit="",
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
    from sp4rk.cli import listing
    from sp4rk.store import default_store_path, open_store

    if store is None and not default_store_path().exists():
        listing.print_runs([], as_json=as_json)  # nothing has run here yet: create nothing
        return EXIT_FINISHED
    with open_store(_existing(store)) as opened:
        listing.print_runs(opened.list_runs(limit), as_json=as_json)
    return EXIT_FINISHED


def _existing(store: str | None) -> str:
    """The runs store to read from, which must exist: reading never creates one.

    Raises:
        UsageProblem: a store file (or its default) that does not exist.
    """
    from sp4rk.store import default_store_path

    target = store or str(default_store_path())
    path = target.removeprefix("sqlite://")
    if "://" not in path and not Path(path).expanduser().exists():
        raise UsageProblem(
            f"no runs store at {path}: give the --store a run was saved in (`sp4rk runs "
            "--store PATH` lists its runs), or start a run first"
        )
    return target


@cli.command()
@click.argument("run_id", default="last")
@click.option("--json", "as_json", is_flag=True, help="The run and its steps as JSON.")
@_store_url_option
@_handled
def show(run_id: str, as_json: bool, store: str | None) -> int:
    """Show a run step by step: thoughts, tool calls, results, nudges and your messages.

    Also its budget, what it spent, and the file its approval decisions went to.

    \b
    Examples:
      sp4rk show            # the latest run
      sp4rk show 1a2b3c4d
      sp4rk show 1a2b --json | jq '.steps | length'
    """
    from sp4rk.cli import listing
    from sp4rk.cli.session import audit_path
    from sp4rk.store import SQLiteRunStore, open_store

    with open_store(_existing(store)) as opened:
        record = opened.get_run(run_id)
        closing = [s for _, _, steps in opened.closing_steps(record.id) for s in steps]
        state = opened.state(record.id)
        audit = (  # a database server keeps no files by it
            audit_path(opened.path, record.id) if isinstance(opened, SQLiteRunStore) else None
        )
        listing.print_run(
            record,
            opened.steps(record.id),
            closing,
            spent=state.budget if state is not None else None,
            audit_log=audit if audit is not None and audit.is_file() else None,
            as_json=as_json,
        )
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
    import asyncio

    from sp4rk.cli import listing
    from sp4rk.cli.toolset import builtin_registry, mcp_tools
    from sp4rk.cli.view import TextView

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
