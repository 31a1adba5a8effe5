from __future__ import annotations

import pytest

from .telemetry import Telemetry


@pytest.fixture
def telemetry() -> Telemetry:
    return Telemetry()
