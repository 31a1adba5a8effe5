"""``PostgresRunStore``: the runs store in a PostgreSQL database, shared by many machines.

Same schema, same migrations, same queries as the SQLite store (:mod:`sp4rk.store.sql`);
what differs is the connection (psycopg 3, the ``postgres`` extra), how a write transaction
is held, and that a claim locks the run's row, so two workers of a cluster can never drive one
run. Every committed transaction is durable when the call returns (the server's ``fsync``).
The database may hold other tables: only the store's own are looked at.

::

    store = PostgresRunStore("postgresql://sp4rk@db.internal/sp4rk")
    # or: open_store("postgresql://...")  — the form every command's --store accepts
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sp4rk.store.errors import StoreError, StoreLockedError
from sp4rk.store.sql import DEFAULT_TIMEOUT, SQLRunStore

if TYPE_CHECKING:
    import psycopg

#: The tables a runs store consists of (the ones migrations create).
STORE_TABLES = frozenset(
    {"sp4rk_schema", "runs", "steps", "responses", "tool_calls", "messages", "batches",
     "batch_tasks"}
)  # fmt: skip
#: The advisory lock key that serialises migrations (any constant; "sp4rk" in ASCII).
_MIGRATION_LOCK = 0x7370346B72
#: Most seconds spent connecting.
_CONNECT_TIMEOUT = 30


def redact(url: str) -> str:
    """``url`` without its password (for messages and logs)."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


def _placeholders(sql: str) -> str:
    """Psycopg's placeholder style: ``?`` → ``%s`` (and a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Transaction:
    """A psycopg connection inside a transaction, speaking the store's ``?`` style."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        return self._conn.execute(_placeholders(sql), params)

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> None:
        rows = list(params)
        if rows:
            with self._conn.cursor() as cursor:
                cursor.executemany(_placeholders(sql), rows)


class PostgresRunStore(SQLRunStore):
    """The runs store in the PostgreSQL database at ``url`` (its tables created when missing).

    Args:
        url: a libpq connection URL or string, e.g. ``postgresql://user@host/db``.
        timeout: seconds to wait for a row another process locked, and to connect.

    Raises:
        StoreError: psycopg is missing, the server cannot be reached, or the database holds
            other tables of the same names.
        StoreVersionError: the store was written by a newer sp4rk.
    """

    _LOCK_ROW = " FOR UPDATE"
    _ELSEWHERE = "pass --store with another database URL"

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise StoreError(
                f"a PostgreSQL runs store needs psycopg: pip install 'sp4rk[postgres]' ({exc})"
            ) from exc
        self._psycopg = psycopg
        self.url = url
        self.location = redact(url)
        self.timeout = timeout
        # One statement or transaction at a time: an archived observation may be read from a
        # tool's worker thread while another run's boundary commits (a local batch).
        self._lock = threading.RLock()
        try:
            self._db: psycopg.Connection[Any] = psycopg.connect(
                url,
                autocommit=True,
                connect_timeout=max(1, min(_CONNECT_TIMEOUT, round(timeout))),
            )
            self._db.execute(f"SET lock_timeout = {max(1, round(timeout * 1000))}")
        except psycopg.Error as exc:
            raise self._translate(exc) from exc
        try:
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    def _tables(self) -> set[str]:
        rows = self._query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
        return {str(r[0]) for r in rows} & STORE_TABLES

    def _lock_migrations(self, db: Any) -> None:
        db.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))

    def close(self) -> None:
        """Close the connection (committed data is already durable on the server)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> PostgresRunStore:
        return self

    @property
    def broken(self) -> bool:
        """The connection is lost (a new store object reconnects)."""
        return bool(self._db.broken or self._db.closed)

    def _translate(self, exc: Exception) -> StoreError:
        errors = self._psycopg.errors
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, errors.LockNotAvailable | errors.DeadlockDetected):
            return StoreLockedError(
                f"the runs store {self.location} is locked by another process (waited "
                f"{self.timeout:g}s); try again once it is done"
            )
        if isinstance(exc, self._psycopg.OperationalError):
            return StoreError(
                f"cannot use the runs store {self.location} ({text}); check the URL and that "
                "the server is running and reachable"
            )
        return StoreError(f"the runs store {self.location} failed: {text}")

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._lock:
                return list(self._db.execute(_placeholders(sql), params).fetchall())
        except self._psycopg.Error as exc:
            raise self._translate(exc) from exc

    @contextlib.contextmanager
    def _write(self) -> Iterator[_Transaction]:
        """One write transaction (``BEGIN`` … ``COMMIT``), rolled back if the block raises."""
        try:
            with self._lock, self._db.transaction():
                yield _Transaction(self._db)
        except self._psycopg.Error as exc:
            raise self._translate(exc) from exc
