"""Batch throughput: N scripted tasks through ``sp4rk.batch.run_batch``, here and on local Ray.

Each task writes a file in its own copy of a small workspace (``--approve auto``), then
finishes: two model calls (a zero-latency scripted model), one tool call, every step committed
to the runs store (SQLite, ``synchronous=FULL``) as it happens. What is measured is sp4rk's own
cost at scale: scheduling, workspace copies, the executor, the tools and the durable store.

    PYTHONPATH=src python bench/batch.py                       # 1,000 tasks, local and Ray
    PYTHONPATH=src python bench/batch.py --tasks 200 --no-ray
    PYTHONPATH=src python bench/batch.py --latency 1 --concurrency 64 --no-ray   # a slow model

``--latency S`` makes every model call take S seconds (a provider's latency), to show the
model-call concurrency a batch keeps. Writes ``bench/results/batch.json`` (with ``--latency``:
``batch-latency.json``). Ray needs the ``ray`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from sp4rk.batch import BatchModel, BatchReport, run_batch
from sp4rk.cli.batch import batch_model
from sp4rk.llm import ChatRequest, ChatResponse

RESULTS = Path(__file__).resolve().parent / "results"


class Slow:
    """A model whose every call takes ``seconds`` before it answers."""

    def __init__(self, inner: Any, seconds: float) -> None:
        self.inner = inner
        self.seconds = seconds
        self.model = getattr(inner, "model", "")

    async def call(self, request: ChatRequest) -> ChatResponse:
        await asyncio.sleep(self.seconds)
        response: ChatResponse = await self.inner.call(request)
        return response


def slow_model(spec: str, *, base: str, latency: float) -> BatchModel:
    model = batch_model(spec, base=base)
    if latency:
        model.caller = Slow(model.caller, latency)
    return model


def write_tasks(root: Path, n: int) -> Path:
    seed = root / "seed"
    seed.mkdir(parents=True)
    (seed / "README.md").write_text("a small workspace\n")
    (seed / "src").mkdir()
    for k in range(5):
        (seed / "src" / f"m{k}.py").write_text(f"X = {k}\n" * 40)
    script = root / "script.json"
    script.write_text(
        json.dumps(
            [
                {
                    "content": "writing the answer",
                    "tool_calls": [
                        {"name": "write_file", "arguments": {"path": "out.txt", "content": "42\n"}}
                    ],
                    "usage": {"input_tokens": 1200, "output_tokens": 40},
                },
                {
                    "tool_calls": [{"name": "finish", "arguments": {"answer": "42"}}],
                    "usage": {"input_tokens": 1300, "output_tokens": 10},
                },
            ]
        )
    )
    tasks = root / "tasks.jsonl"
    with tasks.open("w") as f:
        for i in range(n):
            line = {"id": f"task-{i:04d}", "task": "write 42 to out.txt", "workspace": "seed"}
            f.write(json.dumps(line) + "\n")
    return tasks


def one(
    root: Path, n: int, concurrency: int, ray: bool, ray_cpus: float, latency: float = 0.0
) -> BatchReport:
    tasks = write_tasks(root, n)
    report = run_batch(
        tasks,
        root / "results.jsonl",
        store=root / "runs.db",
        model=f"scripted:{root / 'script.json'}",
        model_factory=functools.partial(slow_model, base=str(root), latency=latency),
        concurrency=concurrency,
        approve="auto",
        ray=ray,
        ray_cpus=ray_cpus,
    )
    if not report.done or report.finished != n:
        raise SystemExit(f"the batch did not finish every task:\n{report.describe()}")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--ray-cpus", type=float, default=0.5)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--latency", type=float, default=0.0, metavar="S")
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    runs: dict[str, Any] = {}
    load_before = os.getloadavg()[0]
    for name, on_ray in (("local", False), ("ray", True)):
        if on_ray and args.no_ray:
            continue
        with tempfile.TemporaryDirectory(prefix=f"sp4rk-bench-{name}-") as tmp:
            report = one(
                Path(tmp), args.tasks, args.concurrency, on_ray, args.ray_cpus, args.latency
            )
        print(report.describe(), flush=True)
        runs[name] = report.to_dict()
    info = {
        "tasks": args.tasks,
        "concurrency": args.concurrency,
        "ray_cpus_per_task": args.ray_cpus,
        "model_latency_seconds": args.latency,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d"),
        "runs": runs,
    }
    target = RESULTS / ("batch-latency.json" if args.latency else "batch.json")
    target.write_text(json.dumps(info, indent=2) + "\n")
    print(f"written to {target}")


if __name__ == "__main__":
    main()
