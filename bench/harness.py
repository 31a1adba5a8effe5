"""The worker side: one contender, one scenario, in this process; results as a JSON-able dict.

Timing. A run's own cost is the process's CPU time during the run minus the time spent inside
the scripted model and the tool (:class:`~anchors.common.Probe`): model latency never counts,
and neither does time other processes take the CPU away (the development machines are shared).
µs/step divides it by the run's tool steps (the final-answer turn is part of the run); repeated
runs report their best. Growth compares windows of steps on the same CPU clock. The per-step
curves are wall-clock (the CPU clock is too slow to read at every step) and give the shape.
S3 and S5 are about waiting, so their efficiency is wall time; S5 also reports the process's CPU
time per tool step (everything in the process: the executor, the scripted model and the tool,
the event loop) and the RSS each run adds. Building the agent happens before the clock starts,
for every contender alike.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import statistics
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from anchors.common import (
    REPS,
    S1_RESULT_BYTES,
    S1_STEPS,
    S2_EARLY,
    S2_LATE,
    S2_RESULT_BYTES,
    S2_STEPS,
    S3_CALLS,
    S3_LATENCY_S,
    S3_RESULT_BYTES,
    S3_RUNS,
    S4_EARLY,
    S4_LATE,
    S4_RESULT_BYTES,
    S4_RSS_EVERY,
    S4_STEPS,
    S5_CALLS,
    S5_LATENCY_S,
    S5_RESULT_BYTES,
    S5_RUNS,
    Probe,
    RunSpec,
    peak_rss_mb,
    rss_mb,
)

#: Runs of each start-up command (medians reported).
STARTUP_REPS = 7
#: S4's curve is stored as means over buckets of this many steps.
S4_BUCKET = 100


@dataclass(frozen=True, slots=True)
class Timed:
    """One measured run."""

    wall: float
    cpu: float
    probe: Probe

    def own_us_per_step(self, steps: int) -> float:
        """Own CPU µs per tool step."""
        return self.probe.own_cpu(self.cpu) / steps * 1e6


def run_worker(module: ModuleType, scenario: str) -> dict[str, Any]:
    """Warm ``module`` up, run ``scenario`` once, and report it with RSS and versions."""
    out: dict[str, Any] = {"rss_import_mb": rss_mb(), "versions": _versions(module)}
    _timed_run(module, RunSpec(10, S1_RESULT_BYTES))  # warm-up: lazy imports, caches
    out.update(SCENARIOS[scenario](module))
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def _versions(module: ModuleType) -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in module.DISTRIBUTIONS}


def _timed_run(module: ModuleType, spec: RunSpec, probe: Probe | None = None) -> Timed:
    """Prepare one run, then time it."""
    probe = probe or Probe()
    run = module.prepare(spec, probe)
    gc.collect()
    if module.CONCURRENCY == "asyncio":
        wall, cpu = asyncio.run(_timed(run))
    else:
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return Timed(wall, cpu, probe)


async def _timed(run: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    await run()
    return time.perf_counter() - wall, time.process_time() - cpu


def _repeated(module: ModuleType, spec: RunSpec, marks: Collection[int] = ()) -> list[Timed]:
    """``REPS`` timed runs, each checked to have made exactly the scripted calls."""
    runs = [_timed_run(module, spec, Probe(marks)) for _ in range(REPS)]
    for run in runs:
        calls = (len(run.probe.model_seconds), len(run.probe.tool_seconds))
        if calls != (spec.steps + 1, spec.steps):
            raise RuntimeError(
                f"expected {spec.steps + 1} model and {spec.steps} tool calls, got {calls}: "
                "the contender did not follow the script, so its cost per step is not comparable"
            )
    return runs


def _marks(*windows: tuple[int, int]) -> set[int]:
    """The tool calls whose CPU clock :meth:`Probe.window_cost` needs for ``windows``."""
    return {call for first, last in windows for call in (first - 1, last)}


def s1_overhead(module: ModuleType) -> dict[str, Any]:
    """S1: own µs/step at N tool steps with 200-byte results (median of the repetitions)."""
    median, reps = {}, {}
    for steps in S1_STEPS:
        runs = _repeated(module, RunSpec(steps, S1_RESULT_BYTES))
        median[str(steps)] = statistics.median(run.own_us_per_step(steps) for run in runs)
        reps[str(steps)] = len(runs)
    return {"us_per_step": median, "reps": reps}


def s2_growth(module: ModuleType) -> dict[str, Any]:
    """S2: 500 steps with 4 KB results: median µs/step, late/early growth, the median curve."""
    runs = _repeated(module, RunSpec(S2_STEPS, S2_RESULT_BYTES), _marks(S2_EARLY, S2_LATE))
    early = [run.probe.window_cost(*S2_EARLY) * 1e6 for run in runs]
    late = [run.probe.window_cost(*S2_LATE) * 1e6 for run in runs]
    curves = [run.probe.step_costs() for run in runs]
    return {
        "us_per_step": statistics.median(run.own_us_per_step(S2_STEPS) for run in runs),
        "reps": len(runs),
        "early_us": statistics.median(early),
        "late_us": statistics.median(late),
        # the median of each run's own ratio: early and late from the same run
        "growth": statistics.median(lt / e for lt, e in zip(late, early, strict=True)),
        "curve_us": [round(statistics.median(step) * 1e6, 2) for step in zip(*curves, strict=True)],
    }


def s3_concurrency(module: ModuleType) -> dict[str, Any]:
    """S3: 200 concurrent runs of 20 model calls, each call sleeping 50 ms (wall time)."""
    _timed_run(module, RunSpec(S3_CALLS - 1, S3_RESULT_BYTES))  # warm the scenario's shape
    spec = RunSpec(S3_CALLS - 1, S3_RESULT_BYTES, S3_LATENCY_S)
    runs = [module.prepare(spec, Probe()) for _ in range(S3_RUNS)]
    gc.collect()
    if module.CONCURRENCY == "asyncio":
        wall, cpu = asyncio.run(_timed(lambda: _gather(runs)))
    else:
        with ThreadPoolExecutor(max_workers=S3_RUNS) as pool:
            wall, cpu = time.perf_counter(), time.process_time()
            for future in [pool.submit(run) for run in runs]:
                future.result()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    ideal = S3_CALLS * S3_LATENCY_S
    return {"wall_s": wall, "ideal_s": ideal, "efficiency": ideal / wall, "cpu_s": cpu}


async def _gather(runs: Sequence[Callable[[], Awaitable[None]]]) -> None:
    await asyncio.gather(*(run() for run in runs))


def s4_endurance(module: ModuleType) -> dict[str, Any]:
    """S4: 10 000 steps with 1 MB results; step cost and RSS along the run.

    sp4rk runs with the SQLite runs store attached (its flat-memory configuration: committed
    observations are read back from the store); ``s4_memory.py`` measures it without one.
    """
    probe = Probe(_marks(S4_EARLY, S4_LATE), rss_every=S4_RSS_EVERY)
    spec = RunSpec(S4_STEPS, S4_RESULT_BYTES, endurance=True, store=True)
    run = _timed_run(module, spec, probe)
    early, late = probe.window_cost(*S4_EARLY) * 1e6, probe.window_cost(*S4_LATE) * 1e6
    costs = probe.step_costs()
    rss = dict(probe.rss_samples)
    return {
        "us_per_step": run.own_us_per_step(S4_STEPS),
        "wall_s": run.wall,
        "early_us": early,
        "late_us": late,
        "growth": late / early,
        "rss_mb": {str(step): round(mb, 1) for step, mb in probe.rss_samples},
        "rss_early_mb": rss[S4_EARLY[0] - 1],
        "rss_late_mb": rss[S4_STEPS],
        "bucket_steps": S4_BUCKET,
        "curve_us": [
            round(statistics.fmean(costs[i : i + S4_BUCKET]) * 1e6, 2)
            for i in range(0, len(costs), S4_BUCKET)
        ],
    }


def s5_many_runs(module: ModuleType) -> dict[str, Any]:
    """S5: 2,000 concurrent runs of 20 model calls (50 ms each, 4 KB results) in one process.

    Efficiency is the ideal wall time over the actual; CPU per step is the process's CPU time
    over every run's tool steps; RSS per run is the peak RSS the runs added, shared out.
    """
    _timed_run(module, RunSpec(S5_CALLS - 1, S5_RESULT_BYTES))  # warm the scenario's shape
    gc.collect()
    before = rss_mb()
    spec = RunSpec(S5_CALLS - 1, S5_RESULT_BYTES, S5_LATENCY_S)
    runs = [module.prepare(spec, Probe()) for _ in range(S5_RUNS)]
    if module.CONCURRENCY != "asyncio":
        raise RuntimeError("S5 runs every contender on one event loop")
    wall, cpu = asyncio.run(_timed(lambda: _gather(runs)))
    ideal = S5_CALLS * S5_LATENCY_S
    steps = S5_RUNS * (S5_CALLS - 1)
    return {
        "runs": S5_RUNS,
        "wall_s": wall,
        "ideal_s": ideal,
        "efficiency": ideal / wall,
        "cpu_s": cpu,
        "cpu_us_per_step": cpu / steps * 1e6,
        "rss_per_run_kb": max(0.0, peak_rss_mb() - before) * 1024 / S5_RUNS,
    }


def startup_times(module: ModuleType) -> dict[str, Any]:
    """Import and start-up: ``import sp4rk.agent`` and ``sp4rk --help`` in fresh processes."""
    if "sp4rk" not in module.DISTRIBUTIONS:
        raise RuntimeError("the start-up scenario measures sp4rk only")
    import startup  # bench/startup.py: only this scenario needs it

    return startup.measure(STARTUP_REPS)


SCENARIOS: dict[str, Callable[[ModuleType], dict[str, Any]]] = {
    "S1": s1_overhead,
    "S2": s2_growth,
    "S3": s3_concurrency,
    "S4": s4_endurance,
    "S5": s5_many_runs,
    "startup": startup_times,
}
