"""Protocol checks that give the same answer on every Python version.

``isinstance(obj, SomeProtocol)`` on a ``runtime_checkable`` protocol looked members up with
``hasattr`` up to Python 3.11; from 3.12 it looks them up statically
(``inspect.getattr_static``), so a member an object provides through ``__getattr__`` (a proxy,
a decorator forwarding to the caller it wraps) no longer counts. A capability decided that way
silently changes with the interpreter. :func:`conforms` keeps the dynamic lookup everywhere.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Generic, Protocol, TypeGuard, TypeVar

T = TypeVar("T")


def conforms(obj: object, protocol: Callable[..., T]) -> TypeGuard[T]:
    """Whether ``obj`` has every member of ``protocol``, looked up with ``getattr``.

    A method member must be callable; any other member must only exist. ``protocol`` is a
    protocol class (typed as a callable because mypy rejects a protocol where ``type[T]`` is
    expected).
    """
    if not isinstance(protocol, type):
        raise TypeError(f"conforms() needs a protocol class, got {protocol!r}")
    for name, is_method in _members(protocol):
        try:
            value = getattr(obj, name)
        except AttributeError:
            return False
        if is_method and not callable(value):
            return False
    return True


@functools.cache
def _members(protocol: type) -> tuple[tuple[str, bool], ...]:
    """``(name, is_method)`` for each public member ``protocol`` and its bases declare."""
    members: dict[str, bool] = {}
    for cls in reversed(protocol.__mro__):
        if cls in (object, Protocol, Generic):
            continue
        for name in inspect.get_annotations(cls):
            members.setdefault(name, False)
        for name, value in vars(cls).items():
            if not name.startswith("_"):
                members[name] = inspect.isfunction(value)
    return tuple(members.items())
