"""Flat memory: with a store attached, committed observations live on disk, read on demand.

A run with the runs store (or a trajectory store that persists) keeps only a light copy of each
committed step in memory — everything but its observation text — and ``step.observation`` is
read back from the store whenever it is read. Without a store, every observation stays in
memory, as before.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import pickle
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from sp4rk._core.archive import archive_observation, is_archived
from sp4rk.agent import (
    Executor,
    ExecutorResult,
    ListTrajectoryStore,
    RunState,
    Step,
    StepArchive,
    StepArchiveError,
    SubAgentTask,
    load_checkpoint,
    run_sub_agent,
    save_checkpoint,
)
from sp4rk.agent._loop.archive import KEEP_RECENT, MIN_ARCHIVED_CHARS
from sp4rk.llm import ChatResponse, ToolCall
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.store import SQLiteRunStore, StoreCorruptError, StoreError, StoreJournal
from sp4rk.tools import Registry, RunContext, tool

#: Tool calls in the long runs: enough that most steps are older than the kept tail.
CALLS = 80
#: Characters of each lookup result: well above what stays in memory regardless.
RESULT_CHARS = 2_000


def result_text(key: str) -> str:
    return f"record {key}: " + key[-1] * RESULT_CHARS


def lookups() -> Registry:
    @tool
    async def lookup(key: str) -> str:
        """Look up a record."""
        return result_text(key)

    return Registry([lookup])


def script(calls: int = CALLS) -> list[ChatResponse]:
    steps = [tool_calls_response(("lookup", {"key": f"k{i}"})) for i in range(calls)]
    return [*steps, finish_response("done")]


def held_text(step: Step) -> object:
    """What the step object itself holds in its observation slot (not what reading gives)."""
    return Step.__dict__["observation"].__get__(step, Step)


async def run_once(
    store: SQLiteRunStore | None = None,
    *,
    ctx: RunContext | None = None,
    calls: int = CALLS,
) -> tuple[ExecutorResult, ContextWindow, str]:
    executor = Executor(ScriptedLLM(script(calls)), lookups(), calls + 5)
    run_id = ""
    if store is not None:
        run_id = store.create_run(task="t", workspace="/w", model="scripted:x", settings={}).id
        executor.set_journal(StoreJournal(store, run_id))
    window = ContextWindow(max_tokens=1_000_000)
    result = await executor.run(lookups().list(), window, ctx)
    assert result.finished
    return result, window, run_id


# --- a long run with the runs store --------------------------------------------------------


async def test_committed_observations_leave_memory_and_read_back_as_the_tool_returned(
    tmp_path: Path,
) -> None:
    plain, _, _ = await run_once()
    with SQLiteRunStore(tmp_path / "runs.db") as store:
        result, window, run_id = await run_once(store)
        steps = result.steps
        archived = [i for i, s in enumerate(steps) if is_archived(s)]
        # Every committed step but the newest few holds no text of its own any more.
        assert archived == list(range(len(steps) - 1 - KEEP_RECENT))
        assert all(not isinstance(held_text(steps[i]), str) for i in archived)
        assert all(isinstance(held_text(s), str) for s in steps[archived[-1] + 1 :])
        # The window shares the step objects: its old steps are light as well.
        assert all(is_archived(s) for s in window.steps[: len(archived)])
        # Reading gives what the tool returned, for every step, as a run without a store.
        for i, step in enumerate(steps[:CALLS]):
            assert step.observation == result_text(f"k{i}")
        assert [s.observation for s in steps] == [s.observation for s in plain.steps]
        assert steps == plain.steps
        assert steps[3:7] == plain.steps[3:7]
        assert store.steps(run_id)[:5] == steps[:5]


async def test_without_a_store_every_observation_stays_in_memory() -> None:
    result, window, _ = await run_once()
    assert all(type(s) is Step for s in result.steps)
    assert all(isinstance(held_text(s), str) for s in window.steps)
    assert result.steps[0].observation == result_text("k0")


async def test_an_archived_step_reads_as_a_plain_step_everywhere(tmp_path: Path) -> None:
    with SQLiteRunStore(tmp_path / "runs.db") as store:
        result, _, _ = await run_once(store)
        step = result.steps[0]
        assert is_archived(step)
        text = result_text("k0")
        assert step.to_dict()["observation"] == text
        assert step.observation_parts()[0].startswith(text)
        for twin in (copy.copy(step), copy.deepcopy(step), pickle.loads(pickle.dumps(step))):
            assert type(twin) is Step
            assert twin.observation == text
            assert twin == step
        changed = dataclasses.replace(step, thought="other")
        assert changed.observation == text
        assert not is_archived(changed)
        # A checkpoint of the result carries the text (what `sp4rk show` and resume read).
        save_checkpoint(tmp_path / "checkpoint.json", result)
        restored = load_checkpoint(tmp_path / "checkpoint.json")
        assert [s.observation for s in restored] == [s.observation for s in result.steps]


async def test_a_resumed_runs_loaded_steps_are_archived_after_its_first_boundary(
    tmp_path: Path,
) -> None:
    with SQLiteRunStore(tmp_path / "runs.db") as store:
        run_id = store.create_run(task="t", workspace="/w", model="scripted:x", settings={}).id
        first = Executor(ScriptedLLM(script()), lookups(), CALLS)  # stops at the step limit
        first.set_journal(StoreJournal(store, run_id))
        stopped = await first.run(lookups().list(), ContextWindow(max_tokens=1_000_000))
        assert not stopped.finished
        checkpoint = store.recover(run_id)
        state = checkpoint.state
        assert state is not None
        executor = Executor(
            ScriptedLLM(script(2)),
            lookups(),
            CALLS + 10,
            resume_steps=checkpoint,
            resume_state=state,
        )
        store.claim_run(run_id)
        executor.set_journal(StoreJournal(store, run_id, state=state))
        window = ContextWindow(max_tokens=1_000_000)
        window.seed_steps(checkpoint)
        result = await executor.run(lookups().list(), window)
        assert is_archived(result.steps[0])
        assert result.steps[0].observation == result_text("k0")
        assert result.steps[: len(checkpoint)] == list(checkpoint)


# --- hostile stores: a missing or changed row is an error, never an empty observation -----


async def test_a_step_gone_from_the_store_is_an_error_that_says_so(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SQLiteRunStore(path) as store:
        result, _, run_id = await run_once(store)
        db = sqlite3.connect(path)
        db.execute("DELETE FROM steps WHERE run_id = ? AND seq = 2", (run_id,))
        db.execute("UPDATE steps SET data = ? WHERE run_id = ? AND seq = 3", ("{not json", run_id))
        db.execute(
            "UPDATE steps SET data = (SELECT data FROM steps WHERE run_id = ? AND seq = 5) "
            "WHERE run_id = ? AND seq = 4",
            (run_id, run_id),
        )
        db.commit()
        db.close()
        with pytest.raises(StepArchiveError, match=f"lost step 2 of run '{run_id}'") as lost:
            _ = result.steps[2].observation
        assert isinstance(lost.value.__cause__, StoreCorruptError)
        with pytest.raises(StepArchiveError, match="malformed step 3"):
            _ = result.steps[3].observation
        with pytest.raises(StepArchiveError, match="another observation for step 4"):
            _ = result.steps[4].observation
        assert result.steps[1].observation == result_text("k1")


def test_the_store_reads_a_range_of_steps_and_refuses_a_gap(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SQLiteRunStore(path) as store:
        run_id = store.create_run(task="t", workspace="/w", model="m", settings={}).id
        steps = [Step(observation=f"o{i}") for i in range(5)]
        assert store.commit_boundary(run_id, steps[:3], RunState()) == 3
        assert store.commit_boundary(run_id, steps[3:], RunState()) == 5
        assert [s.observation for s in store.read_steps(run_id, 1, 4)] == ["o1", "o2", "o3"]
        assert store.read_steps(run_id, 2, 2) == []
        with pytest.raises(StoreCorruptError, match="lost step 5"):
            store.read_steps(run_id, 4, 6)


# --- the trajectory store: incremental sync, and one that persists --------------------------


class TailRecorder(ListTrajectoryStore):
    """A list store that records what each sync handed over."""

    def __init__(self) -> None:
        super().__init__()
        self.tails: list[tuple[int, int]] = []
        self.full_syncs = 0

    def sync(self, steps: Sequence[Step]) -> None:
        self.full_syncs += 1
        super().sync(steps)

    def sync_tail(self, start: int, steps: Sequence[Step]) -> None:
        self.tails.append((start, len(steps)))
        super().sync_tail(start, steps)


class SyncOnly:
    """A trajectory store written for the old protocol: ``sync`` only."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.held: list[Step] = []

    def sync(self, steps: Sequence[Step]) -> None:
        self.sizes.append(len(steps))
        self.held = list(steps)

    def steps(self) -> list[Step]:
        return list(self.held)


