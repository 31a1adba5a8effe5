"""The runs store: schema and migrations, hostile files, journaling, recovery, ownership."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sp4rk.agent import Executor, Step
from sp4rk.agent.types import NudgeKind
from sp4rk.llm import ChatResponse, ToolCall
from sp4rk.llm.testing import ScriptedLLM, finish_response, text_response, tool_calls_response
from sp4rk.memory import ContextWindow, validate_history
from sp4rk.store import (
    SCHEMA_VERSION,
    RunBusyError,
    RunNotFoundError,
    SQLiteRunStore,
    StoreCorruptError,
    StoreError,
    StoreJournal,
    StoreLockedError,
    StoreVersionError,
    close_response,
    ended_by_accepted_finish,
)
from sp4rk.store.records import owner_alive
from sp4rk.tools import Registry, tool


def new_run(store: SQLiteRunStore, task: str = "t") -> str:
    return store.create_run(task=task, workspace="/w", model="scripted:x", settings={}).id


def appending(effects: list[str], crash_on: str = "") -> Registry:
    @tool
    async def append(line: str) -> str:
        """Append a line."""
        effects.append(line)
        if line == crash_on:
            raise asyncio.CancelledError  # the process stops mid-call, after the effect
        return f"appended {line}"

    return Registry([append])


def calls(*lines: str) -> ChatResponse:
    return tool_calls_response(*[("append", {"line": x}) for x in lines])


def run_with_store(
    store: SQLiteRunStore,
    run_id: str,
    llm: ScriptedLLM,
    tools: Registry,
    checkpoint: list[Step] | None = None,
):  # type: ignore[no-untyped-def]
    state = getattr(checkpoint, "state", None)
    journal = StoreJournal(store, run_id, state=state)
    window = ContextWindow()
    if checkpoint:
        window.seed_steps(checkpoint)
    executor = Executor(
        llm,
        tools,
        20,
        resume_steps=checkpoint,
        resume_state=state,
        user_message_source=journal.next_message,
    )
    executor.set_journal(journal)
    return executor, journal, window


# --- schema, versions, hostile files -----------------------------------------------------


def test_a_new_store_has_the_current_schema_and_reopening_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "runs.db"
    with SQLiteRunStore(path) as store:
        run_id = new_run(store)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    with SQLiteRunStore(path) as store:
        assert store.get_run(run_id).task == "t"
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM sp4rk_schema").fetchall() == [(SCHEMA_VERSION,)]
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_store_from_a_newer_sp4rk_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteRunStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE sp4rk_schema SET version = ?", (SCHEMA_VERSION + 1,))
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(StoreVersionError, match="newer sp4rk"):
        SQLiteRunStore(path)
    assert path.read_bytes() == before


def test_a_file_that_is_not_a_database_is_reported_damaged_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not sqlite at all" * 200)
    before = path.read_bytes()
    with pytest.raises(StoreCorruptError, match="move it aside"):
        SQLiteRunStore(path)
    assert path.read_bytes() == before


def test_another_programs_database_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (x TEXT)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="another program"):
        SQLiteRunStore(path)


def test_a_store_locked_by_another_process_says_so(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteRunStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        store = SQLiteRunStore(path, timeout=0.05)
        with pytest.raises(StoreLockedError, match="locked by another process"):
            new_run(store)
        store.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_malformed_rows_are_reported_never_evaluated(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SQLiteRunStore(path) as store:
        run_id = new_run(store)
        db = sqlite3.connect(path)
        db.execute(
            "INSERT INTO steps (run_id, seq, data) VALUES (?, 0, ?)",
            (run_id, "[" * 500 + "]" * 500),
        )
        db.execute(
            "INSERT INTO steps (run_id, seq, data) VALUES (?, 1, ?)",
            (run_id, json.dumps({"is_error": "yes"})),
        )
        db.commit()
        with pytest.raises(StoreCorruptError, match="malformed step 0"):
            store.steps(run_id)
        db.execute("DELETE FROM steps WHERE seq = 0")
        db.commit()
        with pytest.raises(StoreCorruptError, match="malformed step 1"):
            store.steps(run_id)


def test_runs_are_found_by_id_prefix_or_last(tmp_path: Path) -> None:
    with SQLiteRunStore(tmp_path / "runs.db") as store:
        first = new_run(store, "first")
        second = new_run(store, "second")
        assert store.get_run(first[:4]).task == "first"
        assert store.get_run("last").id == second
        assert [r.id for r in store.list_runs()] == [second, first]
        with pytest.raises(RunNotFoundError, match="sp4rk runs"):
            store.get_run("zzzzzzzz")
        with pytest.raises(RunNotFoundError):
            store.get_run(first[:2])  # too short to be a prefix


# --- journaling through a real executor ---------------------------------------------------


def test_each_boundary_commits_steps_and_state_and_the_ledger_records_every_call(
    tmp_path: Path,
) -> None:
    store = SQLiteRunStore(tmp_path / "runs.db")
    run_id = new_run(store)
    effects: list[str] = []
    tools = appending(effects)
    executor, _, window = run_with_store(
        store, run_id, ScriptedLLM([calls("a", "b"), calls("c"), finish_response("done")]), tools
    )
    result = executor.run_sync(tools.list(), window)
    assert result.finished
    assert [s.to_dict() for s in store.steps(run_id)] == [s.to_dict() for s in result.steps]
    state = store.state(run_id)
    assert state is not None and state.to_dict() == result.state.to_dict()  # type: ignore[union-attr]
    ledger = store.ledger(run_id)
    assert [(e.tool, e.status) for e in ledger] == [("append", "completed")] * 3
    assert store.open_responses(run_id) == []
    # Model responses committed at boundaries (end_run adds the finishing one).
    assert result.state is not None
    assert store.get_run(run_id).step_count == result.state.iteration == 2
    store.end_run(run_id, status="finished", responses=result.model_responses)
    assert store.get_run(run_id).step_count == result.model_responses == 3


def test_a_call_cut_short_is_closed_from_the_ledger_and_never_run_again(tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.db")
    run_id = new_run(store)
    effects: list[str] = []
    tools = appending(effects, crash_on="b")
    executor, _, window = run_with_store(
        store, run_id, ScriptedLLM([calls("x"), calls("a", "b", "c")]), tools
    )
    with pytest.raises(asyncio.CancelledError):
        executor.run_sync(tools.list(), window)
    assert effects == ["x", "a", "b"]
    # The cut response is not committed from memory: it is still open in the store.
    assert [g for g, _, _ in store.open_responses(run_id)] == [2]

    checkpoint = store.recover(run_id)
    closing = checkpoint[-3:]
    assert [s.observation.split(":")[0] for s in closing] == [
        "appended a",
        "Interrupted",
        "Not executed",
    ]
    assert [e.status for e in store.ledger(run_id)] == [
        "completed",
        "completed",
        "interrupted",
        "not_run",
    ]
    assert checkpoint.state is not None and checkpoint.state.iteration == 2
    assert checkpoint.state.budget.tool_calls == 3  # x, a and b ran; c never started
    assert store.recover(run_id) == checkpoint  # recovering twice adds nothing

    llm = ScriptedLLM([finish_response("done")])
    executor, _, window = run_with_store(store, run_id, llm, appending(effects), checkpoint)
    result = executor.run_sync(tools.list(), window)
    assert result.finished and effects == ["x", "a", "b"]
    validate_history(llm.requests[0].messages)


def test_live_messages_are_delivered_once_even_across_a_crash(tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.db")
    run_id = new_run(store)
    effects: list[str] = []
    tools = appending(effects, crash_on="b")
    executor, journal, window = run_with_store(
        store, run_id, ScriptedLLM([calls("a"), calls("b")]), tools
    )
    journal.add_message("first message")
    with pytest.raises(asyncio.CancelledError):
        executor.run_sync(tools.list(), window)
    # Delivered at the first boundary, committed at the second: never again.
    assert store.pending_messages(run_id) == []
    journal.add_message("typed while the call ran")  # not handed out before the crash
    checkpoint = store.recover(run_id)
    assert checkpoint.state is not None
    assert checkpoint.state.pending_messages == ["typed while the call ran"]
    assert store.pending_messages(run_id) == []
    users = [s.user_nudge for s in checkpoint if s.nudge_kind is NudgeKind.USER]
    assert users == ["first message"]


def test_text_replies_and_a_final_accepted_finish_are_recognised(tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.db")
    run_id = new_run(store)
    tools = appending([])
    llm = ScriptedLLM([text_response("thinking"), calls("a"), finish_response("ok")])
    executor, _, window = run_with_store(store, run_id, llm, tools)
    executor.run_sync(tools.list(), window)
    steps = store.steps(run_id)
    assert ended_by_accepted_finish(steps)
    assert not ended_by_accepted_finish(steps[:-1])


def test_closing_matches_calls_by_position_even_with_repeated_ids() -> None:
    response = tool_calls_response(
        ToolCall("same", "append", '{"line": "a"}'), ToolCall("same", "append", '{"line": "b"}')
    )
    first = Step(action=response.message.tool_calls[0], observation="appended a", response_group=3)
    steps = close_response(response, 3, {0: first}, started=[1])
    assert [s.observation.split(":")[0] for s in steps] == ["appended a", "Interrupted"]
    assert len({s.action.id for s in steps if s.action}) == 2


# --- ownership -----------------------------------------------------------------------------


def test_a_run_driven_by_a_live_process_cannot_be_claimed_until_it_is_gone(
    tmp_path: Path,
) -> None:
    store = SQLiteRunStore(tmp_path / "runs.db")
    run_id = new_run(store)
    other = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        owner = f"{store.get_run(run_id).owner.rpartition(':')[0]}:{other.pid}"
        db = sqlite3.connect(store.path)
        db.execute("UPDATE runs SET owner = ? WHERE id = ?", (owner, run_id))
        db.commit()
        assert store.get_run(run_id).display_status() == "running"
        with pytest.raises(RunBusyError, match="being driven by process"):
            store.claim_run(run_id)
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait()
    assert not owner_alive(owner)
    assert store.get_run(run_id).display_status() == "interrupted"
    assert store.claim_run(run_id).owner != owner
