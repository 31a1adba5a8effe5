"""The ``sp4rk batch`` command: output, exit statuses, Ctrl-C, and ``kill -9`` of the process."""

from __future__ import annotations

import io
import json
import signal
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

import sp4rk.cli.batch as batch_module
from sp4rk.batch import BatchResult
from sp4rk.batch.on_ray import RayMissingError
from sp4rk.cli import main
from sp4rk.cli.batch import RichProgress
from sp4rk.store import SQLiteRunStore
from tests.batch.helpers import (
    expected_line,
    kill_leftovers,
    result_lines,
    stable,
    wait_for_file,
    write_batch,
)
from tests.cli.helpers import SP4RK, command_env


def batch_command(tasks: Path, root: Path, *extra: str) -> list[str]:
    return [
        *SP4RK,
        "batch",
        str(tasks),
        "--out",
        str(root / "results.jsonl"),
        "--store",
        str(root / "runs.db"),
        "--approve",
        "auto",
        *extra,
    ]


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, env=command_env(), capture_output=True, text=True, timeout=120, check=False
    )


def test_the_command_prints_progress_lines_and_the_report_then_skips_done_tasks(
    tmp_path: Path,
) -> None:
    tasks = write_batch(tmp_path, 5)
    first = run(batch_command(tasks, tmp_path, "-c", "2"))
    assert first.returncode == 0, first.stderr
    assert "batch: 5 tasks · 0 done before · 5 to run (local)" in first.stderr
    assert "[5/5] " in first.stderr and "finished · 2 steps" in first.stderr
    assert "batch (local): 5 done now, 0 done before, 0 left, of 5 tasks" in first.stdout
    for phrase in ("tasks/s", "model-call concurrency", "executor CPU per step"):
        assert phrase in first.stdout
    assert stable(result_lines(tmp_path / "results.jsonl")) == stable(
        [expected_line(i) for i in range(5)]
    )

    again = run(batch_command(tasks, tmp_path, "--json"))
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["skipped"], report["completed"], report["backend"]) == (5, 0, "local")
    assert again.stderr == ""  # --json: no progress lines


def test_a_bad_task_file_is_a_usage_error_naming_each_line(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"id": "a", "task": "x"}\n'
        "not json\n"
        '{"id": "a", "task": "y"}\n'
        '{"id": "b", "task": "z", "workspace": "missing"}\n'
        '{"id": "c", "task": "z", "budget": {"max_dollars": 1}}\n'
    )
    out = run(batch_command(tasks, tmp_path))
    assert out.returncode == 2
    for text in (
        "line 2: not valid JSON",
        "line 3: id 'a' is used by line 1 too",
        "line 4: the workspace",
        "line 5: unknown budget limit 'max_dollars'",
    ):
        assert text in out.stderr
    assert not (tmp_path / "results.jsonl").exists()


def test_a_model_that_cannot_be_built_is_a_usage_error(tmp_path: Path) -> None:
    tasks = write_batch(tmp_path, 2)
    (tmp_path / "scripts" / "t0.json").write_text("[]")
    out = run(batch_command(tasks, tmp_path))
    assert out.returncode == 2
    assert "the model 'scripted:scripts/t0.json' of task 't0'" in out.stderr
    assert "non-empty JSON list of replies" in out.stderr


def test_ctrl_c_pauses_every_run_and_the_same_command_resumes(tmp_path: Path) -> None:
    tasks = write_batch(tmp_path, 30, slow={3: "echo ran >> marker.txt && sleep 2"})
    command = batch_command(tasks, tmp_path, "-c", "3")
    log = (tmp_path / "log").open("w")
    process = subprocess.Popen(command, env=command_env(), stdout=log, stderr=log)
    wait_for_file(tmp_path, "results.batch/workspaces/t3-*/marker.txt")
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == 3
    log.close()
    text = (tmp_path / "log").read_text()
    assert "pausing: each run stops at its next step" in text
    assert "run the same command again to resume the" in text
    with SQLiteRunStore(tmp_path / "runs.db") as store:
        statuses = {r.status for r in store.list_runs()}
    assert "running" not in statuses and "paused" in statuses

    again = run([*command, "--json"])
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["resumed"] >= 1
    lines = result_lines(tmp_path / "results.jsonl")
    assert len(lines) == 30 and len({line["id"] for line in lines}) == 30
    assert (wait_for_file(tmp_path, "results.batch/workspaces/t3-*/marker.txt")).read_text() == (
        "ran\n"
    )