async def test_the_trajectory_store_is_given_only_the_new_steps_at_each_boundary() -> None:
    store = TailRecorder()
    result, _, _ = await run_once(ctx=RunContext(trajectory_store=store), calls=10)
    assert store.full_syncs == 0
    starts = [start for start, _ in store.tails]
    assert starts == sorted(starts) and starts[0] == 0
    assert sum(count for _, count in store.tails) == len(result.steps)  # each step once
    assert store.steps() == result.steps


async def test_a_sync_only_trajectory_store_still_gets_the_whole_trajectory() -> None:
    store = SyncOnly()
    result, _, _ = await run_once(ctx=RunContext(trajectory_store=store), calls=10)
    assert store.sizes[-1] == len(result.steps)
    assert store.held == result.steps


class JsonTrajectoryStore:
    """A trajectory store that persists (as JSON text) and reads steps back by index."""

    def __init__(self) -> None:
        self.rows: list[str] = []
        self.reads = 0

    def sync(self, steps: Sequence[Step]) -> None:  # pragma: no cover - sync_tail is used
        self.sync_tail(0, steps)

    def sync_tail(self, start: int, steps: Sequence[Step]) -> None:
        del self.rows[start:]
        self.rows += [json.dumps(s.to_dict()) for s in steps]

    def steps(self) -> list[Step]:
        return self.read_steps(0, len(self.rows))

    def stored_steps(self) -> int:
        return len(self.rows)

    def read_steps(self, start: int, stop: int) -> list[Step]:
        self.reads += 1
        return [Step.from_dict(json.loads(r)) for r in self.rows[start:stop]]


