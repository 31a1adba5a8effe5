"""``run_batch`` in one process: a 200-task scripted batch, resuming, pausing, failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sp4rk.batch import BatchControl, BatchListener, BatchResult, run_batch
from sp4rk.store import SQLiteRunStore
from tests.batch.helpers import expected_line, factory, result_lines, stable, write_batch


def test_a_200_task_scripted_batch_completes_with_one_line_per_task(tmp_path: Path) -> None:
    tasks = write_batch(tmp_path, 200)
    out = tmp_path / "results.jsonl"
    report = run_batch(
        tasks,
        out,
        store=tmp_path / "runs.db",
        model_factory=factory(tmp_path),
        concurrency=16,
        approve="auto",
    )
    lines = result_lines(out)
    assert len(lines) == 200
    assert stable(lines) == stable([expected_line(i) for i in range(200)])
    assert all(len(line["run_id"]) == 8 and line["seconds"] >= 0 for line in lines)
    workspaces = tmp_path / "results.batch" / "workspaces"
    written = sorted(p.read_text() for p in workspaces.glob("*/out.txt"))
    assert written == sorted(f"task {i}\n" for i in range(200))
    assert (tmp_path / "seed" / "out.txt").exists() is False  # the source is never touched
    assert (report.completed, report.finished, report.failed, report.paused) == (200, 200, 0, 0)
    assert report.steps == 400 and report.model_calls == 400
    assert report.done and report.tasks_per_second > 0
    assert report.cpu_per_step_ms is not None and report.cpu_per_step_ms > 0
    with SQLiteRunStore(tmp_path / "runs.db") as store:
        assert len(store.batch_tasks(str(out))) == 200
        assert {r.status for r in store.list_runs()} == {"finished"}

    again = run_batch(tasks, out, store=tmp_path / "runs.db", model_factory=factory(tmp_path))
    assert (again.skipped, again.completed, again.steps) == (200, 0, 0)
    assert len(result_lines(out)) == 200


class PauseAfter(BatchListener):
    def __init__(self, control: BatchControl, count: int) -> None:
        self.control = control
        self.count = count
        self.seen: list[BatchResult] = []

    def task_ended(self, result: BatchResult) -> None:
        self.seen.append(result)
        if len(self.seen) == self.count:
            self.control.pause()


def test_a_half_done_batch_resumes_without_losing_or_repeating_anything(tmp_path: Path) -> None:
    tasks = write_batch(tmp_path, 60, steps=4)
    out, store = tmp_path / "results.jsonl", tmp_path / "runs.db"
    control = BatchControl()
    first = run_batch(
        tasks,
        out,
        store=store,
        model_factory=factory(tmp_path),
        concurrency=8,
        approve="auto",
        control=control,
        listener=PauseAfter(control, 20),
    )
    assert not first.done and first.paused > 0
    assert first.completed == len(result_lines(out)) < 60
    with SQLiteRunStore(store) as opened:
        paused = [r for r in opened.list_runs() if r.status == "paused"]
        started = len(opened.list_runs())
    assert started < 60  # the pause kept the rest from starting

    second = run_batch(tasks, out, store=store, model_factory=factory(tmp_path), approve="auto")
    assert second.done and second.skipped == first.completed
    assert second.resumed == len(paused)
    lines = result_lines(out)
    assert len(lines) == 60 and len({line["id"] for line in lines}) == 60
    assert stable(lines) == stable([expected_line(i, steps=4) for i in range(60)])
    with SQLiteRunStore(store) as opened:
        runs = opened.list_runs()
    assert len(runs) == 60  # one run per task: paused ones were resumed, not started again
    assert {line["run_id"] for line in lines} == {r.id for r in runs}


def test_a_stop_cuts_runs_and_the_next_invocation_resumes_them(tmp_path: Path) -> None:
    tasks = write_batch(tmp_path, 30, steps=5)
    out, store = tmp_path / "results.jsonl", tmp_path / "runs.db"
    control = BatchControl()

    class StopAfter(BatchListener):
        def task_ended(self, result: BatchResult) -> None:
            control.stop()

    first = run_batch(
        tasks,
        out,
        store=store,
        model_factory=factory(tmp_path),
        approve="auto",
        control=control,
        listener=StopAfter(),
    )
    assert not first.done
    second = run_batch(tasks, out, store=store, model_factory=factory(tmp_path), approve="auto")
    assert second.done
    lines = result_lines(out)
    assert stable(lines) == stable([expected_line(i, steps=5) for i in range(30)])


def test_failed_runs_are_retried_from_the_store_then_reported(tmp_path: Path) -> None:
    # A script with no reply left fails the run with a model error on every attempt.
    tasks = write_batch(tmp_path, 3)
    (tmp_path / "scripts" / "t1.json").write_text(json.dumps([{"content": "thinking"}]))
    out = tmp_path / "results.jsonl"
    report = run_batch(
        tasks,
        out,
        store=tmp_path / "runs.db",
        model_factory=factory(tmp_path),
        approve="auto",
        retries=2,
    )
    by_id = {line["id"]: line for line in result_lines(out)}
    assert by_id["t0"]["finished"] and by_id["t2"]["finished"]
    assert by_id["t1"]["exit_reason"] == "error" and "no reply left" in by_id["t1"]["error"]
    assert (report.failed, report.retries) == (1, 2)
    assert report.failures == {"model error (LLMError)": 3}
    with SQLiteRunStore(tmp_path / "runs.db") as store:
        link = store.batch_task(str(out), "t1")
        assert link is not None and link.attempts == 3
        assert len(store.list_runs()) == 3  # the attempts resumed one run


def test_runs_that_end_at_a_limit_are_results_and_counted_by_kind(tmp_path: Path) -> None:
    tasks = write_batch(tmp_path, 2, steps=4)
    lines = [json.loads(x) for x in tasks.read_text().splitlines()]
    lines[0]["max_steps"] = 1
    lines[1]["budget"] = {"max_tool_calls": 1}
    tasks.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = tmp_path / "results.jsonl"
    report = run_batch(
        tasks, out, store=tmp_path / "runs.db", model_factory=factory(tmp_path), approve="auto"
    )
    by_id = {line["id"]: line for line in result_lines(out)}
    assert by_id["t0"]["exit_reason"] == "step_limit" and not by_id["t0"]["finished"]
    assert by_id["t1"]["exit_reason"] == "budget_exhausted"
    assert report.unfinished == 2 and report.done
    assert report.failures == {"step_limit": 1, "budget_exhausted": 1}


def test_approve_never_denies_writes_and_tells_the_model(tmp_path: Path) -> None:
    tasks = write_batch(tmp_path, 1)
    out = tmp_path / "results.jsonl"
    run_batch(tasks, out, store=tmp_path / "runs.db", model_factory=factory(tmp_path))
    assert result_lines(out)[0]["finished"]
    assert not list((tmp_path / "results.batch" / "workspaces").glob("*/out.txt"))
    with SQLiteRunStore(tmp_path / "runs.db") as store:
        steps = store.steps(result_lines(out)[0]["run_id"])
    assert "--approve never" in steps[0].observation


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency must be a whole number of at least 1"),
        ({"retries": -1}, "retries must be"),
        ({"approve": "ask"}, "approve must be one of never, auto"),
        ({"ray_cpus": 0}, "ray_cpus must be a positive number"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    from sp4rk.batch import BatchError

    tasks = write_batch(tmp_path, 1)
    with pytest.raises(BatchError, match=message):
        run_batch(tasks, tmp_path / "r.jsonl", store=tmp_path / "s.db", **options)  # type: ignore[arg-type]
    assert not (tmp_path / "r.jsonl").exists()


def test_a_model_that_cannot_be_built_stops_the_batch_before_any_run(tmp_path: Path) -> None:
    from sp4rk.batch import BatchError

    tasks = write_batch(tmp_path, 2)
    (tmp_path / "scripts" / "t1.json").unlink()
    with pytest.raises(BatchError, match=r"the model 'scripted:scripts/t1.json' of task 't1'"):
        run_batch(
            tasks, tmp_path / "r.jsonl", store=tmp_path / "s.db", model_factory=factory(tmp_path)
        )
    with SQLiteRunStore(tmp_path / "s.db") as store:
        assert store.list_runs() == []
