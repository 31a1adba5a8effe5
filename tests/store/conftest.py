"""The store tests' fixtures: a PostgreSQL server when one is available (tests.postgres)."""

from __future__ import annotations

from tests.postgres import postgres_server, postgres_url

__all__ = ["postgres_server", "postgres_url"]
