"""Workspace confinement: every path a model names is checked before, and while, it is used.

A model's path is untrusted input. ``..``, absolute paths, prefix tricks (``/srv/ws-evil``
beside ``/srv/ws``) and symlinks pointing out of the workspace are refused, and the check
still holds when a symlink is swapped in between the check and the use:

1. the text is validated: no NUL byte, no ``~``, at most :data:`MAX_PATH_BYTES` bytes and
   :data:`MAX_NAME_BYTES` per component;
2. it is resolved with every symlink component followed (``os.path.realpath``) and must lie
   in one of the roots, compared component by component;
3. the resolved path is then opened by walking down from the root's directory descriptor one
   component at a time with ``O_NOFOLLOW``. The resolved path contains no symlink, so meeting
   one during the walk means the tree changed after the check, and the operation fails.

Roots are the run's workspace (``RunContext.workspace``, else the one the tools were built
for) plus any extra roots the host names.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sp4rk._internal.args import as_list, existing_directory
from sp4rk.tools.base import ToolError
from sp4rk.tools.context import RunContext

#: Longest path accepted, in UTF-8 bytes (Linux ``PATH_MAX``).
MAX_PATH_BYTES = 4096
#: Longest single path component accepted, in UTF-8 bytes (``NAME_MAX``).
MAX_NAME_BYTES = 255

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW = os.O_NOFOLLOW


@dataclass(slots=True, frozen=True)
class Target:
    """A checked path: its resolved form, the root containing it, and how to show it."""

    path: Path
    """The absolute path with every symlink resolved (except a kept last component)."""
    root: Path
    """The (resolved) root the path lies in."""
    parts: tuple[str, ...]
    """The path's components below ``root``; empty when the path is the root itself."""
    display: str
    """Relative to the workspace when inside it, else absolute: what messages show."""
    outside_workspace: bool = False
    """It lies in an extra root, not the workspace: what is read there taints the run."""

    @property
    def name(self) -> str:
        """The last component (``""`` for a root)."""
        return self.parts[-1] if self.parts else ""


