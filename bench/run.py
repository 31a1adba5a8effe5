"""``make bench``: every contender through every scenario, then one table, one JSON, one plot.

Each (contender, scenario) pair runs in a fresh worker process (``--worker``), so one framework's
imports, garbage and peak RSS never reach another's numbers. Everything runs offline: workers
silence telemetry and refuse any IP connection (:func:`anchors.common.go_offline`).

Writes ``bench/results/latest.json``, ``bench/results/table.md`` and
``bench/results/per_step.png``; a full run also refreshes the results section of
``bench/README.md``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from anchors.common import TELEMETRY_OFF_ENV, go_offline

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
README = BENCH / "README.md"
README_START, README_END = "<!-- results:start -->", "<!-- results:end -->"


@dataclass(frozen=True)
class Contender:
    """A row of the table: its label, its module under ``contenders/``, its scenarios."""

    label: str
    module: str
    scenarios: tuple[str, ...] = ("S1", "S2", "S3", "S5")


CONTENDERS = (
    Contender("floor", "floor"),
    Contender("sp4rk", "sp4rk_runner", ("S1", "S2", "S3", "S4", "S5", "startup")),
    Contender("LangGraph", "langgraph_runner"),
    Contender("smolagents", "smolagents_runner", ("S1", "S2", "S3")),  # S5: 2,000 threads
    Contender("pydantic-ai", "pydantic_ai_runner"),
    Contender("openai-agents", "openai_agents_runner"),
)
SCENARIOS = ("S1", "S2", "S3", "S4", "S5", "startup")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, with ``--worker``, one scenario of one contender)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated contender labels (default: all)")
    parser.add_argument(
        "--scenarios", help="comma-separated scenarios (default: all of S1-S5 and startup)"
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per worker")
    parser.add_argument(
        "--report", action="store_true", help="only rebuild the outputs from results/latest.json"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _work(args.worker, args.scenario, Path(args.out))

    if args.report:
        saved = json.loads((RESULTS / "latest.json").read_text())
        _write(saved["machine"], saved["results"], readme=saved["full"])
        return 0

    labels = {c.label.lower() for c in CONTENDERS}
    wanted = set(args.only.lower().split(",")) if args.only else labels
    scenarios = (
        {s.upper() if s.lower() != "startup" else "startup" for s in args.scenarios.split(",")}
        if args.scenarios
        else set(SCENARIOS)
    )
    if not wanted <= labels or not scenarios <= set(SCENARIOS):
        parser.error(f"contenders: {sorted(labels)}; scenarios: {list(SCENARIOS)}")

    load_before = os.getloadavg()[0]
    results: dict[str, dict[str, Any]] = {}
    for contender in CONTENDERS:
        if contender.label.lower() not in wanted:
            continue
        for scenario in (s for s in contender.scenarios if s in scenarios):
            started = time.monotonic()
            result = _spawn(contender.module, scenario, args.timeout)
            results.setdefault(contender.label, {})[scenario] = result
            took = time.monotonic() - started
            print(f"{contender.label:>14} {scenario}: {result.get('error', 'ok')} ({took:.0f} s)")

    machine = {**_machine(), "load_before": load_before, "load_after": os.getloadavg()[0]}
    RESULTS.mkdir(exist_ok=True)
    full = wanted == labels and scenarios == set(SCENARIOS)
    report = {"machine": machine, "full": full, "results": results}
    failed = [
        f"{label} {scenario}: {r['error']}"
        for label, per in results.items()
        for scenario, r in per.items()
        if "error" in r and not r["error"].startswith("not installed")
    ]
    if not full:  # a partial run never replaces the published full results
        print(json.dumps(report, indent=1))
        return 1 if failed else 0
    (RESULTS / "latest.json").write_text(json.dumps(report, indent=1) + "\n")
    _write(machine, results, readme=True)
    if failed:
        print("\nFAILED:\n  " + "\n  ".join(failed), file=sys.stderr)
    return 1 if failed else 0


def _write(machine: dict[str, Any], results: dict[str, dict[str, Any]], *, readme: bool) -> None:
    """Write the table and the plot (and the README's results section when ``readme``)."""
    from report import plot, table  # imported here so that matplotlib stays out of the workers

    text = table(machine, results)
    (RESULTS / "table.md").write_text("# Executor overhead: latest results\n\n" + text)
    plot(results, RESULTS / "per_step.png")
    if readme:
        _update_readme(text)
    print("\n" + text)


def _spawn(module: str, scenario: str, timeout: float) -> dict[str, Any]:
    """Run one worker process; its result, or ``{"error": ...}`` when it failed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, __file__, "--worker", module, "--scenario", scenario]
        try:
            done = subprocess.run(
                [*command, "--out", str(out)],
                env={**os.environ, **TELEMETRY_OFF_ENV},
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        if not out.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {"error": f"worker exited {done.returncode}: {' '.join(tail)}"}
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def _work(module_name: str, scenario: str, out: Path) -> int:
    """Worker process: import the contender offline, run the scenario, write the JSON."""
    go_offline()
    from harness import run_worker

    try:
        module = importlib.import_module(f"contenders.{module_name}")
    except ImportError as exc:
        missing = exc.name or ""
        if missing.split(".")[0] in ("sp4rk", "anchors", "harness", "contenders"):
            raise  # our own code failing to import is a failure, not a missing peer
        result: dict[str, Any] = {"error": f"not installed ({missing or exc})"}
    else:
        try:
            result = run_worker(module, scenario)
        except Exception as exc:
            traceback.print_exc()
            result = {"error": f"{type(exc).__name__}: {exc}"}
    out.write_text(json.dumps(result))
    return 0


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    if _git("status", "--porcelain", "--", "../src"):
        commit += " + uncommitted changes in src/"
    return {
        "taken": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
        "commit": commit,
    }


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=BENCH, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def _update_readme(text: str) -> None:
    readme = README.read_text()
    head, start, rest = readme.partition(README_START)
    _, end, tail = rest.partition(README_END)
    if not start or not end:
        return
    body = f"\n{text}\n![per-step cost](results/per_step.png)\n"
    README.write_text(head + start + body + end + tail)


if __name__ == "__main__":
    sys.exit(main())
