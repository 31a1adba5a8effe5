"""Checks for arguments a host passes: a list where a list belongs, a directory that exists."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def as_list(value: Iterable[T], name: str, what: str) -> list[T]:
    """``value`` as a list, refusing a single string or path where a list of them belongs.

    ``extra_roots="/data"`` would otherwise be read as the list ``["/", "d", "a", …]``.

    Raises:
        TypeError: for a ``str``, ``bytes`` or path, or anything that is not iterable.
    """
    if isinstance(value, str | bytes | os.PathLike):
        raise TypeError(
            f"{name} must be a list of {what}, not a single {type(value).__name__}; "
            f"pass [{value!r}]"
        )
    try:
        return list(value)
    except TypeError:
        raise TypeError(f"{name} must be a list of {what}, got {type(value).__name__}") from None


def existing_directory(value: Any, name: str) -> Path:
    """``value`` (a ``str`` or path) as a path that names an existing directory.

    Raises:
        TypeError: for anything but a ``str`` or path.
        ValueError: for a path with a NUL byte, or when nothing (or a file) is there.
    """
    if not isinstance(value, str | os.PathLike):
        raise TypeError(f"{name} must be a path (str or pathlib.Path), got {type(value).__name__}")
    path = Path(value)
    if "\x00" in str(path):
        raise ValueError(f"{name} {str(path)!r} contains a NUL byte")
    if not path.is_dir():
        state = "is not a directory" if path.exists() else "does not exist"
        raise ValueError(f"{name} {str(path)!r} {state}; create it first or pass another")
    return path
