"""``--otel``: the run's traces and metrics, exported where the ``OTEL_*`` variables say.

The exporter is configured by :func:`sp4rk.otel.configure_from_environment`; its event sink
runs next to the live view (``CompositeEvents``), so a broken exporter never disturbs the run.
Without the OpenTelemetry SDK (or with ``OTEL_SDK_DISABLED=true``) the run goes on untraced,
and one line says why.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from sp4rk.cli.errors import CommandError, UsageProblem
from sp4rk.cli.view import JsonView, View

if TYPE_CHECKING:
    from sp4rk.otel import OpenTelemetryEvents

#: What to install for ``--otel`` to export anything.
INSTALL_HINT = "pip install 'sp4rk[otel]' opentelemetry-sdk opentelemetry-exporter-otlp"


def tracing(view: View) -> OpenTelemetryEvents | None:
    """The tracing event sink, or ``None`` (with a one-line hint) when tracing is off.

    Raises:
        CommandError: the ``OTEL_*`` variables name an exporter that is not installed or
            that nothing registers.
        UsageProblem: the console exporter with ``--json``: both would write to stdout.
    """
    if isinstance(view, JsonView) and _console_exporter():
        raise UsageProblem(
            "--otel with the console exporter writes spans to stdout, where --json writes its "
            "events: pick one (or export with OTEL_TRACES_EXPORTER=otlp)"
        )
    try:
        from sp4rk.otel import configure_from_environment
    except ImportError:
        view.emit("warning", text=f"--otel: not tracing: OpenTelemetry is missing ({INSTALL_HINT})")
        return None
    try:
        sink = configure_from_environment()
    except (ValueError, ImportError) as exc:
        raise CommandError(
            f"--otel: {exc} (fix OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER, or install "
            "the exporter)"
        ) from exc
    if sink is None:
        disabled = os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
        why = (
            "OTEL_SDK_DISABLED is true"
            if disabled
            else f"the OpenTelemetry SDK is not installed ({INSTALL_HINT})"
        )
        view.emit("warning", text=f"--otel: not tracing: {why}")
        return None
    view.emit("notice", text="--otel: exporting traces and metrics (OTEL_* variables)")
    return sink


def _console_exporter() -> bool:
    """Whether the ``OTEL_*`` variables send traces or metrics to the console (stdout)."""
    names = ",".join(
        os.environ.get(variable, "")
        for variable in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER")
    )
    return "console" in (name.strip().lower() for name in names.split(","))
