"""The examples run end to end (they are the README's promises)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_the_demo_fixes_the_bug_and_finishes() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "01_coding_agent.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "paused after" in out.stdout and "resumed with a fresh executor" in out.stdout
    assert "Verification passed (exit 0)" in out.stdout
    assert "finished=True exit=finished" in out.stdout
    assert "return a + b" in out.stdout


def test_the_command_demo_fixes_the_bug_and_shows_the_run(tmp_path: Path) -> None:
    """``make demo``: the real command on the example workspace, then ``sp4rk show``."""
    src = EXAMPLES.parent / "src"
    env = {
        **os.environ,
        "SP4RK": f"{sys.executable} -m sp4rk",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH")) if p),
    }
    out = subprocess.run(
        ["sh", str(EXAMPLES / "cli-demo" / "run.sh"), str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "finished (finished)" in out.stderr
    assert "Verification passed (exit 0)" in out.stdout  # in the trajectory sp4rk show prints
    assert "output: Fixed calc.add" in out.stdout
    assert "return a + b" in (tmp_path / "demo" / "workspace" / "calc.py").read_text()
    assert "return a - b" in (EXAMPLES / "cli-demo" / "workspace" / "calc.py").read_text()


def test_the_tracing_example_shows_why_the_run_stopped() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "02_trace_a_breaker.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("finished=False exit=repeat_abort")
    assert "invoke_agent fixer  [ERROR: stopped: repeat_abort]" in lines
    assert (
        "  * sp4rk.repeated_tool_call_abort: sp4rk.step=6, tool='search', repeat_count=4," in lines
    )
    assert out.stdout.count("  execute_tool search  [ERROR: repeated_call]") == 2
    assert "    * sp4rk.approval: sp4rk.approval.decision='approved'," in lines
