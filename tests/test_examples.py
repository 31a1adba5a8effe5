"""The examples run end to end (they are the README's promises)."""

from __future__ import annotations

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
