"""Bounded JSON parsing: every hostile input is a ValueError, never a crash."""

from __future__ import annotations

import pytest

from sp4rk._internal.safejson import JSONLimitError, loads, nesting_depth


def test_valid_json_parses_and_brackets_in_strings_do_not_count() -> None:
    text = '{"a": [1, 2.5, {"b": "x]]]\\"[[["}], "c": null, "d": true}'
    assert loads(text) == {"a": [1, 2.5, {"b": 'x]]]"[[['}], "c": None, "d": True}
    assert nesting_depth(text) == 3
    assert loads(b'["\xc3\xa9"]') == ["é"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested 100000 levels"),
        ("1" * 5000, "5000 digits"),
        ('{"a": 1, "a": 2}', "repeats the key 'a'"),
        ("NaN", "NaN is not valid JSON"),
        ('{"x": -Infinity}', "-Infinity is not valid JSON"),
        ("[1e999]", "out of range"),
        (b"\xff\xfe", "not valid UTF-8"),
    ],
)
def test_limits_raise_a_readable_value_error(text: str | bytes, message: str) -> None:
    with pytest.raises(JSONLimitError, match=message):
        loads(text)


def test_limits_are_adjustable() -> None:
    assert loads("[[[1]]]", max_depth=3) == [[[1]]]
    with pytest.raises(JSONLimitError):
        loads("[[[1]]]", max_depth=2)
    assert loads('{"a": 1, "a": 2}', allow_duplicate_keys=True) == {"a": 2}


def test_broken_json_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="Expecting"):
        loads('{"a": ')
    with pytest.raises(ValueError, match="Unterminated"):
        loads('["abc')
