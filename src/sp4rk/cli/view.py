"""What a run shows: the live view on a terminal, plain lines elsewhere, or JSON lines.

Everything the command reports goes through :meth:`View.emit` as a named event with data;
the three views differ only in how they write it:

- :class:`TextView` on a terminal (``rich``, to stderr): colours, streamed model text, a
  context-fill bar and the tokens and cost so far in every step's header.
- :class:`TextView` elsewhere: the same lines without colours or streaming.
- :class:`JsonView` (``--json``): one JSON object per line on stdout, each with an
  ``"event"`` key; the last is ``{"event": "result", ...}``.

:class:`ViewEvents` turns the executor's events into view events.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

from sp4rk.agent import BudgetReport, Events
from sp4rk.agent.budget import LABELS, LIMITS, format_amount
from sp4rk.store import Usage

#: Characters of arguments and results shown on one line.
PREVIEW_CHARS = 110
#: How an approval's reason says the run had read untrusted content (``TaintState.note``).
TAINT_NOTE = "after untrusted content from "
#: The option that sets each budget limit.
FLAGS = {
    "max_cost_usd": "--max-cost",
    "max_total_tokens": "--max-tokens",
    "max_seconds": "--max-time",
    "max_tool_calls": "--max-tool-calls",
}
_SPACE = re.compile(r"\s+")


def one_line(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = _SPACE.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def headline(text: str, is_error: bool) -> str:
    """The line of a result worth showing: the first, or the last of an error (its verdict)."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("[verify_on_edit]")]
    if not lines:
        return "(no output)"
    return lines[-1] if is_error else lines[0]


def fill_bar(percent: float, cells: int = 10) -> str:
    """``▰▰▱▱▱▱▱▱▱▱`` for ``percent`` of a context window."""
    full = max(0, min(cells, round(percent / 100 * cells)))
    return "▰" * full + "▱" * (cells - full)


def tokens_text(n: int) -> str:
    """``950``, ``12.3k``, ``1.2M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def cost_text(cost: float | None) -> str:
    """``$0.0123``, or ``cost unknown`` when the model's price is unknown (never ``$0``)."""
    return "cost unknown" if cost is None else f"${cost:.4f}"


def limit_text(name: str) -> str:
    """How the view names a limit: ``the cost budget``, or ``the repeat breaker``."""
    if name in LABELS:
        return f"the {LABELS[name]} budget"
    return f"the {name} breaker" if name else "the step limit"


def budget_text(limits: dict[str, float]) -> str:
    """``max $0.50 · max 200,000 tokens``: a run's budget, for people."""
    nouns = {
        "max_total_tokens": "tokens",
        "max_seconds": "of running time",
        "max_tool_calls": "tool calls",
    }
    parts = []
    for name in LIMITS:
        if name in limits:
            amount = format_amount(name, limits[name])
            parts.append(f"{amount} {nouns[name]}" if name in nouns else amount)
    return " · ".join(parts)


class View:
    """Where a run's events go. ``quiet`` keeps only what needs the human, and the end."""

    quiet = False

    def emit(self, event: str, **data: Any) -> None:
        """Report ``event`` with ``data``."""
        raise NotImplementedError

    def delta(self, text: str) -> None:
        """A piece of the model's reply as it streams."""

    def question(self, text: str) -> None:
        """Ask the human something (the answer is typed on the next line)."""
        sys.stderr.write(text)
        sys.stderr.flush()

    def answer(self, output: str) -> None:
        """The run's final output (stdout, so it can be piped)."""


class JsonView(View):
    """One JSON object per line on ``out``."""

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out or sys.stdout

    def emit(self, event: str, **data: Any) -> None:
        """Write ``{"event": event, **data}`` as a line."""
        self._out.write(json.dumps({"event": event, **data}, ensure_ascii=False) + "\n")
        self._out.flush()


