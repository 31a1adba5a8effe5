"""Crash safety of the real command: ``kill -9`` at hundreds of points, then resume.

See ``tests/cli/kill9_battery.py`` for the kill points and what is counted; the counts are
printed, and every one of them must be zero.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import command_env
from tests.cli.kill9_battery import report

BATTERY = Path(__file__).with_name("kill9_battery.py")


@pytest.mark.timeout(900)
def test_kill_9_at_hundreds_of_points_loses_nothing_and_repeats_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = subprocess.run(
        [sys.executable, str(BATTERY), "--json", "--random-kills", "20"],
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=880,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    counts = json.loads(out.stdout)
    line = report(counts)
    with capsys.disabled():
        print(f"\n{line}")
    assert counts["kill_points"] >= 200, line
    assert (counts["lost"], counts["twice"], counts["invalid"]) == (0, 0, 0), line
    assert (counts["unaccounted"], counts["unfinished"]) == (0, 0), line
