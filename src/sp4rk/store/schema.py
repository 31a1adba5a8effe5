"""The runs store's schema, as numbered migrations in portable SQL.

Every statement here runs unchanged on SQLite (3.24 or later) and PostgreSQL: ``TEXT``,
``INTEGER``, ``BIGINT`` and ``DOUBLE PRECISION`` columns, composite primary keys, no
``AUTOINCREMENT``, no SQLite-only pragmas, timestamps as ISO 8601 text. JSON documents are
stored as text and parsed with bounds on the way back (see :mod:`sp4rk.store.sql`).

Tables::

    sp4rk_schema   the schema version (one row)
    runs           one row per run: what it was asked, how it is configured, where it stands
    steps          the committed trajectory, one row per step (Step.to_dict() as JSON)
    responses      model responses whose tool calls were running (at most one per run)
    tool_calls     the tool-effect ledger: each call started / completed / answered / ...
    messages       live user messages not yet delivered to the model
    batches        batches of ``sp4rk batch``: running, or asked to pause
    batch_tasks    which run carries each task of a batch, and its attempts

Never edit a migration that has shipped: append a new one. Opening a store applies the ones
it lacks, inside one transaction; a store whose version is newer than :data:`SCHEMA_VERSION`
is refused.
"""

from __future__ import annotations

#: The version this sp4rk writes.
SCHEMA_VERSION = 2

VERSION_TABLE = "CREATE TABLE IF NOT EXISTS sp4rk_schema (version INTEGER NOT NULL)"

#: ``(version, statements)``: applying them in order turns version ``n - 1`` into ``n``.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                task TEXT NOT NULL,
                workspace TEXT NOT NULL,
                model TEXT NOT NULL,
                settings TEXT NOT NULL,
                status TEXT NOT NULL,
                exit_reason TEXT NOT NULL DEFAULT '',
                output TEXT NOT NULL DEFAULT '',
                error TEXT NOT NULL DEFAULT '',
                step_count INTEGER NOT NULL DEFAULT 0,
                input_tokens BIGINT NOT NULL DEFAULT 0,
                output_tokens BIGINT NOT NULL DEFAULT 0,
                cost_usd DOUBLE PRECISION,
                state TEXT,
                owner TEXT NOT NULL DEFAULT '',
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            "CREATE INDEX runs_by_created ON runs (created_at)",
            """CREATE TABLE steps (
                run_id TEXT NOT NULL REFERENCES runs (id),
                seq INTEGER NOT NULL,
                data TEXT NOT NULL,
                PRIMARY KEY (run_id, seq)
            )""",
            """CREATE TABLE responses (
                run_id TEXT NOT NULL REFERENCES runs (id),
                response_group INTEGER NOT NULL,
                step INTEGER NOT NULL,
                data TEXT NOT NULL,
                PRIMARY KEY (run_id, response_group)
            )""",
            """CREATE TABLE tool_calls (
                run_id TEXT NOT NULL REFERENCES runs (id),
                response_group INTEGER NOT NULL,
                position INTEGER NOT NULL,
                step INTEGER NOT NULL,
                call_id TEXT NOT NULL,
                tool TEXT NOT NULL,
                arguments TEXT NOT NULL,
                status TEXT NOT NULL,
                recorded TEXT,
                started_at TEXT,
                finished_at TEXT,
                PRIMARY KEY (run_id, response_group, position)
            )""",
            """CREATE TABLE messages (
                run_id TEXT NOT NULL REFERENCES runs (id),
                seq INTEGER NOT NULL,
                text TEXT NOT NULL,
                status TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (run_id, seq)
            )""",
        ),
    ),
    (
        2,
        (
            """CREATE TABLE batches (
                id TEXT PRIMARY KEY,
                status TEXT NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            """CREATE TABLE batch_tasks (
                batch TEXT NOT NULL REFERENCES batches (id),
                task_id TEXT NOT NULL,
                run_id TEXT NOT NULL REFERENCES runs (id),
                attempts INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (batch, task_id)
            )""",
            "CREATE INDEX batch_tasks_by_run ON batch_tasks (run_id)",
        ),
    ),
)
