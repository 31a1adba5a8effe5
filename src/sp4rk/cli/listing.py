"""``sp4rk runs``, ``sp4rk show`` and ``sp4rk tools``: what is in the store and the registry."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from sp4rk.agent import BudgetReport, BudgetState, Step
from sp4rk.agent.types import NudgeKind
from sp4rk.cli.config import stored_settings
from sp4rk.cli.view import budget_text, cost_text, headline, limit_text, one_line, tokens_text
from sp4rk.llm.pricing import PriceTable
from sp4rk.store import RunRecord
from sp4rk.tools import Registry
from sp4rk.tools.builtins.finish import FINISH_TOOL_NAME

_TRAITS = ("read_only", "mutating", "verify_after", "pollable")
#: Width of tables written to a file or a pipe.
PIPE_WIDTH = 160


def _console() -> Console:
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = PIPE_WIDTH  # tables are not cut to 80 columns in files and pipes
    return console


def _write_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


def age(timestamp: str, now: datetime | None = None) -> str:
    """``42s``, ``5m``, ``3h``, ``2d`` since ``timestamp`` (ISO 8601)."""
    try:
        then = datetime.fromisoformat(timestamp)
    except ValueError:
        return "?"
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def record_dict(record: RunRecord) -> dict[str, Any]:
    """A run as JSON data, with its displayed status."""
    data = dataclasses.asdict(record)
    data["status"] = record.display_status()
    return data


def print_runs(records: Sequence[RunRecord], *, as_json: bool) -> None:
    """The runs table (or a JSON list)."""
    if as_json:
        _write_json([record_dict(r) for r in records])
        return
    console = _console()
    if not records:
        console.print('no runs yet: start one with  sp4rk run "TASK"')
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("id", "status", "exit reason", "steps", "tokens in/out", "cost", "age", "task"):
        long = column == "task"
        table.add_column(column, no_wrap=True, overflow="ellipsis", max_width=60 if long else None)
    for r in records:
        status = r.display_status()
        style = {"finished": "green", "paused": "yellow", "running": "cyan"}.get(status, "red")
        table.add_row(
            r.id,
            Text(status, style=style),
            r.exit_reason or "—",
            str(r.step_count),
            f"{tokens_text(r.input_tokens)}/{tokens_text(r.output_tokens)}",
            "unknown" if r.cost_usd is None else cost_text(r.cost_usd),
            age(r.created_at),
            Text(one_line(r.task, 60)),
        )
    console.print(table)


def limits_of(record: RunRecord) -> dict[str, float]:
    """The run's budget limits as it was last configured, by limit name."""
    limits = stored_settings(record.settings).budget(PriceTable()).limits()
    return {str(name): value for name, value in limits.items()}


def print_run(
    record: RunRecord,
    steps: Sequence[Step],
    closing: Sequence[Step],
    *,
    spent: BudgetState | None = None,
    audit_log: Path | None = None,
    as_json: bool,
) -> None:
    """One run's trajectory, readable: thoughts, calls, results, nudges, and its spend.

    ``spent`` is the spend in the run's saved state; ``audit_log`` the file of its approval
    decisions, when it has one.
    """
    if as_json:
        _write_json(
            {
                "run": record_dict(record),
                "budget": limits_of(record),
                "spent": spent.to_dict() if spent is not None else None,
                "audit_log": str(audit_log) if audit_log is not None else None,
                "steps": [s.to_dict() for s in steps],
                "in_flight": [s.to_dict() for s in closing],
            }
        )
        return
    console = _console()
    status = record.display_status()
    console.print(
        Text.assemble(
            (f"run {record.id}", "bold cyan"),
            f" · {status}" + (f" ({record.exit_reason})" if record.exit_reason else ""),
            (
                f" · {record.step_count} steps · {tokens_text(record.input_tokens)} in · "
                f"{tokens_text(record.output_tokens)} out · {cost_text(record.cost_usd)} · "
                f"started {age(record.created_at)} ago",
                "dim",
            ),
        )
    )
    console.print(Text.assemble(("task: ", "bold"), record.task))
    console.print(Text(f"model {record.model} · workspace {record.workspace}", style="dim"))
    limits = limits_of(record)
    if limits:
        console.print(Text.assemble(("budget: ", "bold"), budget_text(limits)))
    if spent is not None:
        report = BudgetReport(
            usage=spent.usage,
            cost_usd=spent.cost,
            seconds=spent.seconds,
            tool_calls=spent.tool_calls,
            model_calls=spent.model_calls,
        )
        console.print(Text(f"spent: {report.summary()}", style="dim"))
    if audit_log is not None:
        console.print(Text(f"approvals: {audit_log}", style="dim"))
    _print_steps(console, steps, start=1)
    if closing:
        console.print(
            Text("in flight when its process stopped (closed this way on resume):", "yellow")
        )
        _print_steps(console, closing, start=len(steps) + 1)
    if record.error:
        console.print(Text.assemble(("error: ", "bold red"), record.error))
    if record.output:
        console.print(Text.assemble(("output: ", "bold"), record.output))
    if record.exit_reason == "budget_exhausted" and spent is not None and spent.exhausted:
        console.print(Text(f"{limit_text(spent.exhausted)} was used up", style="yellow"))
    if status not in ("finished", "running"):
        console.print(Text(f"resume it with: sp4rk resume {record.id}", style="dim"))


