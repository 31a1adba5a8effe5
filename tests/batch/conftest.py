"""Fixtures of the batch tests: one Ray instance for the session, a PostgreSQL server.

Ray starts in about ten seconds, so every Ray test shares one local instance (started on the
first Ray test, with usage reporting off and its node bound to the loopback address). The
PostgreSQL fixtures are :mod:`tests.postgres`'s.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.postgres import postgres_server, postgres_url

__all__ = ["postgres_server", "postgres_url", "ray_session"]


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """A local Ray instance shared by the session's Ray tests."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'sp4rk[ray]'")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        configure_logging=False,
        log_to_driver=False,
    )
    try:
        yield ray
    finally:
        ray.shutdown()
