"""An in-memory OpenTelemetry SDK for the tests: every finished span and metric point, read back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK is a dev dependency")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sp4rk.otel import OpenTelemetryEvents


class Telemetry:
    """Providers that keep what they get, and ways to look at it."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def events(self, **kwargs: Any) -> OpenTelemetryEvents:
        return OpenTelemetryEvents(self.tracer_provider, self.meter_provider, **kwargs)

    @property
    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.named(name)
        return span

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        assert parent.context is not None
        return [s for s in self.spans if s.parent and s.parent.span_id == parent.context.span_id]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == metric
            for point in m.data.data_points
        ]

    def exported_strings(self) -> Iterator[str]:
        """Every string a span carries: names, attributes, events, status, resource excluded."""
        for span in self.spans:
            yield span.name
            if span.status.description:
                yield span.status.description
            yield from _strings(span.attributes)
            for event in span.events:
                yield event.name
                yield from _strings(event.attributes)


def _strings(attributes: Any) -> Iterator[str]:
    for key, value in (attributes or {}).items():
        yield key
        for item in value if isinstance(value, tuple | list) else (value,):
            yield str(item)
