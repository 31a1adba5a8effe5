"""Several ``sp4rk`` processes on one store: runs side by side, and one driver per run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.cli.helpers import SP4RK, call, command_env, done, reply, write_script


def start(
    tmp: Path, name: str, store: Path, replies: list[dict[str, object]]
) -> subprocess.Popen[str]:
    workspace = tmp / name
    workspace.mkdir()
    script = write_script(tmp / f"{name}.json", replies)
    return subprocess.Popen(
        [
            *SP4RK,
            "run",
            f"task {name}",
            "-w",
            str(workspace),
            "--model",
            f"scripted:{script}",
            "--store",
            str(store),
            "--approve",
            "auto",
            "--json",
        ],
        env=command_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def test_two_processes_run_side_by_side_on_one_store(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    replies = [
        reply(call("bash_exec", command=f"echo {i} >> log && echo ok {i}")) for i in range(6)
    ] + done()
    procs = [start(tmp_path, name, store, replies) for name in ("a", "b", "c")]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    listed = subprocess.run(
        [*SP4RK, "runs", "--json", "--store", str(store)],
        env=command_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    runs = json.loads(listed.stdout)
    assert sorted(r["task"] for r in runs) == ["task a", "task b", "task c"]
    assert {r["status"] for r in runs} == {"finished"}
    assert {r["step_count"] for r in runs} == {8}


def test_a_run_driven_by_a_live_process_cannot_be_resumed_elsewhere(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    gate = tmp_path / "gate.fifo"
    os.mkfifo(gate)
    proc = start(tmp_path, "a", store, [reply(call("bash_exec", command=f"cat {gate}")), *done()])
    assert proc.stdout is not None
    for line in proc.stdout:  # wait until the blocking call runs
        if json.loads(line)["event"] == "tool_call":
            break
    other = subprocess.run(
        [*SP4RK, "resume", "last", "--store", str(store)],
        env=command_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    with gate.open("w") as f:
        f.write("go\n")
    proc.communicate(timeout=120)
    assert other.returncode == 1
    assert "is being driven by process" in other.stderr
    assert proc.returncode == 0
