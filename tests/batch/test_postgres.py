"""A batch whose runs store is PostgreSQL: here, and on Ray (the store a cluster shares).

Runs when a PostgreSQL server is available (``tests.postgres``); skips saying why otherwise.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sp4rk.batch import BatchControl, BatchListener, BatchResult, run_batch
from sp4rk.store import open_store
from tests.batch.helpers import expected_line, factory, result_lines, stable, write_batch
from tests.cli.helpers import SP4RK, command_env


def test_a_batch_on_a_postgres_store_pauses_resumes_and_completes(
    tmp_path: Path, postgres_url: str
) -> None:
    tasks = write_batch(tmp_path, 40, steps=3)
    out = tmp_path / "results.jsonl"
    control = BatchControl()

    class PauseAtTen(BatchListener):
        def task_ended(self, result: BatchResult) -> None:
            if len(result_lines(out)) >= 10:
                control.pause()

    first = run_batch(
        tasks,
        out,
        store=postgres_url,
        model_factory=factory(tmp_path),
        approve="auto",
        control=control,
        listener=PauseAtTen(),
    )
    assert not first.done
    second = run_batch(
        tasks, out, store=postgres_url, model_factory=factory(tmp_path), approve="auto"
    )
    assert second.done and second.skipped == first.completed
    lines = result_lines(out)
    assert stable(lines) == stable([expected_line(i, steps=3) for i in range(40)])
    with open_store(postgres_url) as store:
        assert len(store.list_runs()) == 40
        assert len(store.batch_tasks(str(out.resolve()))) == 40


@pytest.mark.timeout(300)
def test_a_batch_on_ray_shares_a_postgres_store(
    tmp_path: Path, postgres_url: str, ray_session: Any
) -> None:
    tasks = write_batch(tmp_path, 40)
    out = tmp_path / "results.jsonl"
    report = run_batch(
        tasks,
        out,
        store=postgres_url,
        model_factory=factory(tmp_path),
        approve="auto",
        concurrency=8,
        ray=True,
    )
    assert report.done and report.backend == "ray"
    assert stable(result_lines(out)) == stable([expected_line(i) for i in range(40)])
    with open_store(postgres_url) as store:
        runs = store.list_runs()
    assert len(runs) == 40 and {r.status for r in runs} == {"finished"}


def test_runs_and_show_read_a_postgres_store(tmp_path: Path, postgres_url: str) -> None:
    tasks = write_batch(tmp_path, 2)
    run_batch(
        tasks,
        tmp_path / "results.jsonl",
        store=postgres_url,
        model_factory=factory(tmp_path),
        approve="auto",
    )
    listed = subprocess.run(
        [*SP4RK, "runs", "--store", postgres_url, "--json"],
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    runs = json.loads(listed.stdout)
    assert len(runs) == 2 and {r["status"] for r in runs} == {"finished"}
    shown = subprocess.run(
        [*SP4RK, "show", runs[0]["id"], "--store", postgres_url],
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "write_file" in shown.stdout
