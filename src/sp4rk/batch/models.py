"""The models a batch's runs call: built from a spec by a factory, once per spec and process.

A factory turns a task's model spec (``openai:gpt-4.1``) into a :class:`BatchModel`. The
library's default routes provider specs through :class:`sp4rk.llm.Router`; the ``sp4rk batch``
command passes one that also knows ``scripted:FILE.json`` and ``local`` models. For Ray the
factory is sent to the workers, so it must be picklable: a module-level function, or a
``functools.partial`` of one.

Runs of one process share each model (one HTTP client for a hundred concurrent runs, one
copy of a local model's weights); :class:`MeteredCaller` gives each run its own view of the
calls, for the throughput report.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sp4rk.agent import LLMCaller
from sp4rk.llm import ChatRequest, ChatResponse, LLMError, Router
from sp4rk.llm.pricing import PriceTable

_log = logging.getLogger("sp4rk.batch")

#: The context window assumed for a model unless its factory says otherwise.
DEFAULT_CONTEXT = 128_000


@dataclass(slots=True)
class BatchModel:
    """A model ready for the runs of a batch."""

    caller: LLMCaller
    spec: str
    """The spec as stored with each run."""
    context_tokens: int = DEFAULT_CONTEXT
    prices: PriceTable | None = None
    """Prices for costs and money budgets (``None``: ``sp4rk.llm.pricing``'s table)."""


ModelFactory = Callable[[str], BatchModel]
"""Builds the model a spec names; raises ``ValueError`` or ``LLMError`` saying what is wrong."""


def default_model_factory(spec: str) -> BatchModel:
    """A provider model through :class:`~sp4rk.llm.Router` (``openai:gpt-4.1``, …).

    Raises:
        LLMError: the spec names no provider, or its key or extra is missing.
    """
    router = Router(spec)
    router.route("")  # build the provider now, so that a missing key fails before the batch
    return BatchModel(router, spec)


class ModelCache:
    """Each spec's model, built once per process by ``factory``."""

    def __init__(self, factory: ModelFactory) -> None:
        self.factory = factory
        self._models: dict[str, BatchModel] = {}

    def get(self, spec: str) -> BatchModel:
        """The model for ``spec`` (built on first use).

        Raises:
            ValueError, LLMError: the factory's, for a spec it cannot build.
        """
        model = self._models.get(spec)
        if model is None:
            model = self.factory(spec)
            self._models[spec] = model
        return model

    async def aclose(self) -> None:
        """Close every model that can be closed (HTTP clients)."""
        for model in self._models.values():
            close = getattr(model.caller, "aclose", None)
            if close is None:
                continue
            try:
                await close()
            except Exception:  # closing must never hide the batch's outcome
                _log.debug("closing the model %s failed", model.spec, exc_info=True)
        self._models.clear()


@dataclass(slots=True)
class CallLog:
    """Model calls of one run: when each ran (wall clock), for the concurrency achieved."""

    intervals: list[tuple[float, float]] = field(default_factory=list)


class MeteredCaller:
    """Passes calls to ``inner`` and logs when each ran.

    Only ``call`` is offered: a batch shows no streamed text, and streaming costs per chunk.
    """

    def __init__(self, inner: LLMCaller, log: CallLog) -> None:
        self.inner = inner
        self.log = log
        self.model = str(getattr(inner, "model", ""))
        """The model name, for pricing the first call (as providers and routers have)."""

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Call the model and log the interval (also when the call fails)."""
        start = time.time()
        try:
            return await self.inner.call(request)
        finally:
            self.log.intervals.append((start, time.time()))


def failure_kind(exc: BaseException) -> str:
    """A short name for what made a run fail, for the report's failures by kind."""
    if isinstance(exc, LLMError):
        return f"model error ({type(exc).__name__})"
    if isinstance(exc, asyncio.TimeoutError):
        return "timeout"
    return type(exc).__name__
