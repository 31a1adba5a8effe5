"""The runs store: every run's steps, state and tool effects, durable across crashes.

``SQLiteRunStore`` keeps runs in one SQLite file (WAL, ``synchronous=FULL``); ``StoreJournal``
connects an executor to it (``Executor.set_journal``). Each step boundary commits the new
steps and the ``RunState`` in one transaction before the next model call, and the
tool-effect ledger records each call as started before it runs and as completed after, so
that after ``kill -9`` nothing completed is lost and nothing started is silently run again::

    store = SQLiteRunStore(default_store_path())
    run = store.create_run(task=task, workspace=str(ws), model=spec, settings={})
    journal = StoreJournal(store, run.id)
    executor.set_journal(journal)
    ...
    checkpoint = store.recover(run.id)          # later, in any process: steps + state
    Executor(..., resume_steps=checkpoint)

The schema is versioned (``sp4rk.store.schema``) and its SQL portable: ``PostgresRunStore``
holds the same data in a PostgreSQL database that the machines of a cluster share
(``open_store("postgresql://...")``; the ``postgres`` extra).
"""

from __future__ import annotations

import os
from pathlib import Path

from sp4rk.store.errors import (
    RunBusyError,
    RunNotFoundError,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreVersionError,
)
from sp4rk.store.journal import StoreJournal
from sp4rk.store.postgres import PostgresRunStore
from sp4rk.store.records import BatchTaskLink, LedgerEntry, RunRecord, RunStatus, Usage
from sp4rk.store.recovery import close_response, ended_by_accepted_finish
from sp4rk.store.schema import SCHEMA_VERSION
from sp4rk.store.sql import DEFAULT_TIMEOUT, SQLRunStore
from sp4rk.store.sqlite import SQLiteRunStore

#: URL schemes of a PostgreSQL store.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def store_timeout() -> float:
    """Seconds to wait for a store another process holds: ``$SP4RK_STORE_TIMEOUT`` or 30."""
    try:
        value = float(os.environ.get("SP4RK_STORE_TIMEOUT", ""))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def default_store_path() -> Path:
    """``$SP4RK_STORE``, else ``$XDG_STATE_HOME/sp4rk/runs.db`` (``~/.local/state/…``)."""
    explicit = os.environ.get("SP4RK_STORE")
    if explicit:
        return Path(explicit).expanduser()
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home).expanduser() / "sp4rk" / "runs.db"


def open_store(target: str | os.PathLike[str], *, timeout: float | None = None) -> SQLRunStore:
    """The runs store ``target`` names: a PostgreSQL URL, ``sqlite:///PATH``, or a file path.

    ``timeout`` defaults to :func:`store_timeout`.

    Raises:
        StoreError: as the store's constructor (and for an unknown URL scheme).
    """
    wait = store_timeout() if timeout is None else timeout
    text = os.fspath(target)
    if text.startswith(POSTGRES_SCHEMES):
        return PostgresRunStore(text, timeout=wait)
    if text.startswith("sqlite://"):
        path = text.removeprefix("sqlite://")
        if not path.startswith("/"):
            raise StoreError(
                f"{text!r}: write an SQLite store URL as sqlite:///absolute/path.db, or pass a path"
            )
        return SQLiteRunStore(path, timeout=wait)
    if "://" in text:
        raise StoreError(
            f"unknown runs store {text!r}: pass a file path (SQLite), sqlite:///PATH, or "
            "postgresql://USER@HOST/DATABASE"
        )
    return SQLiteRunStore(text, timeout=wait)


__all__ = [
    "SCHEMA_VERSION",
    "BatchTaskLink",
    "LedgerEntry",
    "PostgresRunStore",
    "RunBusyError",
    "RunNotFoundError",
    "RunRecord",
    "RunStatus",
    "SQLRunStore",
    "SQLiteRunStore",
    "StoreCorruptError",
    "StoreError",
    "StoreJournal",
    "StoreLockedError",
    "StoreVersionError",
    "Usage",
    "close_response",
    "default_store_path",
    "ended_by_accepted_finish",
    "open_store",
    "store_timeout",
]
