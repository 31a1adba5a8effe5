"""``run_batch(ray=True)``: the same tasks as Ray tasks on a local Ray instance.

One Ray instance serves every test here (``ray_session``). A Ray worker killed with
``kill -9`` mid-task is retried: the new attempt takes the run over and resumes it. A pause
(Ctrl-C) reaches a running worker through the store, a stop (Ctrl-C twice) cancels the attempts
in flight, and either way the next invocation resumes the runs.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sp4rk.batch import BatchControl, BatchError, BatchReport, run_batch
from sp4rk.batch.on_ray import PAUSE_POLL, _check_store_is_shared
from sp4rk.store import SQLiteRunStore
from tests.batch.helpers import (
    expected_line,
    factory,
    kill_leftovers,
    result_lines,
    stable,
    wait_for_file,
    write_batch,
)

pytestmark = pytest.mark.timeout(300)


def test_a_200_task_batch_on_ray_gives_the_lines_of_a_local_batch(
    tmp_path: Path, ray_session: Any
) -> None:
    tasks = write_batch(tmp_path, 200)
    local_out, ray_out = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    run_batch(
        tasks,
        local_out,
        store=tmp_path / "local.db",
        model_factory=factory(tmp_path),
        concurrency=16,
        approve="auto",
    )
    report = run_batch(
        tasks,
        ray_out,
        store=tmp_path / "ray.db",
        model_factory=factory(tmp_path),
        concurrency=16,
        approve="auto",
        ray=True,
    )
    assert report.backend == "ray" and report.done and report.completed == 200
    assert report.steps == 400 and report.cpu_seconds > 0
    ray_lines = result_lines(ray_out)
    assert len(ray_lines) == 200
    assert stable(ray_lines) == stable(result_lines(local_out))
    assert stable(ray_lines) == stable([expected_line(i) for i in range(200)])
    written = sorted(p.read_text() for p in (tmp_path / "ray.batch").glob("workspaces/*/out.txt"))
    assert written == sorted(f"task {i}\n" for i in range(200))


def test_a_killed_ray_worker_is_retried_and_its_run_resumed(
    tmp_path: Path, ray_session: Any
) -> None:
    slow = "echo ran >> marker.txt && sleep 20"
    tasks = write_batch(tmp_path, 12, slow={5: slow})
    out, store = tmp_path / "results.jsonl", tmp_path / "runs.db"
    reports: list[BatchReport] = []
    batch = threading.Thread(
        target=lambda: reports.append(
            run_batch(
                tasks,
                out,
                store=store,
                model_factory=factory(tmp_path),
                concurrency=4,
                approve="auto",
                ray=True,
            )
        )
    )
    batch.start()
    marker = wait_for_file(tmp_path, "results.batch/workspaces/t5-*/marker.txt")
    with SQLiteRunStore(store) as opened:
        link = opened.batch_task(str(out.resolve()), "t5")
        assert link is not None
        owner = opened.get_run(link.run_id).owner
    worker = int(owner.rpartition(":")[2])
    assert worker != os.getpid()
    os.kill(worker, signal.SIGKILL)
    batch.join(timeout=240)
    assert not batch.is_alive()
    kill_leftovers(marker.parent)

    (report,) = reports
    assert report.done and report.retries == 1
    assert report.failures == {"worker died": 1}
    lines = result_lines(out)
    assert len(lines) == 12 and len({line["id"] for line in lines}) == 12
    by_id = {line["id"]: line for line in lines}
    assert by_id["t5"]["finished"] and by_id["t5"]["steps"] == 3
    assert marker.read_text() == "ran\n"  # the cut call was not run again
    with SQLiteRunStore(store) as opened:
        steps = opened.steps(by_id["t5"]["run_id"])
        assert len(opened.list_runs()) == 12
    assert "outcome" in steps[0].observation.lower()


def test_a_file_store_is_refused_on_a_cluster_of_several_nodes() -> None:
    class Cluster:
        def __init__(self, alive: int) -> None:
            self.alive = alive

        def nodes(self) -> list[dict[str, Any]]:
            return [{"Alive": True}] * self.alive + [{"Alive": False}]

    _check_store_is_shared(Cluster(1), "/tmp/runs.db")
    _check_store_is_shared(Cluster(3), "postgresql://sp4rk@db/sp4rk")
    with pytest.raises(BatchError, match=r"has 3 nodes.*pass --store postgresql://"):
        _check_store_is_shared(Cluster(3), "/tmp/runs.db")


def test_a_pause_reaches_running_ray_workers_and_the_next_invocation_resumes(
    tmp_path: Path, ray_session: Any
) -> None:
    waits = "echo ran >> marker.txt && touch started && until [ -e ../../go ]; do sleep 0.05; done"
    tasks = write_batch(tmp_path, 6, steps=3, slow={0: waits})
    out, store = tmp_path / "results.jsonl", tmp_path / "runs.db"
    control = BatchControl()
    reports: list[BatchReport] = []

    def first() -> None:
        reports.append(
            run_batch(
                tasks,
                out,
                store=store,
                model_factory=factory(tmp_path),
                concurrency=1,
                approve="auto",
                ray=True,
                control=control,
            )
        )

    batch = threading.Thread(target=first)
    batch.start()
    started = wait_for_file(tmp_path, "results.batch/workspaces/t0-*/started")
    seen = time.monotonic()
    control.pause()
    with SQLiteRunStore(store) as opened:
        while not opened.batch_pausing(str(out.resolve())):
            time.sleep(0.05)
    # The worker looked at the store before the call began; it looks again once PAUSE_POLL
    # has passed, so let that pass before the call ends: the next boundary sees the pause.
    time.sleep(max(0.0, PAUSE_POLL - (time.monotonic() - seen)))
    (tmp_path / "results.batch" / "go").touch()
    batch.join(timeout=240)
    assert not batch.is_alive()

    (paused,) = reports
    assert not paused.done and paused.completed == 0 and paused.paused == 6
    assert not out.exists() or result_lines(out) == []
    with SQLiteRunStore(store) as opened:
        (run,) = opened.list_runs()
        assert run.status == "paused" and len(opened.steps(run.id)) == 1

    resumed = run_batch(
        tasks, out, store=store, model_factory=factory(tmp_path), approve="auto", ray=True
    )
    assert resumed.done and resumed.completed == 6 and resumed.resumed == 1
    lines = result_lines(out)
    # t0's shell call is one more step: its line is that of an uninterrupted 4-step run.
    expected = [expected_line(0, steps=4)] + [expected_line(i, steps=3) for i in range(1, 6)]
    assert stable(lines) == stable(expected)
    assert (started.parent / "marker.txt").read_text() == "ran\n"  # the call ran once
    with SQLiteRunStore(store) as opened:
        assert len(opened.list_runs()) == 6


def test_a_stop_cancels_ray_attempts_and_the_next_invocation_resumes_the_cut_run(
    tmp_path: Path, ray_session: Any
) -> None:
    waits = "echo ran >> marker.txt && until [ -e ../../go ]; do sleep 0.05; done"
    tasks = write_batch(tmp_path, 4, slow={0: waits})
    out, store = tmp_path / "results.jsonl", tmp_path / "runs.db"
    control = BatchControl()
    reports: list[BatchReport] = []
    batch = threading.Thread(
        target=lambda: reports.append(
            run_batch(
                tasks,
                out,
                store=store,
                model_factory=factory(tmp_path),
                concurrency=1,
                approve="auto",
                ray=True,
                control=control,
            )
        )
    )
    batch.start()
    marker = wait_for_file(tmp_path, "results.batch/workspaces/t0-*/marker.txt")
    control.stop()
    batch.join(timeout=240)
    assert not batch.is_alive()
    kill_leftovers(marker.parent)

    (stopped,) = reports
    assert not stopped.done and stopped.completed == 0 and stopped.paused == 4
    resumed = run_batch(
        tasks, out, store=store, model_factory=factory(tmp_path), approve="auto", ray=True
    )
    assert resumed.done and resumed.completed == 4 and resumed.resumed == 1
    by_id = {line["id"]: line for line in result_lines(out)}
    assert sorted(by_id) == ["t0", "t1", "t2", "t3"] and len(result_lines(out)) == 4
    assert by_id["t0"]["finished"] and by_id["t0"]["steps"] == 3
    assert marker.read_text() == "ran\n"  # the cut call was not run again
    with SQLiteRunStore(store) as opened:
        assert len(opened.list_runs()) == 4
        assert "outcome" in opened.steps(by_id["t0"]["run_id"])[0].observation.lower()
