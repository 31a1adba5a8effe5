"""Dataclass <-> plain JSON types, driven by type hints (no pickle, no code execution)."""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any, Self, TypeVar, get_args, get_origin

from sp4rk._internal.text import valid_text

T = TypeVar("T")

#: Field metadata for derived state (an index, a cache) that is rebuilt, never serialised.
TRANSIENT: dict[str, Any] = {"transient": True}


class Serializable:
    """Mixin: ``to_dict``/``from_dict`` through plain JSON types, for slotted dataclasses."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """Return this object as plain JSON types."""
        result: dict[str, Any] = to_jsonable(self)
        return result

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Rebuild an object from the output of :meth:`to_dict`.

        Raises:
            TypeError: when a value has the wrong JSON type (``true`` is not a number).
            ValueError: when an enum value is unknown.
        """
        return from_jsonable(cls, data)


def to_jsonable(value: Any) -> Any:
    """Convert dataclasses, enums, lists and dicts into JSON-compatible values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in _fields(type(value))}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def from_jsonable(cls: type[T], data: Any) -> T:
    """Build a ``cls`` instance from the output of :func:`to_jsonable`.

    Unknown keys are ignored and missing keys take the field default.

    Raises:
        TypeError: when ``data`` is not a mapping or a value has the wrong shape.
    """
    return typing.cast(T, _convert(cls, data))


@functools.cache
def _fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    return tuple(f for f in dataclasses.fields(cls) if not f.metadata.get("transient"))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(tp: Any, data: Any) -> Any:
    if tp is Any:
        return data
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = get_args(tp)
        if data is None:
            if type(None) in options:
                return None
            raise TypeError(f"expected {tp}, got null")
        args = [a for a in options if a is not type(None)]
        return _convert(args[0], data) if len(args) == 1 else data
    if data is None:
        raise TypeError(f"expected {getattr(tp, '__name__', tp)}, got null")
    if origin is typing.Literal:
        if data not in get_args(tp) or isinstance(data, bool) != isinstance(get_args(tp)[0], bool):
            raise ValueError(f"expected one of {get_args(tp)}, got {data!r}")
        return data
    if origin is list:
        if not isinstance(data, list):
            raise TypeError(f"expected a list, got {type(data).__name__}")
        (item,) = get_args(tp) or (Any,)
        return [_convert(item, v) for v in data]
    if origin is dict:
        if not isinstance(data, dict):
            raise TypeError(f"expected an object, got {type(data).__name__}")
        return dict(data)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise TypeError(f"expected an object for {tp.__name__}, got {type(data).__name__}")
        hints = _hints(tp)
        kwargs = {
            f.name: _convert(hints[f.name], data[f.name])
            for f in _fields(tp)
            if f.init and f.name in data
        }
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if tp is str and isinstance(data, str):
        return valid_text(data)  # lone surrogates from JSON escapes are repaired on the way in
    if isinstance(data, bool) and tp is not bool and tp is not object:
        raise TypeError(f"expected {getattr(tp, '__name__', tp)}, got bool")
    if tp is float and isinstance(data, int):
        return float(data)
    if isinstance(tp, type) and data is not None and not isinstance(data, tp):
        raise TypeError(f"expected {tp.__name__}, got {type(data).__name__}")
    return data
