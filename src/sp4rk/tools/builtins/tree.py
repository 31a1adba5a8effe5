"""Walking a directory tree by descriptor, iteratively and only so deep.

:func:`os.fwalk` recurses up to Python 3.12 (a ``RecursionError`` near 1000 levels) and from
3.13 walks as deep as descriptors last: how far a walk reached depended on the interpreter.
:func:`walk_tree` keeps its own stack and stops at :data:`MAX_TREE_DEPTH` levels on every
version. It holds one descriptor per level, which is what bounds the depth: a walk must not
run the process out of descriptors.
"""

from __future__ import annotations

import os
from collections.abc import Generator

#: Deepest directory level walked below the top (the top is level 0).
MAX_TREE_DEPTH = 256

_OPEN_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class TreeTooDeepError(Exception):
    """Some directory lay deeper than the walk goes; its contents were not walked."""


def walk_tree(
    top_fd: int, *, max_depth: int = MAX_TREE_DEPTH
) -> Generator[tuple[str, list[str], list[str], int], None, None]:
    """Walk the directory open as ``top_fd`` top-down, like ``os.fwalk`` without symlinks.

    Yields ``(rel_dir, dirnames, filenames, dir_fd)``: ``rel_dir`` is ``""`` for the top, else
    POSIX-style and relative to it; ``dirnames`` includes symbolic links to directories, which
    are never entered; remove names from ``dirnames`` to skip them. ``dir_fd`` is valid until
    the walk moves on; ``top_fd`` stays open and the caller's. Directories that cannot be
    opened or listed are skipped.

    Raises:
        TreeTooDeepError: once the rest of the tree is walked, when directories deeper than
            ``max_depth`` were left out.
    """
    listed = _list(top_fd)
    if listed is None:
        return
    too_deep = False
    stack: list[tuple[int, str, list[str]]] = [(top_fd, "", listed[0])]
    try:
        yield "", listed[0], listed[1], top_fd
        listed[0].reverse()  # entered in listing order, popped from the end
        while stack:
            fd, rel, pending = stack[-1]
            if not pending:
                stack.pop()
                if fd != top_fd:
                    os.close(fd)
                continue
            if len(stack) > max_depth:
                too_deep = True
                pending.clear()
                continue
            name = pending.pop()
            try:
                child = os.open(name, _OPEN_FLAGS, dir_fd=fd)
            except OSError:  # a symlink, or gone since it was listed
                continue
            listed = _list(child)
            if listed is None:
                os.close(child)
                continue
            child_rel = f"{rel}/{name}" if rel else name
            dirnames, filenames = listed
            stack.append((child, child_rel, dirnames))
            yield child_rel, dirnames, filenames, child
            dirnames.reverse()
    finally:
        for fd, _, _ in stack:
            if fd != top_fd:
                os.close(fd)
    if too_deep:
        raise TreeTooDeepError(f"the tree goes deeper than {max_depth} levels")


def tree_deeper_than(dir_fd: int, name: str, max_depth: int) -> bool:
    """Whether directory ``name`` (in ``dir_fd``) has directories over ``max_depth`` below it.

    Raises:
        OSError: when ``name`` cannot be opened as a directory without following a link.
    """
    fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
    try:
        for _ in walk_tree(fd, max_depth=max_depth):
            pass
    except TreeTooDeepError:
        return True
    finally:
        os.close(fd)
    return False


def _list(fd: int) -> tuple[list[str], list[str]] | None:
    """``(dirnames, filenames)`` of the directory open as ``fd``; ``None`` if unreadable."""
    dirnames: list[str] = []
    filenames: list[str] = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                (dirnames if is_dir else filenames).append(entry.name)
    except OSError:
        return None
    return dirnames, filenames