def _print_steps(console: Console, steps: Sequence[Step], *, start: int) -> None:
    for number, step in enumerate(steps, start):
        head = f"{number:>3}."
        if step.thought:
            console.print(
                Text.assemble((head, "bold"), " ", (one_line(step.thought, 200), "italic"))
            )
            head = "    "
        if step.action is not None:
            _print_call(console, head, step)
            head = "    "
        if step.user_nudge:
            console.print(Text.assemble((head, "bold"), " ", *_nudge(step)))


def _print_call(console: Console, head: str, step: Step) -> None:
    assert step.action is not None
    console.print(
        Text.assemble(
            (head, "bold"),
            (" → ", "cyan"),
            (step.action.name, "bold cyan"),
            f" {one_line(step.action.input, 160)}",
        )
    )
    mark, style = ("✗", "red") if step.is_error else ("✓", "green")
    if step.action.name == FINISH_TOOL_NAME:
        if not step.observation:
            return  # accepted: the answer is the run's output
        if not step.is_error:  # the guard or a gate refused it (ended_by_accepted_finish)
            mark, style = "✗", "yellow"
    line = headline(step.observation, step.is_error)
    console.print(Text.assemble((f"     {mark} ", style), one_line(line, 160)))
    for line in step.observation.splitlines():
        if line.startswith("[verify_on_edit]"):
            ok = "passed" in line
            console.print(Text(f"       {one_line(line, 160)}", "green" if ok else "bold red"))


def _nudge(step: Step) -> tuple[tuple[str, str], str]:
    kind = step.nudge_kind
    if kind is NudgeKind.USER:
        return ("✉ you: ", "bold magenta"), one_line(step.user_nudge, 200)
    label = kind.value if kind is not None else "nudge"
    return (f"! {label}: ", "yellow"), one_line(step.user_nudge, 200)


def print_tools(registry: Registry, failed: dict[str, str], *, as_json: bool) -> None:
    """Every tool a run gets, with its policy and traits."""
    rows: list[dict[str, Any]] = []
    for d in registry.list():
        policy = registry.policy(d.name)
        traits = [t for t in _TRAITS if getattr(d.traits, t)]
        rows.append(
            {
                "name": d.name,
                "source": d.source,
                "policy": policy.value if policy else "",
                "untrusted": registry.is_tool_untrusted(d.name),
                "traits": traits,
                "description": d.description,
            }
        )
    if as_json:
        _write_json({"tools": rows, "unavailable_servers": failed})
        return
    console = _console()
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("tool", "source", "policy", "traits", "description"):
        long = column == "description"
        table.add_column(column, no_wrap=True, overflow="ellipsis", max_width=70 if long else None)
    for row in rows:
        traits = list(row["traits"]) + (["untrusted output"] if row["untrusted"] else [])
        table.add_row(
            Text(row["name"], style="bold"),
            row["source"],
            Text(row["policy"], style="yellow" if row["policy"] == "user_confirm" else ""),
            ", ".join(traits),
            Text(one_line(row["description"], 70)),
        )
    console.print(table)
    console.print(
        Text(
            "user_confirm tools, and shell commands the rule set flags, ask before they run "
            "(see sp4rk run --help: --approve)",
            style="dim",
        )
    )
    for server, why in failed.items():
        console.print(Text(f"MCP server {server} is unavailable: {why}", style="red"))
