"""Checkpoints: a run's steps as versioned JSON, safe to load (no pickle, no code).

::

    save_checkpoint("run.json", result.steps)
    steps = load_checkpoint("run.json")
    executor = Executor(llm, registry, 50, resume_steps=steps)
    window.seed_steps(steps)
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sp4rk.agent.types import Step

#: Version written into every checkpoint; loading a newer one is refused.
CHECKPOINT_SCHEMA_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint could not be read: malformed, or written by a newer sp4rk."""


def checkpoint_to_dict(steps: Sequence[Step]) -> dict[str, Any]:
    """The JSON document for ``steps``."""
    return {"schema_version": CHECKPOINT_SCHEMA_VERSION, "steps": [s.to_dict() for s in steps]}


def checkpoint_from_dict(data: Any) -> list[Step]:
    """The steps of a checkpoint document.

    Raises:
        CheckpointError: when the document is malformed or from a newer schema version.
    """
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise CheckpointError("not an sp4rk checkpoint: expected an object with a 'steps' list")
    version = data.get("schema_version")
    if not isinstance(version, int) or version < 1:
        raise CheckpointError(f"checkpoint has no valid schema_version (got {version!r})")
    if version > CHECKPOINT_SCHEMA_VERSION:
        raise CheckpointError(
            f"checkpoint schema version {version} is newer than this sp4rk supports "
            f"({CHECKPOINT_SCHEMA_VERSION}); upgrade sp4rk to load it"
        )
    try:
        return [Step.from_dict(s) for s in data["steps"]]
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"malformed step in checkpoint: {exc}") from exc


def save_checkpoint(path: str | os.PathLike[str], steps: Sequence[Step]) -> None:
    """Write ``steps`` to ``path`` atomically (a crash never leaves half a file)."""
    target = Path(path)
    text = json.dumps(checkpoint_to_dict(steps), ensure_ascii=False)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: str | os.PathLike[str]) -> list[Step]:
    """Read the steps saved by :func:`save_checkpoint`.

    Raises:
        CheckpointError: when the file is not valid checkpoint JSON.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"checkpoint {path} is not valid JSON: {exc}") from exc
    return checkpoint_from_dict(data)
