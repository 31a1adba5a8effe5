"""Flat memory: committed steps' observations handed over to a store that can read them back.

With a :class:`~sp4rk.agent.StepArchive` attached (the runs store's ``StoreJournal``, or a
trajectory store that persists), each boundary archives the observations of the steps the
archive now holds, except the newest few, which the context window still reads as it prunes
and compacts. The step objects stay where they are (trajectory, window, result); only their
observation text leaves memory, read back from the store on demand. Without an archive nothing
changes: every observation stays in memory for the whole run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sp4rk._core.archive import StepArchive, archive_observation, observation_length
from sp4rk._core.trajectory import Step

logger = logging.getLogger("sp4rk.agent")

#: The newest committed steps whose observations stay in memory: the window masks results as
#: they leave its protected tail, and reading those from the store would cost a read a step.
KEEP_RECENT = 32
#: Observations shorter than this stay in memory: a reference to the store costs about as much.
MIN_ARCHIVED_CHARS = 256


class ObservationArchiver:
    """Archives committed observations after each boundary, oldest first, each once."""

    __slots__ = ("_archive", "_through")

    def __init__(self, archive: StepArchive | None) -> None:
        self._archive = archive
        self._through = 0  # steps before this index were looked at already

    def after_boundary(self, steps: Sequence[Step]) -> None:
        """The boundary committed ``steps`` (the whole trajectory): archive what is durable.

        Only an archive that holds exactly the trajectory (index for index) is used: one that
        holds fewer steps (a response left to crash recovery) or more (steps of another
        process) turns archiving off for the rest of the run, so nothing is ever read back
        from the wrong place and nothing not yet stored leaves memory.
        """
        archive = self._archive
        if archive is None:
            return
        stored = archive.stored_steps()
        if stored != len(steps):
            logger.debug(
                "the step archive holds %d steps, the trajectory %d; observations stay in memory",
                stored,
                len(steps),
            )
            self._archive = None
            return
        end = stored - KEEP_RECENT
        for index in range(self._through, end):
            step = steps[index]
            if observation_length(step) >= MIN_ARCHIVED_CHARS:
                archive_observation(step, archive, index)
        self._through = max(self._through, end)
