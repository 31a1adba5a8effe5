"""What tracing costs sp4rk: S2 with and without ``OpenTelemetryEvents``, in one process.

Variants, each run ``--reps`` times in turn (A B C D A B C D ...), so a change in the machine's
load hits them alike; own µs per tool step is measured as in ``run.py`` (CPU time minus the
scripted model's and the tool's), medians reported with the load average:

- ``off``: the default sink (nobody listens; the executor skips every event);
- ``api``: ``OpenTelemetryEvents()`` with no SDK configured (the API's no-op spans);
- ``sdk``: the OpenTelemetry SDK with a batch span processor and a metric reader, its exporter
  dropping what it gets (everything but the network; the export thread's CPU time counts);
- ``sdk+content``: the same with ``capture_content=True`` (every prompt serialised and masked).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Sequence
from functools import partial
from types import SimpleNamespace
from typing import Any

from anchors.common import S2_RESULT_BYTES, S2_STEPS, RunSpec, go_offline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7, help="runs per variant (default: 7)")
    parser.add_argument("--steps", type=int, default=S2_STEPS, help="tool steps per run")
    parser.add_argument("--no-content", action="store_true", help="skip sdk+content (slow)")
    args = parser.parse_args()
    go_offline()
    # go_offline() switches every OpenTelemetry SDK off (for the peers); this measures ours.
    os.environ.pop("OTEL_SDK_DISABLED", None)

    from harness import _timed_run

    variants, exported = _variants(with_content=not args.no_content)
    spec = RunSpec(args.steps, S2_RESULT_BYTES)
    for module in variants.values():
        _timed_run(module, RunSpec(10, S2_RESULT_BYTES))  # warm-up
    load_before = os.getloadavg()[0]
    costs: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.reps):
        for name, module in variants.items():
            costs[name].append(_timed_run(module, spec).own_us_per_step(args.steps))
    load_after = os.getloadavg()[0]
    base = statistics.median(costs["off"])
    report: dict[str, Any] = {
        "steps": args.steps,
        "result_bytes": S2_RESULT_BYTES,
        "reps": args.reps,
        "load_before": load_before,
        "load_after": load_after,
        "spans_exported": exported(),
        "us_per_step": {n: round(statistics.median(c), 1) for n, c in costs.items()},
        "added_us_per_step": {
            n: round(statistics.median(c) - base, 1) for n, c in costs.items() if n != "off"
        },
        "runs": {n: [round(x, 1) for x in c] for n, c in costs.items()},
    }
    print(json.dumps(report, indent=1))


def _variants(*, with_content: bool) -> tuple[dict[str, Any], Any]:
    """The contender modules to compare, and a function counting the spans the SDK exported."""
    from contenders import sp4rk_runner
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from sp4rk.otel import OpenTelemetryEvents

    class Dropping(SpanExporter):
        """Takes every batch and keeps only the count."""

        def __init__(self) -> None:
            self.count = 0

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            self.count += len(spans)
            return SpanExportResult.SUCCESS

    exporter = Dropping()
    tracer_provider = TracerProvider()
    processor = BatchSpanProcessor(exporter)
    tracer_provider.add_span_processor(processor)
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

    def module(events: Any) -> SimpleNamespace:
        return SimpleNamespace(
            prepare=partial(sp4rk_runner.prepare, events=events),
            CONCURRENCY=sp4rk_runner.CONCURRENCY,
        )

    variants = {
        "off": module(None),
        "api": module(OpenTelemetryEvents()),
        "sdk": module(OpenTelemetryEvents(tracer_provider, meter_provider)),
    }
    if with_content:
        traced = OpenTelemetryEvents(tracer_provider, meter_provider, capture_content=True)
        variants["sdk+content"] = module(traced)

    def exported() -> int:
        processor.force_flush()
        return exporter.count

    return variants, exported


if __name__ == "__main__":
    main()