async def test_a_trajectory_store_that_persists_holds_the_observations() -> None:
    store = JsonTrajectoryStore()
    assert isinstance(store, StepArchive)
    result, _, _ = await run_once(ctx=RunContext(trajectory_store=store))
    assert is_archived(result.steps[0])
    before = store.reads
    assert result.steps[10].observation == result_text("k10")
    assert store.reads == before + 1


class Misaligned(JsonTrajectoryStore):
    """Holds one step more than the trajectory (steps of another process, say)."""

    def stored_steps(self) -> int:
        return len(self.rows) + 1


async def test_an_archive_that_does_not_hold_the_trajectory_exactly_is_not_used() -> None:
    store = Misaligned()
    result, _, _ = await run_once(ctx=RunContext(trajectory_store=store))
    assert not any(is_archived(s) for s in result.steps)
    assert store.reads == 0


async def test_short_observations_are_not_worth_archiving(tmp_path: Path) -> None:
    @tool
    async def lookup(key: str) -> str:
        """Look up a record."""
        return "s" * (MIN_ARCHIVED_CHARS - 1)

    with SQLiteRunStore(tmp_path / "runs.db") as store:
        run_id = store.create_run(task="t", workspace="/w", model="m", settings={}).id
        executor = Executor(ScriptedLLM(script()), Registry([lookup]), CALLS + 5)
        executor.set_journal(StoreJournal(store, run_id))
        result = await executor.run(Registry([lookup]).list(), ContextWindow(max_tokens=10**6))
    assert result.finished
    assert len(result.steps) > KEEP_RECENT + 10
    assert not any(is_archived(s) for s in result.steps)


