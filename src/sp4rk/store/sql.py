"""``SQLRunStore``: every query of the runs store, in SQL that SQLite and PostgreSQL both run.

The store's behaviour lives here once: runs, their steps and state, the tool-effect ledger,
live messages, recovery after a crash, and the batch bookkeeping of ``sp4rk batch``. A
subclass brings the database: how to connect, run one query, hold one write transaction, list
the store's tables, and say what a driver error means (:class:`~sp4rk.store.SQLiteRunStore`,
:class:`~sp4rk.store.PostgresRunStore`). Statements are written with ``?`` placeholders;
a subclass whose driver wants another style translates them.

What the store reads back is data only: JSON parsed with depth and size bounds into typed
dataclasses, never code, never a command to run.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol, TypeVar, cast

from sp4rk._internal import safejson
from sp4rk._internal.serde import Serializable
from sp4rk.agent import Checkpoint, RunState, Step
from sp4rk.llm import ChatResponse, ToolCall
from sp4rk.llm.pricing import PriceTable, default_price_table
from sp4rk.store.errors import (
    RunBusyError,
    RunNotFoundError,
    StoreCorruptError,
    StoreError,
    StoreVersionError,
)
from sp4rk.store.records import (
    STATUSES,
    BatchTaskLink,
    CallStatus,
    LedgerEntry,
    RunRecord,
    RunStatus,
    Usage,
    owner_alive,
    this_owner,
)
from sp4rk.store.recovery import close_response
from sp4rk.store.schema import MIGRATIONS, SCHEMA_VERSION, VERSION_TABLE

#: Seconds a writer waits for another process's transaction before giving up.
DEFAULT_TIMEOUT = 30.0
#: Deepest JSON nesting accepted from the store (a step is about five levels deep).
MAX_JSON_DEPTH = 64
#: The shortest id prefix accepted for a run.
MIN_PREFIX = 4

_RUN_COLUMNS = (
    "id, task, workspace, model, settings, status, exit_reason, output, error, step_count, "
    "input_tokens, output_tokens, cost_usd, owner, created_at, updated_at"
)
T = TypeVar("T", bound=Serializable)


class Rows(Protocol):
    """What a statement returns: its rows."""

    def fetchone(self) -> Any:
        """The next row, or ``None``."""
        ...

    def fetchall(self) -> Any:
        """The remaining rows."""
        ...


class Transaction(Protocol):
    """An open write transaction: statements with ``?`` placeholders."""

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Rows:
        """Run one statement."""
        ...

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> Any:
        """Run one statement once per parameter row."""
        ...


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _dump(value: Serializable) -> str:
    return json.dumps(value.to_dict(), ensure_ascii=False)


class SQLRunStore:
    """The runs store's queries; a subclass connects them to a database (see the module docs).

    Subclasses set :attr:`location` and :attr:`timeout`, implement :meth:`_query`,
    :meth:`_write`, :meth:`_tables` and :meth:`close`, and call :meth:`_migrate` once
    connected.
    """

    #: Appended to the ``SELECT`` that :meth:`claim_run` reads the owner with, so that two
    #: claims of one run queue behind each other (``" FOR UPDATE"`` where rows can be locked;
    #: SQLite's write transactions are exclusive already).
    _LOCK_ROW: ClassVar[str] = ""
    #: How messages tell the user to use another store.
    _ELSEWHERE: ClassVar[str] = "pass --store PATH"

    location: str
    """Where the store is, as messages name it (a path, or a URL without its password)."""
    timeout: float
    """Seconds a writer waits for another's transaction."""

    # --- the database: what a subclass provides ------------------------------------------

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one read statement; its rows (errors translated to ``StoreError``)."""
        raise NotImplementedError

    def _write(self) -> contextlib.AbstractContextManager[Transaction]:
        """One write transaction, committed when the block ends, rolled back if it raises."""
        raise NotImplementedError

    def _tables(self) -> set[str]:
        """Names of the tables that tell whether the database holds a runs store.

        A database of its own (SQLite) lists all its tables, so that a foreign file is
        refused; a shared server database lists only the store's tables.
        """
        raise NotImplementedError

    def _lock_migrations(self, db: Transaction) -> None:
        """Make concurrent migrations of the same store wait for each other (in ``db``)."""

    def close(self) -> None:
        """Close the connection (committed data is already durable)."""
        raise NotImplementedError

    def __enter__(self) -> SQLRunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- schema --------------------------------------------------------------------------

    def _migrate(self) -> None:
        version = self._version()
        if version == SCHEMA_VERSION:
            return
        with self._write() as db:
            self._lock_migrations(db)
            db.execute(VERSION_TABLE)
            version = self._version()  # another process may have migrated meanwhile
            for target, statements in MIGRATIONS:
                if target <= version:
                    continue
                for statement in statements:
                    db.execute(statement)
                if version == 0:
                    db.execute("INSERT INTO sp4rk_schema (version) VALUES (?)", (target,))
                else:
                    db.execute("UPDATE sp4rk_schema SET version = ?", (target,))
                version = target

    def _version(self) -> int:
        """The schema version (0 for an empty store); refuses foreign and newer stores."""
        tables = self._tables()
        if "sp4rk_schema" not in tables:
            if tables:
                raise StoreError(
                    f"{self.location} is a database of another program, not an sp4rk runs "
                    f"store; {self._ELSEWHERE} to use another one"
                )
            return 0
        rows = self._query("SELECT version FROM sp4rk_schema")
        if not rows and tables == {"sp4rk_schema"}:
            return 0  # created by a migration that is still running (or was cut short)
        if len(rows) != 1 or not isinstance(rows[0][0], int):
            raise StoreCorruptError(
                f"the runs store {self.location} has no valid schema version; move it aside "
                f"(sp4rk then starts a new one) or {self._ELSEWHERE}"
            )
        version = int(rows[0][0])
        if version > SCHEMA_VERSION:
            raise StoreVersionError(
                f"the runs store {self.location} was written by a newer sp4rk (schema "
                f"{version}, this one knows {SCHEMA_VERSION}); upgrade sp4rk, or "
                f"{self._ELSEWHERE}"
            )
        return version

    # --- reading -------------------------------------------------------------------------

    def _load(self, text: Any, what: str) -> Any:
        if not isinstance(text, str):
            raise StoreCorruptError(f"the runs store {self.location} holds a malformed {what}")
        try:
            return safejson.loads(text, max_depth=MAX_JSON_DEPTH)
        except ValueError as exc:
            raise StoreCorruptError(
                f"the runs store {self.location} holds a malformed {what}: {exc}"
            ) from exc

    def _typed(self, cls: type[T], text: Any, what: str) -> T:
        data = self._load(text, what)
        if not isinstance(data, dict):
            raise StoreCorruptError(f"the runs store {self.location} holds a malformed {what}")
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError, KeyError) as exc:
            raise StoreCorruptError(
                f"the runs store {self.location} holds a malformed {what}: {exc}"
            ) from exc

    # --- runs ----------------------------------------------------------------------------

    def create_run(
        self, *, task: str, workspace: str, model: str, settings: dict[str, Any]
    ) -> RunRecord:
        """A new run, owned by this process, with no steps yet."""
        now = _now()
        with self._write() as db:
            run_id = _insert_run(db, task, workspace, model, settings, now)
        return self.get_run(run_id)

    def get_run(self, ref: str) -> RunRecord:
        """The run whose id is ``ref``, starts with ``ref`` (4+ characters), or ``"last"``.

        Raises:
            RunNotFoundError: no run matches, or a prefix matches several.
        """
        if ref == "last":
            rows = self._query(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at DESC LIMIT 1")
            if not rows:
                raise RunNotFoundError(f"there are no runs in {self.location} yet; start one")
            return self._record(rows[0])
        rows = self._query(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (ref,))
        if not rows and len(ref) >= MIN_PREFIX:
            rows = self._query(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE substr(id, 1, ?) = ? LIMIT 3",
                (len(ref), ref),
            )
        if len(rows) == 1:
            return self._record(rows[0])
        if rows:
            ids = ", ".join(r[0] for r in rows)
            raise RunNotFoundError(f"run id {ref!r} is ambiguous ({ids} …); give more of it")
        raise RunNotFoundError(
            f"no run {ref!r} in {self.location}; `sp4rk runs` lists the runs there"
        )

    def list_runs(self, limit: int | None = None) -> list[RunRecord]:
        """Runs, newest first."""
        sql = f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at DESC"
        rows = self._query(sql + " LIMIT ?", (limit,)) if limit else self._query(sql)
        return [self._record(r) for r in rows]

    def _record(self, row: tuple[Any, ...]) -> RunRecord:
        settings = self._load(row[4], f"settings of run {row[0]!r}")
        status = row[5]
        if not isinstance(settings, dict) or status not in STATUSES:
            raise StoreCorruptError(
                f"the runs store {self.location} holds a malformed run {row[0]!r}"
            )
        try:
            return RunRecord(
                id=str(row[0]),
                task=str(row[1]),
                workspace=str(row[2]),
                model=str(row[3]),
                settings=settings,
                status=cast(RunStatus, status),
                exit_reason=str(row[6]),
                output=str(row[7]),
                error=str(row[8]),
                step_count=int(row[9]),
                input_tokens=int(row[10]),
                output_tokens=int(row[11]),
                cost_usd=None if row[12] is None else float(row[12]),
                owner=str(row[13]),
                created_at=str(row[14]),
                updated_at=str(row[15]),
            )
        except (TypeError, ValueError) as exc:
            raise StoreCorruptError(
                f"the runs store {self.location} holds a malformed run {row[0]!r}: {exc}"
            ) from exc

    def claim_run(
        self,
        run_id: str,
        *,
        takeover: bool = False,
        model: str | None = None,
        settings: dict[str, Any] | None = None,
    ) -> RunRecord:
        """Make this process the run's driver (status ``running``).

        ``takeover`` claims it even from an owner that looks alive: for a scheduler that knows
        the previous driver is gone (a worker on another host, which cannot be checked here).
        ``model`` and ``settings``, when given, replace the run's (a resume with other
        options), in the same transaction.

        Raises:
            RunBusyError: another live process drives it.
        """
        me = this_owner()
        with self._write() as db:
            row = db.execute(
                f"SELECT owner, status FROM runs WHERE id = ?{self._LOCK_ROW}", (run_id,)
            ).fetchone()
            if row is None:
                raise RunNotFoundError(f"no run {run_id!r} in {self.location}")
            owner = str(row[0])
            alive = not takeover and owner_alive(owner)
            if owner and owner != me and row[1] == "running" and alive:
                raise RunBusyError(
                    f"run {run_id} is being driven by process {owner}; wait for it to end "
                    "(or stop it with Ctrl-C there) before resuming it here"
                )
            db.execute(
                "UPDATE runs SET owner = ?, status = 'running', updated_at = ? WHERE id = ?",
                (me, _now(), run_id),
            )
            if model is not None:
                db.execute("UPDATE runs SET model = ? WHERE id = ?", (model, run_id))
            if settings is not None:
                db.execute(
                    "UPDATE runs SET settings = ? WHERE id = ?", (json.dumps(settings), run_id)
                )
        return self.get_run(run_id)

    def end_run(
        self,
        run_id: str,
        *,
        status: RunStatus,
        exit_reason: str = "",
        output: str = "",
        error: str = "",
        usage: Usage | None = None,
        responses: int | None = None,
    ) -> None:
        """Record how the run ended and let go of it.

        ``responses`` is the run's count of model responses (its ``step_count``), the last
        one included: the state saved at the last boundary does not count it yet (see
        :func:`~sp4rk.store.recovery.responses_with_finish`).
        """
        sets = "status = ?, exit_reason = ?, output = ?, error = ?, owner = '', updated_at = ?"
        params: list[Any] = [status, exit_reason, output, error, _now()]
        if responses is not None:
            sets += ", step_count = ?"
            params.append(responses)
        if usage is not None:
            sets += ", input_tokens = ?, output_tokens = ?, cost_usd = ?"
            params += [usage.input_tokens, usage.output_tokens, usage.cost_usd]
        with self._write() as db:
            db.execute(f"UPDATE runs SET {sets} WHERE id = ?", (*params, run_id))

    # --- steps, state, ledger ------------------------------------------------------------

    def steps(self, run_id: str) -> list[Step]:
        """The run's committed trajectory."""
        rows = self._query("SELECT seq, data FROM steps WHERE run_id = ? ORDER BY seq", (run_id,))
        return [self._typed(Step, data, f"step {seq} of run {run_id!r}") for seq, data in rows]

    def read_steps(self, run_id: str, start: int, stop: int) -> list[Step]:
        """The run's committed steps ``[start, stop)``, by index (an archived observation's read).

        Raises:
            StoreCorruptError: one of them is missing or malformed (never an empty stand-in).
        """
        rows = self._query(
            "SELECT seq, data FROM steps WHERE run_id = ? AND seq >= ? AND seq < ? ORDER BY seq",
            (run_id, start, stop),
        )
        found = [int(seq) for seq, _ in rows]
        if found != list(range(start, max(start, stop))):
            missing = sorted(set(range(start, stop)) - set(found))
            raise StoreCorruptError(
                f"the runs store {self.location} has lost step {missing[0] if missing else start} "
                f"of run {run_id!r}; `sp4rk show {run_id}` shows what it still holds"
            )
        return [self._typed(Step, data, f"step {seq} of run {run_id!r}") for seq, data in rows]

    def state(self, run_id: str) -> RunState | None:
        """The run state committed at the last boundary (``None`` before the first)."""
        rows = self._query("SELECT state FROM runs WHERE id = ?", (run_id,))
        if not rows or rows[0][0] is None:
            return None
        return self._typed(RunState, rows[0][0], f"state of run {run_id!r}")

    def run_seconds(self, run_id: str) -> float:
        """Wall-clock seconds the run has run, from its saved state (without decoding it all)."""
        rows = self._query("SELECT state FROM runs WHERE id = ?", (run_id,))
        if not rows or rows[0][0] is None:
            return 0.0
        data = self._load(rows[0][0], f"state of run {run_id!r}")
        budget = data.get("budget") if isinstance(data, dict) else None
        seconds = budget.get("seconds", 0.0) if isinstance(budget, dict) else 0.0
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise StoreCorruptError(f"the runs store {self.location} holds a malformed state")
        return float(seconds)

    def ledger(self, run_id: str) -> list[LedgerEntry]:
        """Every tool call of the run the ledger knows, in order."""
        rows = self._query(
            "SELECT response_group, position, step, call_id, tool, arguments, status, "
            "started_at, finished_at FROM tool_calls WHERE run_id = ? "
            "ORDER BY response_group, position",
            (run_id,),
        )
        return [
            LedgerEntry(
                response_group=int(r[0]),
                position=int(r[1]),
                step=int(r[2]),
                call_id=str(r[3]),
                tool=str(r[4]),
                arguments=str(r[5]),
                status=cast(CallStatus, str(r[6])),
                started_at=str(r[7] or ""),
                finished_at=str(r[8] or ""),
            )
            for r in rows
        ]

    def commit_boundary(
        self,
        run_id: str,
        steps: Sequence[Step],
        state: RunState,
        *,
        usage: Usage | None = None,
        delivered: Sequence[int] = (),
        closed_groups: Sequence[int] = (),
    ) -> int:
        """Append ``steps`` and save ``state`` in one transaction; the run's step count after.

        ``delivered`` are queued messages now in the trajectory; ``closed_groups`` are
        responses whose steps are among ``steps`` (their in-flight record is dropped).
        """
        with self._write() as db:
            return self._commit(db, run_id, steps, state, usage, delivered, closed_groups)

    def _commit(
        self,
        db: Transaction,
        run_id: str,
        steps: Sequence[Step],
        state: RunState,
        usage: Usage | None,
        delivered: Sequence[int],
        closed_groups: Sequence[int],
    ) -> int:
        """Append ``steps`` and save ``state`` in ``db``; the run's step count after."""
        (first,) = db.execute(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM steps WHERE run_id = ?", (run_id,)
        ).fetchone()
        db.executemany(
            "INSERT INTO steps (run_id, seq, data) VALUES (?, ?, ?)",
            [(run_id, first + i, _dump(s)) for i, s in enumerate(steps)],
        )
        sets = "state = ?, step_count = ?, updated_at = ?"
        # A run's "steps" are its model responses, as max_steps counts them (not entries).
        params: list[Any] = [_dump(state), state.iteration, _now()]
        if usage is not None:
            sets += ", input_tokens = ?, output_tokens = ?, cost_usd = ?"
            params += [usage.input_tokens, usage.output_tokens, usage.cost_usd]
        db.execute(f"UPDATE runs SET {sets} WHERE id = ?", (*params, run_id))
        db.executemany(
            "UPDATE messages SET status = 'delivered' WHERE run_id = ? AND seq = ?",
            [(run_id, seq) for seq in delivered],
        )
        db.executemany(
            "DELETE FROM responses WHERE run_id = ? AND response_group = ?",
            [(run_id, g) for g in closed_groups],
        )
        return int(first) + len(steps)

    def record_response(self, run_id: str, group: int, step: int, response: ChatResponse) -> None:
        """A response whose tool calls are about to run (kept until its steps are committed)."""
        with self._write() as db:
            db.execute(
                "INSERT INTO responses (run_id, response_group, step, data) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (run_id, response_group) DO UPDATE SET step = excluded.step, "
                "data = excluded.data",
                (run_id, group, step, _dump(response)),
            )

    def record_call_start(
        self, run_id: str, group: int, position: int, step: int, call: ToolCall
    ) -> None:
        """A tool call is about to run: from here on it may have had effects."""
        with self._write() as db:
            db.execute(
                "INSERT INTO tool_calls (run_id, response_group, position, step, call_id, tool, "
                "arguments, status, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'started', ?)",
                (run_id, group, position, step, call.id, call.name, call.input, _now()),
            )

    def record_call_step(
        self, run_id: str, group: int, position: int, step: int, recorded: Step
    ) -> None:
        """A call's step is recorded: ``completed`` if it ran, else ``answered`` (refused …)."""
        call = recorded.action
        assert call is not None
        with self._write() as db:
            db.execute(
                "INSERT INTO tool_calls (run_id, response_group, position, step, call_id, tool, "
                "arguments, status, recorded, finished_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 'answered', ?, ?) "
                "ON CONFLICT (run_id, response_group, position) DO UPDATE SET "
                "status = 'completed', recorded = excluded.recorded, "
                "finished_at = excluded.finished_at",
                (
                    run_id,
                    group,
                    position,
                    step,
                    call.id,
                    call.name,
                    call.input,
                    _dump(recorded),
                    _now(),
                ),
            )

    # --- messages ------------------------------------------------------------------------

    def queue_message(self, run_id: str, text: str) -> int:
        """Keep a live user message for the run until it reaches the model; its number."""
        with self._write() as db:
            (seq,) = db.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE run_id = ?", (run_id,)
            ).fetchone()
            db.execute(
                "INSERT INTO messages (run_id, seq, text, status, created_at) "
                "VALUES (?, ?, ?, 'pending', ?)",
                (run_id, seq, text, _now()),
            )
        return int(seq)

    def pending_messages(self, run_id: str) -> list[tuple[int, str]]:
        """Messages not yet delivered: ``(number, text)``, oldest first."""
        rows = self._query(
            "SELECT seq, text FROM messages WHERE run_id = ? AND status = 'pending' ORDER BY seq",
            (run_id,),
        )
        return [(int(seq), str(text)) for seq, text in rows]

    # --- recovery ------------------------------------------------------------------------

    def open_responses(self, run_id: str) -> list[tuple[int, int, ChatResponse]]:
        """Responses whose calls were running when the run stopped: ``(group, step, response)``."""
        rows = self._query(
            "SELECT response_group, step, data FROM responses WHERE run_id = ? "
            "ORDER BY response_group",
            (run_id,),
        )
        return [
            (int(g), int(s), self._typed(ChatResponse, data, f"response {g} of run {run_id!r}"))
            for g, s, data in rows
        ]

    def closing_steps(self, run_id: str) -> list[tuple[int, int, list[Step]]]:
        """What :meth:`recover` would append: ``(group, step, steps)`` per open response."""
        return [(group, step, steps) for group, step, _, steps in self._closing(run_id)]

    def _closing(self, run_id: str) -> list[tuple[int, int, ChatResponse, list[Step]]]:
        closing = []
        for group, step, response in self.open_responses(run_id):
            rows = self._query(
                "SELECT position, status, recorded FROM tool_calls "
                "WHERE run_id = ? AND response_group = ?",
                (run_id, group),
            )
            recorded = {
                int(p): self._typed(Step, data, f"recorded call of run {run_id!r}")
                for p, status, data in rows
                if status in ("completed", "answered") and data is not None
            }
            started = [int(p) for p, status, _ in rows if status in ("started", "interrupted")]
            steps = close_response(response, group, recorded, started)
            closing.append((group, step, response, steps))
        return closing

    def recover(self, run_id: str, *, prices: PriceTable | None = None) -> Checkpoint:
        """Make the run resumable exactly: close open responses, hand queued messages over.

        In one transaction: each response a crash cut short gets its closing steps (calls
        that started are answered "outcome unknown", never run again), the state counts
        it — its tokens too, priced with ``prices`` (default: ``sp4rk.llm.pricing``'s; pass
        the run's own, as its budget prices calls), and the tool calls that started, when
        the state was saved before it came — and messages still waiting are moved into the
        state's delivery queue.

        Returns:
            The trajectory, carrying the state to resume with (``None`` before any boundary).
        """
        closing = self._closing(run_id)
        pending = self.pending_messages(run_id)
        state = self.state(run_id)
        if closing or pending:
            state = state if state is not None else RunState()
            table = prices if prices is not None else default_price_table()
            closed: list[Step] = []
            for group, step, response, steps in closing:
                closed.extend(steps)
                if state.response_groups < group:  # its spending is not in the saved state
                    usage = response.usage
                    state.budget.add_call(usage, table.cost(response.model, usage))
                    state.budget.tool_calls += self._calls_run(run_id, group)
                state.iteration = max(state.iteration, step)
                state.response_groups = max(state.response_groups, group)
            for _, text in pending:
                state.queue_message(text)
            with self._write() as db:
                db.executemany(
                    "UPDATE tool_calls SET status = 'interrupted', finished_at = ? "
                    "WHERE run_id = ? AND response_group = ? AND status = 'started'",
                    [(_now(), run_id, g) for g, _, _, _ in closing],
                )
                self._mark_not_run(db, run_id, [(g, st, steps) for g, st, _, steps in closing])
                self._commit(
                    db,
                    run_id,
                    closed,
                    state,
                    None,
                    [seq for seq, _ in pending],
                    [g for g, _, _, _ in closing],
                )
        return Checkpoint(self.steps(run_id), state)

    def _calls_run(self, run_id: str, group: int) -> int:
        """Calls of a response that started (a budget counts each before it runs)."""
        rows = self._query(
            "SELECT COUNT(*) FROM tool_calls WHERE run_id = ? AND response_group = ? "
            "AND status IN ('started', 'interrupted', 'completed')",
            (run_id, group),
        )
        return int(rows[0][0])

    def _mark_not_run(
        self, db: Transaction, run_id: str, closing: list[tuple[int, int, list[Step]]]
    ) -> None:
        """Ledger rows for calls of closed responses that never started."""
        for group, step, steps in closing:
            known = {
                int(p)
                for (p,) in db.execute(
                    "SELECT position FROM tool_calls WHERE run_id = ? AND response_group = ?",
                    (run_id, group),
                ).fetchall()
            }
            for position, s in enumerate(steps):
                if position in known or s.action is None:
                    continue
                db.execute(
                    "INSERT INTO tool_calls (run_id, response_group, position, step, call_id, "
                    "tool, arguments, status, finished_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, 'not_run', ?)",
                    (
                        run_id,
                        group,
                        position,
                        step,
                        s.action.id,
                        s.action.name,
                        s.action.input,
                        _now(),
                    ),
                )

    # --- batches -------------------------------------------------------------------------

    def open_batch(self, batch: str) -> None:
        """Record the batch ``batch`` (once), and mark it running: a new start lifts a pause."""
        now = _now()
        with self._write() as db:
            db.execute(
                "INSERT INTO batches (id, status, created_at, updated_at) "
                "VALUES (?, 'running', ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET status = 'running', "
                "updated_at = excluded.updated_at",
                (batch, now, now),
            )

    def pause_batch(self, batch: str) -> None:
        """Ask every run of ``batch`` to pause at its next step boundary (workers poll it)."""
        with self._write() as db:
            db.execute(
                "UPDATE batches SET status = 'pausing', updated_at = ? WHERE id = ?",
                (_now(), batch),
            )

    def batch_pausing(self, batch: str) -> bool:
        """Whether ``batch`` was asked to pause."""
        rows = self._query("SELECT status FROM batches WHERE id = ?", (batch,))
        return bool(rows) and rows[0][0] == "pausing"

    def batch_task(self, batch: str, task_id: str) -> BatchTaskLink | None:
        """The run of task ``task_id`` of ``batch`` (``None`` before its first attempt)."""
        rows = self._query(
            "SELECT run_id, attempts FROM batch_tasks WHERE batch = ? AND task_id = ?",
            (batch, task_id),
        )
        if not rows:
            return None
        return BatchTaskLink(run_id=str(rows[0][0]), attempts=int(rows[0][1]))

    def batch_tasks(self, batch: str) -> dict[str, BatchTaskLink]:
        """Every task of ``batch`` that has a run, by task id."""
        rows = self._query(
            "SELECT task_id, run_id, attempts FROM batch_tasks WHERE batch = ?", (batch,)
        )
        return {str(t): BatchTaskLink(run_id=str(r), attempts=int(a)) for t, r, a in rows}

    def create_batch_run(
        self,
        batch: str,
        task_id: str,
        *,
        task: str,
        workspace: str,
        model: str,
        settings: dict[str, Any],
    ) -> RunRecord:
        """A new run for task ``task_id`` of ``batch`` (its first attempt), in one transaction.

        Raises:
            RunBusyError: the task has a run already (another scheduler started it).
        """
        now = _now()
        with self._write() as db:
            row = db.execute(
                "SELECT run_id FROM batch_tasks WHERE batch = ? AND task_id = ?",
                (batch, task_id),
            ).fetchone()
            if row is not None:
                raise RunBusyError(
                    f"task {task_id!r} of batch {batch} already has run {row[0]}; resume it "
                    "instead (is another sp4rk batch running the same batch?)"
                )
            run_id = _insert_run(db, task, workspace, model, settings, now)
            db.execute(
                "INSERT INTO batch_tasks (batch, task_id, run_id, attempts) VALUES (?, ?, ?, 1)",
                (batch, task_id, run_id),
            )
        return self.get_run(run_id)

    def count_attempt(self, batch: str, task_id: str) -> int:
        """Count one more attempt at the task; the attempts so far, this one included."""
        with self._write() as db:
            db.execute(
                "UPDATE batch_tasks SET attempts = attempts + 1 WHERE batch = ? AND task_id = ?",
                (batch, task_id),
            )
            row = db.execute(
                "SELECT attempts FROM batch_tasks WHERE batch = ? AND task_id = ?",
                (batch, task_id),
            ).fetchone()
        if row is None:
            raise RunNotFoundError(f"task {task_id!r} of batch {batch} has no run yet")
        return int(row[0])


def _insert_run(
    db: Transaction, task: str, workspace: str, model: str, settings: dict[str, Any], now: str
) -> str:
    """Insert a new running run owned by this process, under a fresh id; return the id."""
    while True:
        run_id = secrets.token_hex(4)
        if not db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
            break
    db.execute(
        "INSERT INTO runs (id, task, workspace, model, settings, status, owner, "
        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)",
        (run_id, task, workspace, model, json.dumps(settings), this_owner(), now, now),
    )
    return run_id
