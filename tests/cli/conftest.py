"""Fixtures for driving the ``sp4rk`` command in this process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import Sp4rk


@pytest.fixture
def sp4rk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Sp4rk:
    return Sp4rk(tmp_path, capsys)