def test_an_observation_rewritten_in_the_store_is_refused_not_returned() -> None:
    store = JsonTrajectoryStore()
    step = Step(action=ToolCall("c1", "lookup", "{}"), observation="y" * 300, notes_length=20)
    store.sync_tail(0, [step])
    archive_observation(step, store, 0)
    assert step.observation == "y" * 300
    # Same call, same tool, same length: only the text differs (tool text moved into notes).
    store.rows[0] = json.dumps({**json.loads(store.rows[0]), "observation": "z" * 300})
    with pytest.raises(StepArchiveError, match="another observation for step 0"):
        _ = step.observation
    store.rows.clear()
    with pytest.raises(StepArchiveError, match="not in its store any more"):
        _ = step.observation


def test_a_step_subclass_of_the_callers_keeps_its_observation() -> None:
    class Mine(Step):
        __slots__ = ()

    store = JsonTrajectoryStore()
    step = Mine(action=ToolCall("c1", "lookup", "{}"), observation="m" * 300)
    store.sync_tail(0, [step])
    archive_observation(step, store, 0)
    assert not is_archived(step)
    assert held_text(step) == "m" * 300


async def test_a_sub_agent_never_writes_into_the_parents_trajectory_store() -> None:
    store = JsonTrajectoryStore()
    ctx = RunContext(trajectory_store=store)

    @tool
    async def delegate(task: str) -> str:
        """Hand a task to a sub-agent."""
        child = Executor(ScriptedLLM(script(3)), lookups(), 10)
        done = await run_sub_agent(
            SubAgentTask(
                "child", child, ContextWindow(max_tokens=10**6), lookups().list(), task, ctx=ctx
            )
        )
        return f"child said {done.output}"

    registry = Registry([lookups().get("lookup"), delegate])
    calls = [tool_calls_response(("lookup", {"key": f"k{i}"})) for i in range(CALLS)]
    half = len(calls) // 2
    replies = [
        *calls[:half],
        tool_calls_response(("delegate", {"task": "more"})),
        *calls[half:],
        finish_response("done"),
    ]
    executor = Executor(ScriptedLLM(replies), registry, 200)
    result = await executor.run(registry.list(), ContextWindow(max_tokens=10**6), ctx)
    assert result.finished
    assert store.stored_steps() == len(result.steps)
    assert [s.observation for s in store.steps()] == [s.observation for s in result.steps]
    assert result.steps[0].observation == result_text("k0")
    assert any(is_archived(s) for s in result.steps)


async def test_an_archived_observation_reads_back_from_another_thread(tmp_path: Path) -> None:
    with SQLiteRunStore(tmp_path / "runs.db") as store:
        result, _, _ = await run_once(store, calls=KEEP_RECENT + 4)
        step = result.steps[0]
        assert is_archived(step)
        text = await asyncio.to_thread(lambda: step.observation)  # a tool's worker thread
        assert text == result_text("k0")


async def test_reading_an_archived_observation_after_the_store_is_closed_says_so(
    tmp_path: Path,
) -> None:
    store = SQLiteRunStore(tmp_path / "runs.db")
    result, _, _ = await run_once(store, calls=KEEP_RECENT + 4)
    store.close()
    with pytest.raises(StepArchiveError, match=r"closed.*before closing") as closed:
        _ = result.steps[0].observation
    assert isinstance(closed.value.__cause__, StoreError)
    # Its repr (logging, a debugger, a failing test) never reads the store.
    shown = repr(result.steps[0])
    assert shown.startswith("Step(") and "<in the store: step 0, " in shown
    assert result.steps[-2].observation == result_text(f"k{KEEP_RECENT + 3}")  # kept in memory


async def test_a_list_store_subclass_that_overrides_sync_still_gets_sync() -> None:
    seen: list[int] = []

    class Spy(ListTrajectoryStore):  # written before sync_tail existed
        def sync(self, steps: Sequence[Step]) -> None:
            super().sync(steps)
            seen.append(len(steps))

    result, _, _ = await run_once(ctx=RunContext(trajectory_store=Spy()), calls=3)
    assert seen[-1] == len(result.steps)
