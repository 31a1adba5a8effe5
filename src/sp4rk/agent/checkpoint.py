"""Checkpoints: a run's steps and state as versioned JSON, safe to load (no pickle, no code).

::

    save_checkpoint("run.json", result)              # the steps and the RunState
    checkpoint = load_checkpoint("run.json")         # a list of steps that carries .state
    executor = Executor(llm, registry, 50, resume_steps=checkpoint)
    window.seed_steps(checkpoint)

Schema 2 is ``{"schema_version": 2, "steps": [...], "state": {...}}``. Schema 1 files (steps
only, written before the run state was saved) still load; their ``state`` is ``None`` and the
executor rebuilds what it can from the steps (see ``sp4rk.agent._legacy``).

Loading treats the file as hostile: it must be a regular file of bounded size, valid UTF-8,
strict JSON of bounded depth, with exactly typed values. Every failure is a
:class:`CheckpointError`.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sp4rk._internal import safejson
from sp4rk.agent.state import RunState
from sp4rk.agent.types import ExecutorResult, Step

logger = logging.getLogger("sp4rk.agent")

#: Version written into every checkpoint; loading a newer one is refused.
CHECKPOINT_SCHEMA_VERSION = 2
#: Largest checkpoint file :func:`load_checkpoint` reads by default, in bytes (``max_bytes=``
#: reads larger ones).
MAX_CHECKPOINT_BYTES = 256 << 20
#: Deepest JSON nesting a checkpoint may have (a step is about five levels deep).
MAX_CHECKPOINT_DEPTH = 32


class CheckpointError(ValueError):
    """A checkpoint could not be read: malformed, hostile, or written by a newer sp4rk."""


class Checkpoint(list[Step]):
    """The steps of a checkpoint, carrying the run's ``state`` (``None`` for schema 1).

    It is a list of steps, so code written for a plain list keeps working (``seed_steps``,
    ``resume_steps=``), and ``Executor`` picks the state up from it.
    """

    def __init__(self, steps: Iterable[Step] = (), state: RunState | None = None) -> None:
        super().__init__(steps)
        self.state = state

    def __repr__(self) -> str:
        return f"Checkpoint({len(self)} steps, state={'yes' if self.state else 'no'})"


def checkpoint_to_dict(
    steps: Sequence[Step] | ExecutorResult, state: RunState | None = None
) -> dict[str, Any]:
    """The JSON document for ``steps`` and ``state`` (an ``ExecutorResult`` gives both)."""
    if isinstance(steps, ExecutorResult):
        state = state or steps.state
        trajectory: Sequence[Step] = steps.steps
    else:
        if state is None and isinstance(steps, Checkpoint):
            state = steps.state
        trajectory = steps
    return {
        "schema_version": CHECKPOINT_SCHEMA_VERSION,
        "steps": [s.to_dict() for s in trajectory],
        "state": None if state is None else state.to_dict(),
    }


def checkpoint_from_dict(data: Any) -> Checkpoint:
    """The steps and state of a checkpoint document (schema 1 or 2).

    Raises:
        CheckpointError: when the document is malformed or from a newer schema version.
    """
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise CheckpointError("not an sp4rk checkpoint: expected an object with a 'steps' list")
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise CheckpointError(f"checkpoint has no valid schema_version (got {version!r})")
    if version > CHECKPOINT_SCHEMA_VERSION:
        raise CheckpointError(
            f"checkpoint schema version {version} is newer than this sp4rk supports "
            f"({CHECKPOINT_SCHEMA_VERSION}); upgrade sp4rk to load it"
        )
    try:
        steps = [_step(s) for s in data["steps"]]
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"malformed step in checkpoint: {exc}") from exc
    raw_state = data.get("state") if version >= 2 else None
    if raw_state is None:
        return Checkpoint(steps)
    if not isinstance(raw_state, dict):
        raise CheckpointError("malformed checkpoint: 'state' must be an object")
    try:
        state = RunState.from_dict(raw_state)
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"malformed run state in checkpoint: {exc}") from exc
    return Checkpoint(steps, state)


def _step(data: Any) -> Step:
    if not isinstance(data, dict):
        raise TypeError(f"a step must be an object, got {type(data).__name__}")
    return Step.from_dict(data)


def save_checkpoint(
    path: str | os.PathLike[str],
    steps: Sequence[Step] | ExecutorResult,
    state: RunState | None = None,
) -> None:
    """Write a checkpoint to ``path`` atomically (a crash never leaves half a file).

    Pass the ``ExecutorResult`` (or the steps and ``result.state``) so that the resumed run
    continues with exactly the same budget, breaker counts and gate decisions.
    """
    target = Path(path)
    document = checkpoint_to_dict(steps, state)
    if document["state"] is None:
        logger.warning(
            "saving %s without the run's state: a resumed run rebuilds what it safely can "
            "from the steps; pass the ExecutorResult (save_checkpoint(path, result)) to keep "
            "the budget, breaker counts and gate decisions exactly",
            target,
        )
    text = json.dumps(document, ensure_ascii=False)
    data = text.encode("utf-8", "replace")  # a stray lone surrogate must not lose the file
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_CHECKPOINT_BYTES
) -> Checkpoint:
    """Read a checkpoint saved by :func:`save_checkpoint`: its steps, carrying ``.state``.

    Raises:
        CheckpointError: when the file is not a regular file, is larger than ``max_bytes``,
            or is not a valid checkpoint.
    """
    raw = _read_bounded(Path(path), max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"checkpoint {path} is not valid UTF-8: {exc}") from exc
    try:
        data = safejson.loads(text, max_depth=MAX_CHECKPOINT_DEPTH)
    except ValueError as exc:
        raise CheckpointError(f"checkpoint {path} is not valid JSON: {exc}") from exc
    return checkpoint_from_dict(data)


def _read_bounded(path: Path, max_bytes: int) -> bytes:
    """The file's bytes, refusing anything but a regular file of at most ``max_bytes``.

    Opened non-blocking, so a FIFO never blocks the open; checked on the open descriptor, so
    a swapped path cannot slip a device in between the check and the read.
    """
    try:
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except OSError as exc:
        raise CheckpointError(f"cannot open checkpoint {path}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CheckpointError(f"checkpoint {path} is not a regular file")
        if info.st_size > max_bytes:
            raise CheckpointError(
                f"checkpoint {path} is {info.st_size} bytes, more than the {max_bytes} allowed"
            )
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(1 << 20, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise CheckpointError(f"checkpoint {path} grew past {max_bytes} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