class Confinement:
    """The roots file tools may touch, and the checks that keep them there.

    Args:
        workspace: the default workspace; ``RunContext.workspace`` overrides it per run.
        extra_roots: further directories the host allows (for example a shared data folder).

    Raises:
        TypeError: when ``extra_roots`` is a single path rather than a list of them.
        ValueError: when the workspace or an extra root is not an existing directory.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None,
        extra_roots: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        roots = as_list(extra_roots, "extra_roots", "directories")
        self.workspace = None if workspace is None else existing_directory(workspace, "workspace")
        self.extra_roots = tuple(existing_directory(r, "extra root") for r in roots)

    def roots(self, ctx: RunContext) -> list[Path]:
        """The resolved roots for this run, the workspace first.

        Raises:
            ToolError: when no workspace is configured or it is not a directory.
        """
        workspace = ctx.workspace if ctx.workspace is not None else self.workspace
        if workspace is None:
            raise ToolError(
                "no workspace is configured for this run: the host must pass a workspace to "
                "builtin_tools() or set RunContext.workspace"
            )
        if "\x00" in str(workspace):
            raise ToolError(f"the workspace {str(workspace)!r} contains a NUL byte")
        ws = Path(os.path.realpath(workspace))
        if not ws.is_dir():
            raise ToolError(
                f"the workspace {str(workspace)!r} does not exist or is not a directory"
            )
        roots = [ws]
        for extra in self.extra_roots:
            resolved = Path(os.path.realpath(extra))
            if resolved.is_dir() and resolved not in roots:
                roots.append(resolved)
        return roots

    def resolve(self, ctx: RunContext, raw: str, *, follow_last: bool = True) -> Target:
        """Check ``raw`` and return where it really points.

        Args:
            ctx: the run context (for the workspace).
            raw: the path as the model wrote it; relative paths start at the workspace.
            follow_last: resolve a symlink in the last component too. ``False`` keeps the
                link itself (deleting a link must never touch its target).

        Raises:
            ToolError: when the path is malformed or lies outside every root.
        """
        check_path_text(raw)
        roots = self.roots(ctx)
        joined = raw if os.path.isabs(raw) else os.path.join(roots[0], raw)
        try:
            resolved = _realpath(joined, follow_last)
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot resolve path {raw!r}: {exc}") from None
        for root in roots:
            if is_within(resolved, root):
                parts = resolved.relative_to(root).parts
                shown = _display(resolved, roots[0])
                return Target(resolved, root, parts, shown, outside_workspace=root != roots[0])
        allowed = ", ".join(str(r) for r in roots)
        raise ToolError(
            f"path is outside the session workspace: {raw!r} resolves to {str(resolved)!r}, "
            f"which is not inside {allowed}. Use a path inside the workspace."
        )


def check_path_text(raw: str) -> None:
    """Refuse path text no file system call should ever see.

    Raises:
        ToolError: for an empty path, a NUL byte, ``~``, text that cannot be encoded, or
            a path or component that is too long.
    """
    if not raw:
        raise ToolError("validation error: path is required")
    if "\x00" in raw:
        raise ToolError("invalid path: it contains a NUL byte")
    if raw.startswith("~"):
        raise ToolError(
            f"invalid path {raw!r}: '~' is not expanded; use a path relative to the workspace"
        )
    try:
        encoded = os.fsencode(raw)
    except UnicodeEncodeError:
        raise ToolError("invalid path: it is not valid text (lone surrogate characters)") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise ToolError(f"invalid path: longer than {MAX_PATH_BYTES} bytes ({len(encoded)})")
    if any(len(part) > MAX_NAME_BYTES for part in encoded.split(b"/")):
        raise ToolError(f"invalid path: a component is longer than {MAX_NAME_BYTES} bytes")


def _realpath(path: str, follow_last: bool) -> Path:
    if follow_last:
        return Path(os.path.realpath(path))
    head, tail = os.path.split(path.rstrip("/") or "/")
    if tail in ("", ".", ".."):
        return Path(os.path.realpath(path))
    return Path(os.path.realpath(head or ".")) / tail


def is_within(path: Path, root: Path) -> bool:
    """Component-wise containment: ``/srv/ws-evil`` is not within ``/srv/ws``."""
    return path == root or root in path.parents


def _display(path: Path, workspace: Path) -> str:
    if is_within(path, workspace):
        return path.relative_to(workspace).as_posix() or "."
    return str(path)


def _open_dirs(root: Path, parts: Sequence[str], *, create: bool) -> int:
    """A descriptor of ``root/parts`` reached without following any symlink.

    With ``create``, missing directories are made (mode 0755) on the way.
    """
    fd = os.open(root, _DIR_FLAGS)
    try:
        for name in parts:
            try:
                child = os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            except NotADirectoryError:
                # O_DIRECTORY wins over O_NOFOLLOW: a symlink here reads as ENOTDIR.
                if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
                raise
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                child = os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def parent_dir(target: Target, *, create: bool = False) -> Iterator[int]:
    """Yield a descriptor of ``target``'s parent directory, reached without symlinks.

    Raises:
        ToolError: when ``target`` is a root (it has no parent inside the roots) or the walk
            fails.
    """
    if not target.parts:
        raise ToolError(f"{target.display!r} is a workspace root; name something inside it")
    fd = _walk(target, target.parts[:-1], create=create)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_directory(target: Target, *, create: bool = False) -> Iterator[int]:
    """Yield a descriptor of the directory ``target`` itself, reached without symlinks."""
    fd = _walk(target, target.parts, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def _walk(target: Target, parts: Sequence[str], *, create: bool) -> int:
    try:
        return _open_dirs(target.root, parts, create=create)
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            depth = _file_in_the_way(target.root, parts)
            if depth == len(target.parts):
                raise ToolError(f"{target.display!r} is a file, not a directory") from None
            if depth:
                inner = "/".join(target.parts[:depth])
                raise ToolError(
                    f"{target.display!r}: {inner!r} is a file, not a directory"
                ) from None
        raise ToolError(describe_os_error(exc, target.display)) from None


def _file_in_the_way(root: Path, parts: Sequence[str]) -> int:
    """How many components of ``parts`` lead to the first that is a file (0: none found)."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for depth, name in enumerate(parts, start=1):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    return 0 if stat.S_ISLNK(st.st_mode) else depth
                child = os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            except OSError:
                return 0
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    return 0


def open_file(parent_fd: int, target: Target, flags: int, mode: int = 0o644) -> int:
    """Open ``target``'s last component relative to ``parent_fd`` without following a link.

    Raises:
        ToolError: when the open fails (a symlink there now is reported as a change).
    """
    try:
        return os.open(target.name, flags | _NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent_fd)
    except OSError as exc:
        raise ToolError(describe_os_error(exc, target.display)) from None


def describe_os_error(exc: OSError, display: str) -> str:
    """A message for ``exc`` that names ``display`` and says what to do next."""
    code = exc.errno
    if code == errno.ELOOP:
        return (
            f"refused {display!r}: a symbolic link appeared in the path after it was checked "
            "(or the path is a link loop); links are never followed during the operation"
        )
    if code == errno.ENOENT:
        return f"no such file or directory: {display!r}"
    if code == errno.ENOTDIR:
        return f"{display!r}: a component of the path is not a directory"
    if code == errno.EISDIR:
        return f"{display!r} is a directory"
    if code in (errno.EACCES, errno.EPERM):
        return f"permission denied: {display!r}"
    if code == errno.ENAMETOOLONG:
        return f"path too long: {display!r}"
    return f"{display!r}: {exc.strerror or exc}"
