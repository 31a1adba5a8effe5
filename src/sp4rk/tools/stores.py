"""Stores a run shares with its tools, as protocols with simple in-memory implementations.

Hosts that need persistence implement the protocol (a database, a file) and put their object
on the :class:`~sp4rk.tools.RunContext`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from sp4rk._internal.serde import Serializable as _Serializable


@dataclass(slots=True)
class Fact(_Serializable):
    """A finding the model chose to keep, findable again by its keywords."""

    keywords: list[str]
    content: str
    author: str = ""


@runtime_checkable
class FactStore(Protocol):
    """Holds facts saved with ``store_fact`` so they survive context compaction."""

    def add(self, fact: Fact) -> None:
        """Save ``fact``."""
        ...

    def search(self, keywords: Sequence[str], limit: int = 10) -> list[Fact]:
        """Facts sharing at least one keyword, best matches first."""
        ...


class InMemoryFactStore:
    """A thread-safe :class:`FactStore` held in memory."""

    def __init__(self) -> None:
        self._facts: list[Fact] = []
        self._lock = threading.Lock()

    def add(self, fact: Fact) -> None:
        """Save ``fact``."""
        with self._lock:
            self._facts.append(fact)

    def search(self, keywords: Sequence[str], limit: int = 10) -> list[Fact]:
        """Facts sharing at least one keyword (case-insensitive), most shared keywords first."""
        wanted = {k.strip().lower() for k in keywords if k.strip()}
        with self._lock:
            scored = [
                (len(wanted & {k.lower() for k in f.keywords}), -i, f)
                for i, f in enumerate(self._facts)
            ]
        hits = sorted((s for s in scored if s[0] > 0), key=lambda s: (s[0], s[1]), reverse=True)
        return [f for _, _, f in hits[:limit]]

    def all(self) -> list[Fact]:
        """Every fact, oldest first."""
        with self._lock:
            return list(self._facts)


@runtime_checkable
class StepOutputStore(Protocol):
    """Outputs of earlier plan steps, by step ID, for later steps to read."""

    def put(self, step_id: str, output: str) -> None:
        """Record the output of ``step_id``."""
        ...

    def get(self, step_id: str) -> str | None:
        """The output of ``step_id``, or ``None``."""
        ...

    def step_ids(self) -> list[str]:
        """IDs with a recorded output, in recording order."""
        ...


class InMemoryStepOutputStore:
    """A thread-safe :class:`StepOutputStore` held in memory."""

    def __init__(self) -> None:
        self._outputs: dict[str, str] = {}
        self._lock = threading.Lock()

    def put(self, step_id: str, output: str) -> None:
        """Record the output of ``step_id`` (replacing an earlier one)."""
        with self._lock:
            self._outputs.pop(step_id, None)
            self._outputs[step_id] = output

    def get(self, step_id: str) -> str | None:
        """The output of ``step_id``, or ``None``."""
        with self._lock:
            return self._outputs.get(step_id)

    def step_ids(self) -> list[str]:
        """IDs with a recorded output, in recording order."""
        with self._lock:
            return list(self._outputs)


@runtime_checkable
class AttachmentStore(Protocol):
    """Read-only access to files the user attached, already converted to text."""

    def names(self) -> list[str]:
        """Attachment names."""
        ...

    def read(self, name: str) -> str | None:
        """The text of attachment ``name``, or ``None``."""
        ...


@dataclass(slots=True)
class InMemoryAttachmentStore:
    """An :class:`AttachmentStore` over a fixed mapping of name to text."""

    attachments: Mapping[str, str] = field(default_factory=dict)

    def names(self) -> list[str]:
        """Attachment names, sorted."""
        return sorted(self.attachments)

    def read(self, name: str) -> str | None:
        """The text of attachment ``name``, or ``None``."""
        return self.attachments.get(name)


@runtime_checkable
class FinalResultStore(Protocol):
    """Where an orchestrated run leaves its final answer."""

    def set(self, result: str) -> None:
        """Record the final result."""
        ...

    def get(self) -> str:
        """The final result, or ``""``."""
        ...


class InMemoryFinalResultStore:
    """A thread-safe :class:`FinalResultStore` held in memory."""

    def __init__(self) -> None:
        self._result = ""
        self._lock = threading.Lock()

    def set(self, result: str) -> None:
        """Record the final result."""
        with self._lock:
            self._result = result

    def get(self) -> str:
        """The final result, or ``""``."""
        with self._lock:
            return self._result
