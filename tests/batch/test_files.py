"""The task file, the results file, workspaces and the report: each edge checked."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from sp4rk.batch import (
    BatchResult,
    BatchTask,
    ResultsFile,
    ResultsFileError,
    TaskFileError,
    parse_tasks,
)
from sp4rk.batch.report import Tally, concurrency
from sp4rk.batch.runner import TaskOutcome
from sp4rk.batch.workspace import WorkspaceError, pack, task_folder, unpack


def parse(tmp_path: Path, *lines: str) -> list[BatchTask]:
    return parse_tasks(list(lines), base=tmp_path, source="tasks.jsonl")


def test_a_task_line_maps_onto_a_task_with_its_workspace_resolved(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (task,) = parse(
        tmp_path,
        json.dumps(
            {
                "id": "fix-1",
                "task": "fix it",
                "workspace": "repo",
                "model": " openai:gpt-4.1 ",
                "max_steps": 5,
                "budget": {"max_tokens": 1000, "max_cost_usd": 0.5},
                "verify": "pytest -q",
            }
        ),
    )
    assert task.workspace == tmp_path / "repo" and task.model == "openai:gpt-4.1"
    budget = task.make_budget()
    assert (budget.max_total_tokens, budget.max_cost_usd) == (1000, 0.5)
    assert parse(tmp_path, json.dumps(task.to_line()))[0] == task


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"task": "x"}', 'every task needs an "id"'),
        ('{"id": 7, "task": "x"}', 'every task needs an "id"'),
        ('{"id": "a\\u0007", "task": "x"}', "the id holds control characters"),
        ('{"id": "a"}', 'every task needs a "task"'),
        ('{"id": "a", "task": "x", "priority": 1}', "unknown key 'priority'"),
        ('{"id": "a", "task": "x", "max_steps": 0}', "max_steps must be a whole number"),
        ('{"id": "a", "task": "x", "max_steps": true}', "max_steps must be a whole number"),
        ('{"id": "a", "task": "x", "budget": 3}', "budget must be an object"),
        ('{"id": "a", "task": "x", "budget": {"max_cost_usd": -1}}', "must be a positive"),
        ('{"id": "a", "task": "x", "budget": {"max_tool_calls": 1.5}}', "whole number"),
        (
            '{"id": "a", "task": "x", "budget": {"max_tokens": 1, "max_total_tokens": 2}}',
            "not both",
        ),
        ('{"id": "a", "task": "x", "verify": ["pytest"]}', "verify must be a shell command"),
        ('{"id": "a", "task": "x", "model": ""}', "model must be a model spec"),
        ('["a"]', "a task is a JSON object"),
        ('{"id": "a", "task": "x"', "not valid JSON"),
    ],
)
def test_a_bad_task_line_is_refused_with_its_number_and_the_fix(
    tmp_path: Path, line: str, problem: str
) -> None:
    with pytest.raises(TaskFileError) as caught:
        parse(tmp_path, '{"id": "ok", "task": "fine"}', "", line)
    (listed,) = str(caught.value).splitlines()[1:]
    assert listed.startswith("  line 3: ") and problem in listed


def test_problems_are_listed_together_and_counted_past_ten(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError) as caught:
        parse(tmp_path, *["{}"] * 13)
    text = str(caught.value)
    assert "line 10:" in text and "line 11:" not in text and "... and 3 more" in text


def test_an_empty_task_file_says_what_a_line_looks_like(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="holds no task"):
        parse(tmp_path, "", "  ")


def test_tasks_built_in_code_are_checked_too() -> None:
    with pytest.raises(ValueError, match='needs a "task"'):
        BatchTask(id="a", task=" ")
    with pytest.raises(ValueError, match="absolute"):
        BatchTask(id="a", task="x", workspace=Path("relative"))
    with pytest.raises(ValueError, match="unknown budget limit"):
        BatchTask(id="a", task="x", budget={"dollars": 1})


def result(task_id: str, **changes: object) -> BatchResult:
    fields: dict[str, object] = {
        "id": task_id,
        "run_id": "abcd1234",
        "exit_reason": "finished",
        "finished": True,
        "output": "ok",
        "steps": 2,
        "input_tokens": 10,
        "output_tokens": 1,
        "cost_usd": None,
        "seconds": 0.5,
    }
    fields.update(changes)
    return BatchResult(**fields)  # type: ignore[arg-type]


def test_the_results_file_drops_a_line_cut_by_a_crash_and_never_writes_twice(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsFile(path) as results:
        results.append(result("a"))
        results.append(result("a", output="again"))  # ignored: a has its line
    with path.open("a") as f:
        f.write('{"id": "b", "run_id": "x", "exit_re')  # the crash cut this one
    with ResultsFile(path) as results:
        assert list(results.done) == ["a"] and results.done["a"].output == "ok"
        results.append(result("b", error="boom", exit_reason="error", finished=False))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["id"] for x in lines] == ["a", "b"]
    assert "error" not in lines[0] and lines[1]["error"] == "boom"
    assert BatchResult.from_line(lines[1]).failed


def test_a_results_file_with_a_foreign_line_or_another_writer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}\n')
    with pytest.raises(ResultsFileError, match="line 1 is not a result line"):
        ResultsFile(path)
    other = tmp_path / "other.jsonl"
    with ResultsFile(other), pytest.raises(ResultsFileError, match="another process"):
        ResultsFile(other)


def test_task_folders_are_readable_and_never_collide(tmp_path: Path) -> None:
    a, b = task_folder(tmp_path, "x/../y z"), task_folder(tmp_path, "x/../y_z")
    assert a.parent == tmp_path and a != b and a.name.startswith("x-..-y-z-")
    assert task_folder(tmp_path, "...").name.startswith("task-")


def test_a_packed_workspace_unpacks_with_its_links_and_replaces_the_old_folder(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "a.py").write_text("A = 1\n")
    (source / "link").symlink_to("pkg/a.py")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "stale.txt").write_text("old")
    unpack(pack(source), dest)
    assert (dest / "pkg" / "a.py").read_text() == "A = 1\n"
    assert (dest / "link").is_symlink() and not (dest / "stale.txt").exists()
    unpack(None, dest)
    assert list(dest.iterdir()) == []


def test_an_archive_that_escapes_its_folder_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = b"owned"
        member = tarfile.TarInfo("../escaped.txt")
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    with pytest.raises(WorkspaceError, match="cannot unpack"):
        unpack(buffer.getvalue(), tmp_path / "dest")
    assert not (tmp_path / "escaped.txt").exists()


def test_concurrency_is_the_mean_and_the_peak_of_calls_in_flight() -> None:
    assert concurrency([], 10) == (0.0, 0)
    mean, peak = concurrency([(0, 4), (1, 3), (2, 6), (6, 8)], 8)
    assert (mean, peak) == (12 / 8, 3)  # (6, 8) starts as (2, 6) ends: never 4 at once


def test_the_report_counts_results_attempts_and_failures_by_kind() -> None:
    tally = Tally("local", tasks=5, skipped=1)
    tally.attempt(TaskOutcome(task_id="a", status="ended", steps=3, calls=[(0, 1)]))
    tally.result(result("a", cost_usd=0.25))
    tally.attempt(TaskOutcome(task_id="b", status="failed", failure="model error (X)"))
    tally.retries += 1
    tally.attempt(TaskOutcome(task_id="b", status="ended", steps=2, resumed=True))
    tally.result(result("b", exit_reason="step_limit", finished=False, cost_usd=0.5))
    tally.result(result("c", exit_reason="error", finished=False, error="boom", cost_usd=0.0))
    report = tally.report(2.0, cpu_seconds=0.01)
    assert (report.completed, report.finished, report.unfinished, report.failed) == (3, 1, 1, 1)
    assert (report.paused, report.resumed, report.steps, report.model_calls) == (1, 1, 5, 1)
    assert report.failures == {"model error (X)": 1, "step_limit": 1}
    assert report.cost_usd == 0.75 and report.cpu_per_step_ms == pytest.approx(2.0)
    assert report.tasks_per_second == 1.5 and not report.done
    text = report.describe()
    assert "1.5 tasks/s" in text and "failures by kind: model error (X) 1, step_limit 1" in text
    assert json.loads(json.dumps(report.to_dict()))["tasks_per_second"] == 1.5