@pytest.mark.timeout(300)
def test_kill_9_of_the_batch_process_loses_and_repeats_nothing(tmp_path: Path) -> None:
    tasks = write_batch(tmp_path, 40, slow={7: "echo ran >> marker.txt && sleep 20"})
    command = batch_command(tasks, tmp_path, "-c", "4")
    log = (tmp_path / "log").open("w")
    process = subprocess.Popen(command, env=command_env(), stdout=log, stderr=log)
    marker = wait_for_file(tmp_path, "results.batch/workspaces/t7-*/marker.txt")
    process.kill()
    process.wait(timeout=30)
    log.close()
    kill_leftovers(marker.parent)
    before = result_lines(tmp_path / "results.jsonl")
    assert len(before) < 40

    again = run([*command, "--json"])
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["skipped"] == len(before) and report["resumed"] >= 1
    lines = result_lines(tmp_path / "results.jsonl")
    assert len(lines) == 40 and len({line["id"] for line in lines}) == 40
    by_id = {line["id"]: line for line in lines}
    assert by_id["t7"]["finished"] and by_id["t7"]["steps"] == 3
    assert marker.read_text() == "ran\n"  # the cut call was answered, never run again
    # Lines written before the kill are exact. A run the kill cut mid-model-call makes that
    # call again on resume (its tokens and responses count twice): what it did and answered
    # is the same.
    expected = {f"t{i}": expected_line(i) for i in range(40) if i != 7}
    written_before = {line["id"] for line in before}
    outcome = ("id", "exit_reason", "finished", "output")
    for line in lines:
        if line["id"] == "t7":
            continue
        want = expected[line["id"]]
        if line["id"] in written_before:
            assert stable([line]) == stable([want])
        else:
            assert {k: line[k] for k in outcome} == {k: want[k] for k in outcome}
            assert line["steps"] >= want["steps"] and line["input_tokens"] >= want["input_tokens"]
    with SQLiteRunStore(tmp_path / "runs.db") as store:
        runs = store.list_runs()
        assert len(runs) == 40 and {r.status for r in runs} == {"finished"}
        assert "outcome" in store.steps(by_id["t7"]["run_id"])[0].observation.lower()


def test_on_a_terminal_a_live_bar_shows_done_running_failed_tokens_and_cost() -> None:
    screen = io.StringIO()
    bar = RichProgress(Console(file=screen, force_terminal=True, width=120))
    bar.batch_started(backend="local", tasks=3, skipped=1, to_run=2)
    bar.task_started("a")
    bar.task_started("b")
    common = {"run_id": "r", "steps": 2, "input_tokens": 1500, "output_tokens": 20}
    bar.task_ended(
        BatchResult(id="a", exit_reason="finished", finished=True, output="ok", cost_usd=0.01,
                    seconds=1.0, **common)  # type: ignore[arg-type]
    )  # fmt: skip
    bar.task_ended(
        BatchResult(id="b", exit_reason="error", finished=False, output="", cost_usd=0.02,
                    seconds=1.0, error="rate limited", **common)  # type: ignore[arg-type]
    )  # fmt: skip
    bar.batch_ended(None)  # type: ignore[arg-type]
    shown = screen.getvalue()
    assert "✗ b: rate limited" in shown
    assert "3/3" in shown and "running 0 · failed 1 · 3.0k tokens · $0.0300" in shown


@pytest.mark.parametrize(
    ("flags", "ray"),
    [((), False), (("--ray",), True), (("--ray=ray://head:10001",), "ray://head:10001")],
)
def test_ray_takes_an_optional_address_and_a_missing_ray_says_how_to_install_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: tuple[str, ...],
    ray: object,
) -> None:
    asked: list[object] = []

    def no_ray(*args: object, **options: object) -> None:
        asked.append(options["ray"])
        raise RayMissingError("--ray needs Ray: pip install 'sp4rk[ray]'")

    monkeypatch.setattr(batch_module, "run_batch", no_ray)
    tasks = write_batch(tmp_path, 1)
    command = batch_command(tasks, tmp_path, *flags)[len(SP4RK) :]
    assert main(command) == 2
    assert asked == [ray]
    assert "sp4rk: error: --ray needs Ray: pip install 'sp4rk[ray]'" in capsys.readouterr().err