class TextView(View):
    """Human-readable lines on ``console`` (live on a terminal, plain elsewhere)."""

    def __init__(self, console: Console | None = None, *, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.live = self.console.is_terminal
        self.quiet = quiet
        self._streaming = False

    def _print(self, *parts: tuple[str, str] | str) -> None:
        self._end_stream()
        self.console.print(Text.assemble(*parts), highlight=False)

    def _end_stream(self) -> None:
        if self._streaming:
            self.console.print()
            self._streaming = False

    def delta(self, text: str) -> None:
        """Stream the model's text (live view only)."""
        if self.live and not self.quiet and text:
            lead = "" if self._streaming else "  "
            self.console.print(Text(lead + text, style="italic"), end="", highlight=False)
            self._streaming = True

    def question(self, text: str) -> None:
        """Ask on the console (after any streamed text)."""
        self._end_stream()
        self.console.print(Text(text, style="bold"), end="", highlight=False)

    def answer(self, output: str) -> None:
        """Print the final output on stdout."""
        if output:
            sys.stdout.write(output.rstrip("\n") + "\n")
            sys.stdout.flush()

    def emit(self, event: str, **data: Any) -> None:
        """Write the event as one or a few lines."""
        if self.quiet and event not in ("run", "result", "error", "approval", "warning"):
            return
        render = getattr(self, f"_on_{event}", None)
        if render is not None:
            render(**data)

    # --- events --------------------------------------------------------------------------

    def _on_run(
        self,
        run_id: str,
        task: str,
        model: str,
        workspace: str,
        resumed: bool,
        budget: dict[str, float] | None = None,
        **_: Any,
    ) -> None:
        verb = "resuming" if resumed else "run"
        self._print((f"▶ {verb} {run_id}", "bold cyan"), f"  {one_line(task, 80)}")
        if not self.quiet:
            self._print((f"  model {model} · workspace {workspace}", "dim"))
        if budget:
            self._print((f"  budget: {budget_text(budget)}", "bold"))

    def _on_notice(self, text: str) -> None:
        self._print((f"  {text}", "dim"))

    def _on_warning(self, text: str) -> None:
        self._print((f"⚠ {text}", "bold yellow"))

    def _on_error(self, message: str, **_: Any) -> None:
        self._print(("✗ ", "bold red"), message)

    def _on_step(
        self,
        step: int,
        limit: str,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float | None,
        context_percent: float,
    ) -> None:
        bar = f"{fill_bar(context_percent)} " if self.live else ""
        self._print(
            (f"── step {step}/{limit} ", "bold"),
            (f"context {bar}{context_percent:.0f}%", "dim"),
        )

    def _on_thought(self, step: int, content: str, reasoning: str) -> None:
        if self.live and self._streaming:
            self._end_stream()
        elif content:
            self._print(("  ", ""), (one_line(content, 300), "italic"))
        if reasoning:
            self._print((f"  (reasoning) {one_line(reasoning)}", "dim italic"))

    def _on_tool_call(self, step: int, index: int, tool: str, arguments: str, source: str) -> None:
        where = "" if source in ("", "core") else f" [{source}]"
        self._print(("  → ", "cyan"), (tool + where, "bold cyan"), f" {one_line(arguments)}")

    def _on_tool_result(
        self, step: int, index: int, is_error: bool, length: int, preview: str
    ) -> None:
        mark, style = ("✗", "red") if is_error else ("✓", "green")
        self._print(
            (f"  {mark} ", style),
            one_line(headline(preview, is_error)),
            (f"  ({length} chars)", "dim"),
        )
        for line in preview.splitlines():
            if line.startswith("[verify_on_edit]"):
                ok = "passed" in line
                self._print(("  ", ""), (one_line(line), "green" if ok else "bold red"))

    def _on_diagnostic(self, step: int, name: str, details: dict[str, Any]) -> None:
        shown = ", ".join(f"{k}={one_line(str(v), 40)}" for k, v in details.items())
        self._print((f"  ! {name}", "yellow"), (f" {shown}" if shown else "", "dim"))

    def _on_context(self, percent: float, used: int, max: int, status: str) -> None:
        if status != "ok":
            self._print((f"  context {percent:.0f}% of {tokens_text(max)}: {status}", "yellow"))

    def _on_compaction(self, before: float, after: float) -> None:
        self._print((f"  ⇣ context compacted: {before:.0f}% → {after:.0f}%", "yellow"))

    def _on_finishing(self, step: int, summary: str) -> None:
        self._print(("  ⚑ finishing", "bold"))

    def _on_message_queued(self, text: str) -> None:
        self._print(("  ✉ queued for the next step: ", "magenta"), one_line(text))

    def _on_message_delivered(self, text: str) -> None:
        self._print(("  ✉ delivered to the model: ", "bold magenta"), one_line(text))

    def _on_approval(self, tool: str, decision: str, by: str, reason: str, **_: Any) -> None:
        style = "bold yellow" if decision.startswith("approved") else "red"
        auto = by == "--approve auto"
        if auto:
            decision, style = "APPROVED AUTOMATICALLY", "bold black on yellow"
        self._print((f"  ⚖ {tool} {decision} ({by})", style), (f" — {reason}", "dim"))
        if auto and TAINT_NOTE in reason:
            self._print(
                (
                    "  ⚠ this call came after untrusted content: a prompt injection could have "
                    "asked for it",
                    "bold yellow",
                )
            )

    def _on_limit(self, step: int, reason: str, decision: str) -> None:
        self._print((f"  ⚖ {limit_text(reason)}: {decision}", "yellow"))

    def _on_usage(self, summary: str, budget: str, used_percent: float | None, **_: Any) -> None:
        near = used_percent is not None and used_percent >= 80
        shown = f"  Σ {summary}" + (f" · budget: {budget}" if budget else "")
        self._print((shown, "yellow" if near else "dim"))

    def _on_result(
        self,
        run_id: str,
        exit_reason: str,
        finished: bool,
        status: str,
        steps: int,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float | None,
        exhausted_limit: str = "",
        **_: Any,
    ) -> None:
        mark, style = ("✔", "bold green") if finished else ("⏸", "bold yellow")
        if status not in ("finished", "paused"):
            mark, style = "■", "bold red"
        self._print(
            (f"{mark} {status} ({exit_reason}) · run {run_id}", style),
            (
                f" · {steps} steps · {tokens_text(input_tokens)} in · "
                f"{tokens_text(output_tokens)} out · {cost_text(cost_usd)}",
                "dim",
            ),
        )
        if exhausted_limit:
            flag = FLAGS.get(exhausted_limit, "")
            more = f" and a larger {flag}" if flag else ""
            self._print((f"  {limit_text(exhausted_limit)} is used up", "yellow"))
            self._print((f"  resume it with: sp4rk resume {run_id}{more}", "dim"))
        elif status in ("paused", "stopped", "failed"):
            self._print((f"  resume it with: sp4rk resume {run_id}", "dim"))


@dataclass(slots=True)
class LiveStatus:
    """What every step's header shows: the step budget, the context fill, tokens and cost."""

    max_steps: int
    spent: Usage
    """What the run has spent so far (resumed parts included), updated after each model call."""
    granted: int = 0
    unlimited: bool = False
    fill: float = 0.0

    def limit_text(self) -> str:
        """``30``, ``60`` after a grant, ``∞`` once lifted."""
        return "∞" if self.unlimited else str(self.max_steps + self.granted)

    def usage(self) -> Usage:
        """The run's usage so far (what the runs store saves at each boundary)."""
        return self.spent

    def usage_fields(self) -> dict[str, Any]:
        """Tokens and cost for an event."""
        return {
            "input_tokens": self.spent.input_tokens,
            "output_tokens": self.spent.output_tokens,
            "cost_usd": self.spent.cost_usd,
        }


class ViewEvents(Events):
    """The executor's events, shown through a :class:`View`."""

    def __init__(self, view: View, status: LiveStatus, queued: list[str] | None = None) -> None:
        self.view = view
        self.status = status
        self._queued = list(queued or [])
        self._shown = 0

    def delivered(self, text: str) -> None:
        """A typed message was handed to the executor: show it now."""
        self.view.emit("message_delivered", text=text)
        self._shown += 1

    def step_start(self, step_num: int) -> None:  # noqa: D102
        self.view.emit(
            "step",
            step=step_num,
            limit=self.status.limit_text(),
            context_percent=round(self.status.fill, 1),
            **self.status.usage_fields(),
        )

    def thought(self, step_num: int, content: str, reasoning: str) -> None:  # noqa: D102
        self.view.emit("thought", step=step_num, content=content, reasoning=reasoning)

    def tool_call(  # noqa: D102
        self, step_num: int, call_idx: int, tool_name: str, args_preview: str, source: str
    ) -> None:
        self.view.emit(
            "tool_call",
            step=step_num,
            index=call_idx,
            tool=tool_name,
            arguments=args_preview,
            source=source,
        )

    def tool_result(  # noqa: D102
        self, step_num: int, call_idx: int, result_len: int, preview: str, is_error: bool
    ) -> None:
        self.view.emit(
            "tool_result",
            step=step_num,
            index=call_idx,
            is_error=is_error,
            length=result_len,
            preview=preview[:2000],
        )

    def assistant_chunk(self, content: str) -> None:  # noqa: D102
        self.view.delta(content)

    def usage_update(self, step_num: int, report: BudgetReport) -> None:  # noqa: D102
        self.status.spent = Usage(
            report.usage.input_tokens, report.usage.output_tokens, report.cost_usd
        )
        limits = {name: {"spent": used, "max": top} for name, (used, top) in report.limits.items()}
        self.view.emit(
            "usage",
            step=step_num,
            **self.status.usage_fields(),
            seconds=round(report.seconds, 1),
            tool_calls=report.tool_calls,
            model_calls=report.model_calls,
            limits=limits,
            used_percent=round(report.max_fraction * 100, 1) if limits else None,
            summary=report.summary(),
            budget=report.describe() if limits else "",
        )

    def context_fill(  # noqa: D102
        self, fill_percent: float, used_tokens: int, max_tokens: int, status: str, step_id: str
    ) -> None:
        self.status.fill = fill_percent
        self.view.emit(
            "context",
            percent=round(fill_percent, 1),
            used=used_tokens,
            max=max_tokens,
            status=status,
        )

    def context_compaction(  # noqa: D102
        self, before_percent: float, after_percent: float, step_id: str
    ) -> None:
        self.view.emit("compaction", before=round(before_percent, 1), after=round(after_percent, 1))

    def finishing(self, step_num: int, summary: str) -> None:  # noqa: D102
        self.view.emit("finishing", step=step_num, summary=summary)

    def executor_diagnostic(  # noqa: D102
        self, step_num: int, event: str, details: dict[str, Any]
    ) -> None:
        if event not in ("live_user_message", "verify_on_edit"):
            self.view.emit("diagnostic", step=step_num, name=event, details=_jsonable(details))
        elif self._shown:  # a typed message, shown as it was handed over
            self._shown -= 1
        elif self._queued:  # one queued in the run's state (sp4rk resume ID MESSAGE)
            self.view.emit("message_delivered", text=self._queued.pop(0))


def _jsonable(details: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in details.items():
        ok = isinstance(value, str | int | float | bool) or value is None
        out[key] = value if ok else str(value)
    return out
