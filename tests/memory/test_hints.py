from __future__ import annotations

import json

import pytest

from sp4rk.memory.hints import input_hint


@pytest.mark.parametrize(
    ("raw", "hint"),
    [
        ("not json", ""),
        ("[1, 2]", ""),
        (json.dumps({"command": "ls", "path": "a.py"}), "a.py"),  # path outranks command
        (json.dumps({"pattern": "TODO", "query": "x"}), "TODO"),
        (json.dumps({"url": "https://example.com"}), "https://example.com"),
        (json.dumps({"path": 42}), "42"),
        (json.dumps({"zeta": "z", "alpha": "a"}), "a"),  # fallback: sorted keys
        (json.dumps({"alpha": "x" * 61, "beta": "short"}), "short"),
        (json.dumps({"n": 3}), ""),
        (json.dumps({"path": "é" * 70}), "é" * 59 + "…"),
    ],
)
def test_input_hint(raw: str, hint: str) -> None:
    assert input_hint(raw) == hint
