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
        (json.dumps({"path": "é" * 45}), "é" * 45),  # 90 bytes, but cut by characters
        (json.dumps({"path": ["a.py", "b.py"]}), "[a.py b.py]"),
        (json.dumps({"query": [1, [2, "x"]]}), "[1 [2 x]]"),
        (json.dumps({"file": {"b": 1, "a": True}}), "map[a:true b:1]"),
        (json.dumps({"path": 2.5}), "2.5"),
        (json.dumps({"path": 1_000_000}), "1e+06"),
        (json.dumps({"path": 123456}), "123456"),
        (json.dumps({"path": 0.00001}), "1e-05"),
        (json.dumps({"alpha": "é" * 40, "beta": "short"}), "short"),  # 80 bytes: too long
        (json.dumps({"alpha": "é" * 30}), "é" * 30),  # 60 bytes: fits
    ],
)
def test_input_hint(raw: str, hint: str) -> None:
    assert input_hint(raw) == hint
