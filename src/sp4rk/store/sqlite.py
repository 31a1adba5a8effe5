"""``SQLiteRunStore``: runs, their steps and state, and the tool-effect ledger in one SQLite file.

Durability: the file is in WAL mode with ``synchronous=FULL``, so every committed transaction
is on disk before the call returns — it survives ``kill -9``, a crash of the OS and a power
cut (``NORMAL`` would survive only the first). That costs one ``fsync`` per commit: one per
step boundary and two per tool call, small next to a model call.

Each step boundary commits the new steps and the run state in one transaction; each tool
call is recorded as started before it runs and as completed once its step is recorded (the
queries are :class:`~sp4rk.store.sql.SQLRunStore`'s).

Several processes may use one store: each run belongs to the live process driving it
(``runs.owner``), writers queue behind SQLite's lock for up to ``timeout`` seconds, and
readers never wait (WAL). Within a process, the store may be used from any thread (one
connection, its statements taken in turn): an archived observation (``sp4rk.agent``'s flat
memory) is read back wherever the step is read, a tool's worker thread included.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sp4rk.store.errors import StoreCorruptError, StoreError, StoreLockedError
from sp4rk.store.sql import DEFAULT_TIMEOUT, MAX_JSON_DEPTH, MIN_PREFIX, SQLRunStore

__all__ = ["DEFAULT_TIMEOUT", "MAX_JSON_DEPTH", "MIN_PREFIX", "SQLiteRunStore"]


class SQLiteRunStore(SQLRunStore):
    """The runs store in the SQLite file ``path`` (created, with its folder, when missing).

    Raises:
        StoreError: the file cannot be opened or is an SQLite file of another program.
        StoreCorruptError: the file is not a database, or is damaged.
        StoreVersionError: the store was written by a newer sp4rk.
        StoreLockedError: another process kept it locked for ``timeout`` seconds.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path = Path(path).expanduser()
        self.location = str(self.path)
        self.timeout = timeout
        self._lock = threading.RLock()  # one statement or transaction at a time
        self._db = self._connect()
        try:
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    # --- opening -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not self.path.exists():
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError as exc:
            raise StoreError(
                f"cannot create the runs store {self.path}: {exc.strerror or exc}; "
                "pass --store PATH (or set SP4RK_STORE) to put it somewhere writable"
            ) from exc
        if not self.path.is_file():
            raise StoreError(f"the runs store {self.path} is not a file; pass --store PATH")
        try:
            db = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        try:
            db.execute("PRAGMA journal_mode=WAL").fetchone()
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            db.close()
            raise self._translate(exc) from exc
        return db

    def _tables(self) -> set[str]:
        return {r[0] for r in self._query("SELECT name FROM sqlite_master WHERE type='table'")}

    def close(self) -> None:
        """Close the connection (committed data is already on disk)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> SQLiteRunStore:
        return self

    # --- low level -----------------------------------------------------------------------

    def _translate(self, exc: sqlite3.Error) -> StoreError:
        text = str(exc)
        lowered = text.lower()
        if "locked" in lowered or "busy" in lowered:
            return StoreLockedError(
                f"the runs store {self.path} is locked by another process (waited "
                f"{self.timeout:g}s); try again once it is done, or pass --store PATH"
            )
        if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
            return StoreCorruptError(
                f"the runs store {self.path} is damaged ({text}); move it aside (sp4rk then "
                "starts a new one) or pass --store PATH"
            )
        if "unable to open" in lowered or "readonly" in lowered or "read-only" in lowered:
            return StoreError(
                f"cannot use the runs store {self.path} ({text}); check its permissions or "
                "pass --store PATH"
            )
        return StoreError(f"the runs store {self.path} failed: {text}")

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._lock:
                return list(self._db.execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``), committed or rolled back."""
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc
            try:
                yield db
                db.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._translate(exc) from exc
                raise
