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

The schema is versioned (``sp4rk.store.schema``) and its SQL portable, so other databases
can hold the same data.
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
from sp4rk.store.records import LedgerEntry, RunRecord, RunStatus, Usage
from sp4rk.store.recovery import close_response, ended_by_accepted_finish
from sp4rk.store.schema import SCHEMA_VERSION
from sp4rk.store.sqlite import DEFAULT_TIMEOUT, SQLiteRunStore


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


__all__ = [
    "SCHEMA_VERSION",
    "LedgerEntry",
    "RunBusyError",
    "RunNotFoundError",
    "RunRecord",
    "RunStatus",
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
    "store_timeout",
]
