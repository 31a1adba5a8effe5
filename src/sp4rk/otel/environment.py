"""Tracing set up from the standard ``OTEL_*`` variables, for a command line's ``--otel``.

A library leaves the SDK to the application; a command is an application, and this is what
it calls. Exporters are found the way the OpenTelemetry SDK's own auto-configuration finds
them, by the entry points their packages register, so any installed exporter works.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
from typing import Any

from opentelemetry import metrics, trace

from sp4rk.otel.events import OpenTelemetryEvents, check_agent_name

_log = logging.getLogger("sp4rk.otel")
_log.addHandler(logging.NullHandler())

#: ``OTEL_EXPORTER_OTLP_PROTOCOL`` → the entry point of the OTLP exporter for it.
_OTLP = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
_OTLP_PACKAGES = {
    "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http",
    "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc",
}
#: What GenAI instrumentations read to decide whether to capture message content.
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def configure_from_environment(
    *, capture_content: bool | None = None, agent_name: str = "sp4rk"
) -> OpenTelemetryEvents | None:
    """An ``OpenTelemetryEvents`` exporting where the ``OTEL_*`` variables say.

    With the OpenTelemetry SDK installed, sets the global tracer and meter providers (an SDK
    provider the application set already is kept): exporters from ``OTEL_TRACES_EXPORTER``
    and ``OTEL_METRICS_EXPORTER`` (comma-separated; ``otlp`` by default, ``console``,
    ``none``, or any exporter an installed package registers), the OTLP protocol from
    ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf`` by default, or ``grpc``); endpoint,
    headers, sampler, batching and export interval from their usual variables; the service
    from ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (``sp4rk`` when unnamed).
    The providers flush and shut down when the process exits.

    Args:
        capture_content: export prompts, completions, tool arguments and results (masked);
            ``None`` reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
        agent_name: ``gen_ai.agent.name`` of the runs.

    Returns:
        The event sink, or ``None`` when the SDK is not installed (a warning says what to
        install) or ``OTEL_SDK_DISABLED`` is ``true``.

    Raises:
        ValueError: an exporter name nothing registers, or an empty ``agent_name``.
        ImportError: an OTLP exporter whose package is not installed (the message names it).
    """
    check_agent_name(agent_name)
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        _log.warning(
            "OpenTelemetry export needs the SDK and an exporter: "
            "pip install opentelemetry-sdk opentelemetry-exporter-otlp"
        )
        return None
    if capture_content is None:
        capture_content = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    tracer_provider, meter_provider = trace.get_tracer_provider(), metrics.get_meter_provider()
    # Every exporter is built before any global changes, so a bad variable changes nothing.
    new_tracing = not isinstance(tracer_provider, TracerProvider)
    new_metrics = not isinstance(meter_provider, MeterProvider)
    span_exporters = _exporters("traces") if new_tracing else []
    metric_exporters = _exporters("metrics") if new_metrics else []
    if new_tracing:
        tracer_provider = TracerProvider(resource=_resource())
        for exporter in span_exporters:
            tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(tracer_provider)
    if new_metrics:
        readers = [PeriodicExportingMetricReader(e) for e in metric_exporters]
        meter_provider = MeterProvider(metric_readers=readers, resource=_resource())
        metrics.set_meter_provider(meter_provider)
    return OpenTelemetryEvents(
        tracer_provider, meter_provider, capture_content=capture_content, agent_name=agent_name
    )


def _resource() -> Any:
    from opentelemetry.sdk.resources import Resource

    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "sp4rk"}))
    return resource


def _exporters(signal: str) -> list[Any]:
    """The exporters ``OTEL_{SIGNAL}_EXPORTER`` names, built with their defaults.

    Raises:
        ValueError: a name no installed package registers.
        ImportError: the OTLP exporter for the configured protocol is not installed.
    """
    names = os.environ.get(f"OTEL_{signal.upper()}_EXPORTER", "otlp")
    out = []
    for name in (n.strip() for n in names.split(",")):
        if name in ("", "none"):
            continue
        if name == "otlp":
            name = _otlp_entry_point(signal)
        points = importlib.metadata.entry_points(
            group=f"opentelemetry_{signal}_exporter", name=name
        )
        if not points:
            if name in _OTLP_PACKAGES:
                raise ImportError(
                    f"OTEL_{signal.upper()}_EXPORTER=otlp needs {_OTLP_PACKAGES[name]}: "
                    f"pip install {_OTLP_PACKAGES[name]} (or set the variable to console "
                    "or none)"
                )
            raise ValueError(
                f"OTEL_{signal.upper()}_EXPORTER names {name!r}, which no installed package "
                "provides: use otlp, console or none"
            )
        out.append(next(iter(points)).load()())
    return out


def _otlp_entry_point(signal: str) -> str:
    protocol = (
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol not in _OTLP:
        raise ValueError(
            f"OTLP protocol {protocol!r} is not supported here: use http/protobuf or grpc"
        )
    return _OTLP[protocol]
