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
