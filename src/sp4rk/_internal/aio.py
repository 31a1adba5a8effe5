"""Asyncio helpers: awaiting maybe-async callables and the guarded sync entry point."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def maybe_await(value: T | Awaitable[T]) -> T:
    """Return ``value``, awaiting it first when it is awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value


async def call_host(fn: Callable[[Any], T | Awaitable[T]], arg: Any, timeout: float) -> T:
    """Call a host callback; an async one is given ``timeout`` seconds.

    Raises:
        TimeoutError: when an async callback takes longer than ``timeout``.
    """
    value = fn(arg)
    if inspect.isawaitable(value):
        return await asyncio.wait_for(value, timeout)
    return value


def run_sync(coro_factory: Callable[[], Coroutine[Any, Any, T]], what: str) -> T:
    """Run a coroutine to completion from synchronous code.

    Raises:
        RuntimeError: when called from inside a running event loop, where blocking would
            deadlock; the message says which coroutine to await instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_factory())
    raise RuntimeError(
        f"{what}_sync() cannot be called from a running event loop (for example inside "
        f"Jupyter or an async function); use `await {what}(...)` instead."
    )
