"""Observations kept on disk: a step whose observation lives in a durable store, read on demand.

A long run with large tool results would otherwise hold every observation in memory (the
trajectory, the window's steps and the result all share the step objects). Once a step is
committed to a store that can read it back (a :class:`StepArchive`), the executor hands the
observation text over to the store: :func:`archive_observation` turns the step, in place, into
an archived step whose ``observation`` is read from the store each time it is read. Everything
else about the step stays in memory, and every reader — the renderers, a summariser,
checkpoints, ``ExecutorResult.steps`` — still reads ``step.observation`` as the text the tool
returned.

The change is made in place (the object's class becomes a subclass of ``Step`` with the same
layout) so that every holder of the step sees it at once, without the executor knowing who they
are. A copy or a pickle of an archived step is a plain ``Step`` carrying the text.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any, Protocol, runtime_checkable

from sp4rk._core.trajectory import Step

#: The slot that holds a plain step's observation; an archived step keeps its reference there.
_OBSERVATION: Any = Step.__dict__["observation"]


class StepArchiveError(RuntimeError):
    """A step's archived observation cannot be read back (the store lost or changed it)."""


@runtime_checkable
class StepArchive(Protocol):
    """A durable copy of one run's steps, read by index (the runs store's ``StoreJournal``).

    A journal or a trajectory store that implements it lets the executor drop committed
    observations from memory: they are read back from here when someone reads them.
    """

    def stored_steps(self) -> int:
        """How many of the run's steps, from index 0, are durably stored and readable."""
        ...

    def read_steps(self, start: int, stop: int) -> list[Step]:
        """Steps ``[start, stop)`` as stored.

        Raises:
            Exception: when one of them is missing or unreadable (never an empty stand-in).
        """
        ...


class _Stored:
    """Where an archived observation is, and what it was: its length and CRC-32 when archived.

    The check catches a store changed under the run (a row rewritten, another run's steps at
    these indexes): the text read back is the text archived, or an error.
    """

    __slots__ = ("archive", "crc", "index", "length")

    def __init__(self, archive: StepArchive, index: int, length: int, crc: int) -> None:
        self.archive = archive
        self.index = index
        self.length = length
        self.crc = crc

    def load(self) -> str:
        """The stored observation, checked to be the one archived."""
        try:
            found = self.archive.read_steps(self.index, self.index + 1)
        except Exception as exc:
            raise StepArchiveError(
                f"step {self.index}'s observation is kept in the runs store, which cannot be "
                f"read ({exc}); read the steps (or copy.deepcopy(result.steps)) before closing "
                "the store, or resume from the store itself (store.recover(run_id))"
            ) from exc
        stored = found[0] if len(found) == 1 else None
        if stored is None or not isinstance(stored.observation, str):
            raise StepArchiveError(
                f"step {self.index} of the run is not in its store any more; its observation "
                "cannot be read (was the run deleted from the store?)"
            )
        text = stored.observation
        if len(text) != self.length or _crc(text) != self.crc:
            raise StepArchiveError(
                f"the store holds another observation for step {self.index} than the run "
                "archived there; the store was changed under the run, so it cannot be read"
            )
        return text


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


class _ArchivedStep(Step):
    """A ``Step`` whose observation is read from its archive (same slots as ``Step``)."""

    __slots__ = ()

    @property
    def observation(self) -> str:
        held = _OBSERVATION.__get__(self, Step)
        return held.load() if isinstance(held, _Stored) else str(held)

    @observation.setter
    def observation(self, text: str) -> None:
        _OBSERVATION.__set__(self, text)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Step):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in _FIELDS)

    __hash__ = None  # type: ignore[assignment]  # as Step's: mutable, compared by value

    def __repr__(self) -> str:
        """As ``Step``'s, without reading the store (logging and debuggers call it anywhere)."""
        held = _OBSERVATION.__get__(self, Step)
        shown = (
            f"<in the store: step {held.index}, {held.length} chars>"
            if isinstance(held, _Stored)
            else repr(held)
        )
        parts = (
            f"{f.name}={shown if f.name == 'observation' else repr(getattr(self, f.name))}"
            for f in _FIELDS
        )
        return f"Step({', '.join(parts)})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles are plain steps carrying the text (no store connection)."""
        return (Step, tuple(getattr(self, f.name) for f in _FIELDS))


_FIELDS = dataclasses.fields(Step)


def archive_observation(step: Step, archive: StepArchive, index: int) -> None:
    """Let ``step`` (index ``index`` of ``archive``) read its observation from the archive.

    The caller makes sure the step is durably in the archive at that index.
    """
    if type(step) is Step:
        step.__class__ = _ArchivedStep
    elif not isinstance(step, _ArchivedStep):
        return  # a subclass of the caller's own: its observation stays where it is
    held = _OBSERVATION.__get__(step, Step)
    if isinstance(held, _Stored):  # archived before (a resumed run): point it at ``archive``
        stored = _Stored(archive, index, held.length, held.crc)
    else:
        text = str(held)
        stored = _Stored(archive, index, len(text), _crc(text))
    _OBSERVATION.__set__(step, stored)


def observation_length(step: Step) -> int:
    """``len(step.observation)``, without reading the store for an archived step."""
    held = _OBSERVATION.__get__(step, Step)
    return held.length if isinstance(held, _Stored) else len(step.observation)


def is_archived(step: Step) -> bool:
    """Whether ``step``'s observation is held by a store rather than in memory."""
    return isinstance(step, _ArchivedStep) and isinstance(_OBSERVATION.__get__(step, Step), _Stored)
