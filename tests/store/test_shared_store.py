"""What a shared store needs, on SQLite and on PostgreSQL alike: the same schema and
migrations, batch bookkeeping, claims that exclude each other, exact recovery, and URLs.

The PostgreSQL cases run when a server is available (``tests.postgres``) and skip saying why
otherwise.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from sp4rk.llm import TokenUsage
from sp4rk.llm.pricing import ModelPrice, PriceTable
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.store import (
    SCHEMA_VERSION,
    PostgresRunStore,
    RunBusyError,
    SQLiteRunStore,
    SQLRunStore,
    StoreError,
    StoreLockedError,
    open_store,
)
from sp4rk.store.postgres import redact
from sp4rk.store.schema import MIGRATIONS, VERSION_TABLE
from tests.store.test_archive import CALLS, is_archived, result_text, run_once
from tests.store.test_store import appending, run_with_store


@pytest.fixture(params=["sqlite", "postgres"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(store_target: str) -> Iterator[SQLRunStore]:
    with open_store(store_target) as opened:
        yield opened


def new_run(store: SQLRunStore, task: str = "t") -> str:
    return store.create_run(task=task, workspace="/w", model="scripted:x", settings={}).id


def test_open_store_takes_a_path_an_sqlite_url_or_a_postgres_url(tmp_path: Path) -> None:
    with open_store(tmp_path / "a.db") as a, open_store(f"sqlite://{tmp_path}/b.db") as b:
        assert isinstance(a, SQLiteRunStore) and isinstance(b, SQLiteRunStore)
        assert b.path == tmp_path / "b.db"
    with pytest.raises(StoreError, match=r"sqlite:///absolute/path\.db"):
        open_store("sqlite://relative.db")
    with pytest.raises(StoreError, match="unknown runs store 'mysql://x'"):
        open_store("mysql://x")
    with pytest.raises(StoreError, match=r"cannot use the runs store postgresql://u:\*\*\*@"):
        open_store("postgresql://u:secret@/db?host=/nonexistent-sp4rk-socket", timeout=1)
    assert redact("postgresql://me:pw@host/db") == "postgresql://me:***@host/db"
    assert redact("postgresql://me@host/db") == "postgresql://me@host/db"


def test_a_new_store_migrates_to_the_current_schema_and_reopens_unchanged(
    store_target: str,
) -> None:
    with open_store(store_target) as first:
        run_id = new_run(first)
    with open_store(store_target) as second:
        assert second.get_run(run_id).task == "t"
        assert second._query("SELECT version FROM sp4rk_schema") == [(SCHEMA_VERSION,)]
        assert {"batches", "batch_tasks"} <= second._tables()


def test_a_version_1_store_is_migrated_keeping_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute(VERSION_TABLE)
    for statement in MIGRATIONS[0][1]:
        db.execute(statement)
    db.execute("INSERT INTO sp4rk_schema (version) VALUES (1)")
    db.execute(
        "INSERT INTO runs (id, task, workspace, model, settings, status, created_at, "
        "updated_at) VALUES ('abcd1234', 'old task', '/w', 'm', '{}', 'paused', 'x', 'x')"
    )
    db.commit()
    db.close()
    with SQLiteRunStore(path) as store:
        assert store.get_run("abcd1234").task == "old task"
        assert store._query("SELECT version FROM sp4rk_schema") == [(SCHEMA_VERSION,)]
        store.open_batch("b")
        assert store.batch_tasks("b") == {}


def test_batch_bookkeeping_links_each_task_to_one_run(store: SQLRunStore) -> None:
    store.open_batch("batch-1")
    assert not store.batch_pausing("batch-1")
    record = store.create_batch_run(
        "batch-1", "t1", task="do it", workspace="/w/t1", model="m", settings={"a": 1}
    )
    assert store.batch_task("batch-1", "t1") is not None
    with pytest.raises(RunBusyError, match="already has run"):
        store.create_batch_run("batch-1", "t1", task="x", workspace="/w", model="m", settings={})
    assert store.count_attempt("batch-1", "t1") == 2
    links = store.batch_tasks("batch-1")
    assert list(links) == ["t1"]
    assert (links["t1"].run_id, links["t1"].attempts) == (record.id, 2)
    assert store.batch_task("batch-1", "t2") is None and store.batch_tasks("other") == {}
    store.pause_batch("batch-1")
    assert store.batch_pausing("batch-1")
    store.open_batch("batch-1")  # a new start lifts the pause
    assert not store.batch_pausing("batch-1")


def test_a_claim_by_a_live_owner_elsewhere_is_refused_unless_taken_over(
    store: SQLRunStore,
) -> None:
    run_id = new_run(store)
    store.end_run(run_id, status="paused")
    # A worker on another host cannot be checked: it counts as alive.
    with store._write() as db:
        db.execute(
            "UPDATE runs SET owner = ?, status = 'running' WHERE id = ?",
            ("elsewhere.example:4242", run_id),
        )
    with pytest.raises(RunBusyError, match=r"elsewhere\.example:4242"):
        store.claim_run(run_id)
    assert store.claim_run(run_id, takeover=True).owner != "elsewhere.example:4242"


def test_a_claim_waits_for_another_claim_of_the_same_run(store_target: str) -> None:
    with open_store(store_target) as a, open_store(store_target, timeout=0.2) as b:
        run_id = new_run(a)
        a.end_run(run_id, status="paused")
        with a._write() as db:  # a is in the middle of claiming it
            db.execute(f"SELECT owner FROM runs WHERE id = ?{a._LOCK_ROW}", (run_id,))
            with pytest.raises(StoreLockedError, match="locked by another process"):
                b.claim_run(run_id)
        assert b.claim_run(run_id).status == "running"


def test_recovery_counts_the_tokens_of_a_cut_response_exactly_once(store: SQLRunStore) -> None:
    run_id = new_run(store)
    effects: list[str] = []
    tools = appending(effects, crash_on="b")
    cut = tool_calls_response(
        ("append", {"line": "a"}), ("append", {"line": "b"}), usage=TokenUsage(1000, 100)
    )
    first = tool_calls_response(("append", {"line": "x"}), usage=TokenUsage(10, 1))
    executor, _, window = run_with_store(store, run_id, ScriptedLLM([first, cut]), tools)  # type: ignore[arg-type]
    with pytest.raises(asyncio.CancelledError):
        executor.run_sync(tools.list(), window)
    saved = store.state(run_id)
    assert saved is not None and saved.budget.input_tokens == 1010  # settled before the cut
    assert store.run_seconds(run_id) == saved.budget.seconds > 0
    assert store.run_seconds(new_run(store)) == 0.0

    checkpoint = store.recover(run_id)
    assert checkpoint.state is not None and checkpoint.state.budget.input_tokens == 1010


def test_recovery_adds_the_usage_a_crash_kept_from_the_saved_state(store: SQLRunStore) -> None:
    run_id = new_run(store)
    effects: list[str] = []
    tools = appending(effects)
    executor, _, window = run_with_store(
        store,  # type: ignore[arg-type]
        run_id,
        ScriptedLLM(
            [
                tool_calls_response(("append", {"line": "a"}), usage=TokenUsage(10, 1)),
                finish_response("done"),
            ],
            model="priced-model",
        ),
        tools,
    )
    # A process killed between a response and its boundary leaves the response open and the
    # state of the boundary before it: simulate that by losing every boundary commit.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "commit_boundary", lambda *args, **kwargs: None)
        executor.run_sync(tools.list(), window)
    assert store.state(run_id) is None and len(store.open_responses(run_id)) == 2
    prices = PriceTable({"priced-model": ModelPrice(input=1.0, output=2.0)})
    checkpoint = store.recover(run_id, prices=prices)
    spent = checkpoint.state.budget if checkpoint.state is not None else None
    assert spent is not None and (spent.input_tokens, spent.output_tokens) == (10, 1)
    assert spent.model_calls == 2 and spent.cost == pytest.approx(12e-6)


def test_postgres_store_is_a_sql_store(postgres_url: str) -> None:
    with open_store(postgres_url) as opened:
        assert isinstance(opened, PostgresRunStore)
        assert "search_path" in opened.location


async def test_archived_observations_read_back_on_either_store(store: SQLRunStore) -> None:
    result, _, run_id = await run_once(store)  # type: ignore[arg-type]
    archived = [s for s in result.steps if is_archived(s)]
    assert len(archived) > CALLS // 2
    for i, step in enumerate(result.steps[:CALLS]):
        assert step.observation == result_text(f"k{i}")
    # From a tool's worker thread, while the loop's thread also reads (statements in turn).
    texts = await asyncio.gather(
        *(asyncio.to_thread(lambda s=s: s.observation) for s in archived[:8]),
        asyncio.to_thread(store.steps, run_id),
    )
    assert texts[:8] == [result_text(f"k{i}") for i in range(8)]
