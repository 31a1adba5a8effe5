"""The throughput report of a batch: how fast, how concurrent, how cheap per step, what failed.

- **tasks/s**: result lines written by this invocation over its wall-clock time (less the
  time it took to connect to Ray, reported apart).
- **model-call concurrency**: model calls in flight, averaged over that time (the sum of every
  call's duration over it), and the most at once.
- **executor CPU per step**: CPU time of the processes that drove the runs (the executor,
  tools, store writes, the scheduler) over the steps they took. Locally that is this process;
  on Ray, the workers' CPU time while running tasks.
- **failures by kind**: every attempt that failed (``model error (RateLimitError)``,
  ``worker died``, …, retried ones included) and every run that ended unfinished, by its exit
  reason (``step_limit``, ``budget_exhausted``, …).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from sp4rk.batch.results import BatchResult
from sp4rk.batch.runner import TaskOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchReport:
    """What a batch invocation did, and how fast."""

    backend: str
    """``local`` or ``ray``."""
    tasks: int
    """Tasks in the task file."""
    skipped: int
    """Tasks whose result line was there already."""
    completed: int
    """Result lines written by this invocation."""
    finished: int
    unfinished: int
    """Runs that ended at a limit, a breaker or a gate (their result says which)."""
    failed: int
    """Runs that ended with an error after their last attempt."""
    paused: int
    """Tasks left for the next invocation: paused, stopped, not started, or busy elsewhere."""
    resumed: int
    """Attempts that continued a run from the store."""
    retries: int
    seconds: float
    """Wall-clock time of the invocation, ``startup_seconds`` included."""
    startup_seconds: float
    """Of ``seconds``: connecting to Ray (starting a local instance takes seconds)."""
    steps: int
    model_calls: int
    concurrency_mean: float
    concurrency_peak: int
    cpu_seconds: float
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    """``None`` when some model's price is unknown."""
    failures: dict[str, int] = field(default_factory=dict)

    @property
    def tasks_per_second(self) -> float:
        """Result lines written per wall-clock second, once the tasks could start."""
        running = self.seconds - self.startup_seconds
        return self.completed / running if running > 0 else 0.0

    @property
    def cpu_per_step_ms(self) -> float | None:
        """Executor CPU milliseconds per step (``None`` when no step was taken)."""
        return self.cpu_seconds * 1000 / self.steps if self.steps else None

    @property
    def done(self) -> bool:
        """Every task of the file has its result line."""
        return self.skipped + self.completed == self.tasks

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON data (with the derived rates)."""
        data = asdict(self)
        data["tasks_per_second"] = round(self.tasks_per_second, 3)
        per_step = self.cpu_per_step_ms
        data["cpu_per_step_ms"] = None if per_step is None else round(per_step, 3)
        data["seconds"] = round(self.seconds, 3)
        data["startup_seconds"] = round(self.startup_seconds, 3)
        data["cpu_seconds"] = round(self.cpu_seconds, 3)
        data["concurrency_mean"] = round(self.concurrency_mean, 2)
        return data

    def describe(self) -> str:
        """The report as a few lines of text."""
        cost = "cost unknown" if self.cost_usd is None else f"${self.cost_usd:,.4f}"
        per_step = self.cpu_per_step_ms
        cpu = "—" if per_step is None else f"{per_step:.2f} ms"
        lines = [
            f"batch ({self.backend}): {self.completed} done now, {self.skipped} done before, "
            f"{self.paused} left, of {self.tasks} tasks",
            f"  finished {self.finished} · unfinished {self.unfinished} · failed {self.failed} · "
            f"resumed {self.resumed} · retries {self.retries}",
            f"  throughput {self.tasks_per_second:,.1f} tasks/s ({self.seconds:,.1f} s"
            + (
                f", {self.startup_seconds:,.1f} s of it starting Ray"
                if self.startup_seconds
                else ""
            )
            + f") · {self.steps:,} steps · {self.model_calls:,} model calls",
            f"  model-call concurrency: mean {self.concurrency_mean:,.1f}, peak "
            f"{self.concurrency_peak:,}",
            f"  executor CPU per step: {cpu} ({self.cpu_seconds:,.1f} s CPU)",
            f"  tokens {self.input_tokens:,} in + {self.output_tokens:,} out · {cost}",
        ]
        if self.failures:
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.failures.items()))
            lines.append(f"  failures by kind: {kinds}")
        return "\n".join(lines)


def concurrency(intervals: list[tuple[float, float]], wall: float) -> tuple[float, int]:
    """Mean calls in flight over ``wall`` seconds, and the most at once."""
    if not intervals or wall <= 0:
        return 0.0, 0
    busy = sum(max(0.0, end - start) for start, end in intervals)
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = peak = 0
    for _, delta in edges:  # an end sorts before a start at the same instant
        now += delta
        peak = max(peak, now)
    return busy / wall, peak


class Tally:
    """Counts a batch's outcomes as they arrive, for its :class:`BatchReport`."""

    def __init__(self, backend: str, tasks: int, skipped: int) -> None:
        self.backend = backend
        self.tasks = tasks
        self.skipped = skipped
        self.written: list[BatchResult] = []
        self.paused = 0
        self.resumed = 0
        self.retries = 0
        self.steps = 0
        self.calls: list[tuple[float, float]] = []
        self.cpu_seconds = 0.0
        self.failures: Counter[str] = Counter()

    def attempt(self, outcome: TaskOutcome) -> None:
        """Count one attempt's work (whatever came of it)."""
        self.steps += outcome.steps
        self.calls.extend(outcome.calls)
        self.cpu_seconds += outcome.cpu_seconds
        self.resumed += outcome.resumed
        if outcome.status == "failed":
            self.failures[outcome.failure or "error"] += 1

    def failure(self, kind: str) -> None:
        """Count a failure that no outcome reports (a worker that died)."""
        self.failures[kind] += 1

    def result(self, result: BatchResult) -> None:
        """Count a result line written."""
        self.written.append(result)
        if not result.finished and not result.failed:
            self.failures[result.exit_reason] += 1

    def report(
        self, seconds: float, cpu_seconds: float | None = None, startup_seconds: float = 0.0
    ) -> BatchReport:
        """The report over ``seconds`` of wall time.

        ``cpu_seconds`` replaces the sum of the attempts' CPU where one process drove them all.
        """
        mean, peak = concurrency(self.calls, seconds - startup_seconds)
        costs = [r.cost_usd for r in self.written]
        return BatchReport(
            backend=self.backend,
            tasks=self.tasks,
            skipped=self.skipped,
            completed=len(self.written),
            finished=sum(r.finished for r in self.written),
            unfinished=sum(not r.finished and not r.failed for r in self.written),
            failed=sum(r.failed for r in self.written),
            paused=self.tasks - self.skipped - len(self.written),
            resumed=self.resumed,
            retries=self.retries,
            seconds=seconds,
            startup_seconds=startup_seconds,
            steps=self.steps,
            model_calls=len(self.calls),
            concurrency_mean=mean,
            concurrency_peak=peak,
            cpu_seconds=self.cpu_seconds if cpu_seconds is None else cpu_seconds,
            input_tokens=sum(r.input_tokens for r in self.written),
            output_tokens=sum(r.output_tokens for r in self.written),
            cost_usd=None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
            failures=dict(self.failures),
        )
