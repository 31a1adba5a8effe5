"""OpenTelemetry for sp4rk: every run as GenAI traces and metrics, in any OTel backend.

``Executor(..., events=OpenTelemetryEvents())`` traces each run: one ``invoke_agent`` span,
a ``chat`` span per model call and an ``execute_tool`` span per tool call, with every
executor decision (nudges, breaker trips, gate rejections, compactions) as a span event, so
an operator can tell why a run stopped from the trace alone. See ``docs/observability.md``.

Needs the ``otel`` extra (``pip install 'sp4rk[otel]'``: the OpenTelemetry API only); the
SDK and its exporters are the application's choice. Nothing here is imported by
``sp4rk.agent``: a process that does not import ``sp4rk.otel`` never loads OpenTelemetry.
"""

try:
    import opentelemetry.metrics
    import opentelemetry.trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "sp4rk.otel needs the OpenTelemetry API: pip install 'sp4rk[otel]' "
        "(and an SDK with an exporter to send the traces somewhere, such as "
        "opentelemetry-sdk and opentelemetry-exporter-otlp)"
    ) from exc

from sp4rk.otel.environment import configure_from_environment
from sp4rk.otel.events import OpenTelemetryEvents

__all__ = ["OpenTelemetryEvents", "configure_from_environment"]
