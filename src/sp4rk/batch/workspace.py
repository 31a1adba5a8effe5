"""Each run's own workspace: a copy of its task's folder, made before the run starts.

Runs never share a folder, so a thousand runs of one repository cannot step on each other,
and the source folder is never touched. A copy is complete before the run that uses it is
created in the store: a crash mid-copy leaves a folder that the next attempt copies again.
For Ray, a folder travels with its tasks as a packed archive (:func:`pack`), put in Ray's
object store once per source folder and unpacked on the worker (:func:`unpack`).
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import tarfile
from pathlib import Path

#: Largest workspace shipped to Ray workers, in bytes (before compression).
MAX_PACKED_BYTES = 1 << 30
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class WorkspaceError(OSError):
    """A workspace cannot be copied, packed or unpacked; the message says which and why."""


def task_folder(root: Path, task_id: str) -> Path:
    """Where the run of ``task_id`` works: a readable, collision-free name under ``root``."""
    readable = _UNSAFE.sub("-", task_id).strip("-.")[:48] or "task"
    digest = hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:10]
    return root / f"{readable}-{digest}"


def copy_fresh(source: Path | None, dest: Path) -> None:
    """Make ``dest`` a fresh copy of ``source`` (an empty folder when ``None``).

    Whatever ``dest`` held is removed first. Symbolic links are copied as links.

    Raises:
        WorkspaceError: the copy failed.
    """
    _clear(dest)
    try:
        if source is None:
            dest.mkdir(parents=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(source, dest, symlinks=True)
    except (OSError, shutil.Error) as exc:
        raise WorkspaceError(f"cannot copy the workspace {source} to {dest}: {exc}") from exc


def pack(source: Path) -> bytes:
    """``source`` as a gzip'd tar archive (links kept as links).

    Raises:
        WorkspaceError: it cannot be read, or is larger than :data:`MAX_PACKED_BYTES`.
    """
    try:
        size = sum(p.lstat().st_size for p in source.rglob("*") if not p.is_symlink())
    except OSError as exc:
        raise WorkspaceError(f"cannot read the workspace {source}: {exc}") from exc
    if size > MAX_PACKED_BYTES:
        raise WorkspaceError(
            f"the workspace {source} holds {size:,} bytes, more than the {MAX_PACKED_BYTES:,} "
            "sent to Ray workers; make it smaller (or run without --ray)"
        )
    buffer = io.BytesIO()
    try:
        with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
            archive.add(source, arcname=".")
    except OSError as exc:
        raise WorkspaceError(f"cannot pack the workspace {source}: {exc}") from exc
    return buffer.getvalue()


def unpack(data: bytes | None, dest: Path) -> None:
    """Make ``dest`` hold the archive ``data`` (an empty folder when ``None``).

    Members that would land outside ``dest``, devices and the like are refused (tarfile's
    ``data`` filter).

    Raises:
        WorkspaceError: the archive is damaged or unsafe, or ``dest`` cannot be written.
    """
    _clear(dest)
    try:
        dest.mkdir(parents=True)
        if data is not None:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
                archive.extractall(dest, filter="data")
    except (OSError, tarfile.TarError) as exc:
        raise WorkspaceError(f"cannot unpack the workspace into {dest}: {exc}") from exc


def _clear(dest: Path) -> None:
    try:
        if dest.is_symlink() or dest.is_file():
            dest.unlink()
        elif dest.exists():
            shutil.rmtree(dest)
    except OSError as exc:
        raise WorkspaceError(f"cannot clear {dest} for a fresh workspace: {exc}") from exc
