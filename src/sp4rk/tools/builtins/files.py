"""File tools confined to the workspace: read, write, delete, create and list.

``edit_file`` lives in :mod:`sp4rk.tools.builtins.edit`. Every path goes through
:class:`~sp4rk.tools.builtins.paths.Confinement` and every file is opened relative to a
directory descriptor reached without following symlinks, so a path outside the roots is
refused whatever the approval, and swapping a symlink in after the check does not help.
Writes go to a temporary file in the same directory and are renamed over the target.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from typing import BinaryIO

from sp4rk.tools.base import Tool, ToolError, ToolPolicy, ToolResult, ToolTraits
from sp4rk.tools.builtins.paths import (
    Confinement,
    Target,
    describe_os_error,
    open_directory,
    open_file,
    parent_dir,
)
from sp4rk.tools.builtins.tree import MAX_TREE_DEPTH, tree_deeper_than
from sp4rk.tools.context import RunContext
from sp4rk.tools.function import tool

#: Lines read_file returns when no end line is given.
DEFAULT_READ_LINES = 2000
#: Widest window read_file returns in one call.
MAX_WINDOW_LINES = 50_000
#: Longest line shown; the rest of a longer line is replaced by a marker.
MAX_LINE_BYTES = 1024 * 1024
#: Most content one read_file call returns; a larger window stops early with a hint.
MAX_READ_BYTES = 8 * 1024 * 1024
#: Bytes sniffed for NUL bytes to tell binary files apart.
BINARY_SNIFF_BYTES = 8192
#: Most entries list_directory shows.
MAX_LIST_ENTRIES = 5000
#: Bytes read after the returned lines to count the rest of the file; past it the header
#: gives a lower bound ("of at least N").
MAX_COUNT_BYTES = 64 * 1024 * 1024
_COUNT_CHUNK = 1024 * 1024


#: Writes and edits change source files: they count as progress and trigger verify-on-edit.
EDITS_FILE = ToolTraits(mutating=True, verify_after=True, brief_results=True, file_argument="path")
#: Deleting files and creating directories change the tree but are not edits to verify.
CHANGES_TREE = ToolTraits(mutating=True, brief_results=True)
READS_WORKSPACE = ToolTraits(read_only=True, reads_workspace=True)
READS_FILE = ToolTraits(read_only=True, reads_workspace=True, file_argument="path")


def file_tools(fs: Confinement) -> list[Tool]:
    """The file tools except ``edit_file``, bound to ``fs``."""

    @tool(name="read_file", untrusted=True, traits=READS_FILE)
    def read_file(
        ctx: RunContext,
        path: str,
        start_line: int = 0,
        end_line: int = 0,
        line_numbers: bool = False,
    ) -> ToolResult:
        """Read a text file in the workspace, optionally a range of lines.

        The header shows which lines of how many were returned; read further with
        start_line. Binary files are refused; invalid UTF-8 is shown as U+FFFD.

        Args:
            ctx: the run context.
            path: the file, relative to the workspace (or absolute inside it).
            start_line: first line to return, 1-based (default 1).
            end_line: last line to return, inclusive (default: 2000 lines from start_line).
            line_numbers: prefix every line with its number and a tab.
        """
        check_line_range(start_line, end_line)
        target = fs.resolve(ctx, path)
        with open_regular(target, "read_file") as (f, _):
            text = _read_range(f, target, start_line, end_line, line_numbers)
        return ToolResult(text, outside_workspace=target.outside_workspace)

    @tool(name="write_file", policy=ToolPolicy.USER_CONFIRM, traits=EDITS_FILE)
    def write_file(ctx: RunContext, path: str, content: str) -> str:
        """Create or overwrite a file in the workspace with the given content.

        Missing parent directories are created. The write is atomic: readers see the old
        or the new content, never a mix.

        Args:
            ctx: the run context.
            path: the file, relative to the workspace (or absolute inside it).
            content: the complete new content.
        """
        target = fs.resolve(ctx, path)
        data = encode_text(content)
        write_atomic(target, data, create_parents=True)
        return f"successfully wrote {len(data)} bytes to {target.path}"

    @tool(name="delete_file", policy=ToolPolicy.USER_CONFIRM, traits=CHANGES_TREE)
    def delete_file(ctx: RunContext, path: str, recursive: bool = False) -> str:
        """Delete a file, a symbolic link, or (with recursive) a directory tree.

        Deleting a symbolic link removes the link only, never what it points to.

        Args:
            ctx: the run context.
            path: what to delete, relative to the workspace (or absolute inside it).
            recursive: required to delete a directory, with everything in it.
        """
        target = fs.resolve(ctx, path, follow_last=False)
        with parent_dir(target) as dir_fd:
            try:
                st = os.stat(target.name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    if not recursive:
                        raise ToolError(
                            f"{target.display!r} is a directory; pass recursive=true to delete "
                            "it and everything in it"
                        )
                    if tree_deeper_than(dir_fd, target.name, MAX_TREE_DEPTH):
                        raise ToolError(
                            f"{target.display!r} is nested too deeply to delete here (over "
                            f"{MAX_TREE_DEPTH} levels); delete its deepest directories first "
                            "(or use bash_exec: rm -rf)"
                        )
                    shutil.rmtree(target.name, dir_fd=dir_fd)
                    return f"successfully deleted directory: {target.display}"
                os.unlink(target.name, dir_fd=dir_fd)
            except OSError as exc:
                raise ToolError(describe_os_error(exc, target.display)) from None
        if stat.S_ISLNK(st.st_mode):
            return f"successfully deleted symbolic link: {target.display} (its target is untouched)"
        return f"successfully deleted file: {target.display}"

    @tool(name="create_directory", policy=ToolPolicy.USER_CONFIRM, traits=CHANGES_TREE)
    def create_directory(ctx: RunContext, path: str) -> str:
        """Create a directory and any missing parents (like mkdir -p); fine if it exists.

        Args:
            ctx: the run context.
            path: the directory, relative to the workspace (or absolute inside it).
        """
        target = fs.resolve(ctx, path)
        with open_directory(target, create=True):
            pass
        return f"successfully created directory: {target.display}"

    @tool(name="list_directory", untrusted=True, traits=READS_WORKSPACE)
    def list_directory(ctx: RunContext, path: str) -> ToolResult:
        """List a directory: one line per entry, "name<TAB>file|dir<TAB>size", sorted by name.

        Symbolic links are listed as files and not followed.

        Args:
            ctx: the run context.
            path: the directory, relative to the workspace ("." for the workspace itself).
        """
        target = fs.resolve(ctx, path)
        rows: list[tuple[str, str, int]] = []
        with open_directory(target) as fd, os.scandir(fd) as entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # vanished or unreadable: skip it
                kind = "dir" if stat.S_ISDIR(st.st_mode) else "file"
                rows.append((entry.name, kind, st.st_size))
        rows.sort()
        lines = [f"{name}\t{kind}\t{size}" for name, kind, size in rows[:MAX_LIST_ENTRIES]]
        if len(rows) > MAX_LIST_ENTRIES:
            lines.append(
                f"[{len(rows) - MAX_LIST_ENTRIES} more entries not shown; use glob to narrow]"
            )
        listing = "".join(line + "\n" for line in lines)
        return ToolResult(listing, outside_workspace=target.outside_workspace)

    return [read_file, write_file, delete_file, create_directory, list_directory]


def check_line_range(start_line: int, end_line: int) -> None:
    """Refuse a line range no text has (``0`` means "from the start" / "to the end").

    Raises:
        ToolError: for a negative number or a start after the end.
    """
    if start_line < 0 or end_line < 0:
        raise ToolError("start_line and end_line must be positive line numbers (or 0)")
    if start_line > 0 and end_line > 0 and start_line > end_line:
        raise ToolError(f"start_line ({start_line}) is after end_line ({end_line})")


def encode_text(text: str) -> bytes:
    """UTF-8 bytes of ``text``; bytes kept as surrogate escapes come back unchanged."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


@contextlib.contextmanager
def open_regular(target: Target, tool_name: str) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """Open ``target`` for reading, refusing directories, FIFOs, sockets and devices.

    The type is checked by name (relative to the parent's descriptor) before the file is
    opened, so a FIFO or device is never opened; the opened file must then be the one that
    was checked. ``O_NONBLOCK`` keeps the open from hanging should a FIFO be swapped in
    between.
    """
    with parent_dir(target) as dir_fd:
        try:
            named = os.stat(target.name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError as exc:
            raise ToolError(describe_os_error(exc, target.display)) from None
        _require_regular(named, target, tool_name)
        fd = open_file(dir_fd, target, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        same = (st.st_dev, st.st_ino) == (named.st_dev, named.st_ino)
        if not same or not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{target.display!r} was replaced while it was being opened; try again")
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f, st


def _require_regular(st: os.stat_result, target: Target, tool_name: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{target.display!r} is a directory; use list_directory or glob")
    if stat.S_ISLNK(st.st_mode):
        raise ToolError(
            f"refused {target.display!r}: it became a symbolic link after it was checked; "
            "links are never followed during the operation"
        )
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(
            f"{target.display!r} is not a regular file (a FIFO, socket or device); "
            f"{tool_name} handles regular files only"
        )


def read_text_file(
    fs: Confinement, ctx: RunContext, path: str, *, max_bytes: int, tool_name: str
) -> tuple[Target, str]:
    """Resolve and read a whole text file (decoded with surrogate escapes).

    Raises:
        ToolError: when the path is refused, the file is binary, not regular, or larger
            than ``max_bytes``.
    """
    target = fs.resolve(ctx, path)
    with open_regular(target, tool_name) as (f, st):
        if st.st_size > max_bytes:
            raise ToolError(
                f"{target.display!r} is {st.st_size} bytes, more than the {max_bytes} this tool "
                "loads; change it with bash_exec (sed, a script) instead"
            )
        data = f.read(max_bytes + 1)
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise ToolError(
            f"{target.display!r} looks binary (it contains NUL bytes); {tool_name} "
            "handles text files only"
        )
    return target, data.decode("utf-8", "surrogateescape")


def write_atomic(target: Target, data: bytes, *, create_parents: bool = False) -> None:
    """Write ``data`` to ``target`` through a temporary file and a rename.

    An existing file keeps its permission bits; a new one gets 0644.

    Raises:
        ToolError: when the target is a directory, a symlink appeared, or the write fails.
    """
    with parent_dir(target, create=create_parents) as dir_fd:
        mode = 0o644
        try:
            st = os.stat(target.name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ToolError(describe_os_error(exc, target.display)) from None
        else:
            if stat.S_ISDIR(st.st_mode):
                raise ToolError(f"{target.display!r} is a directory; name a file inside it")
            if stat.S_ISLNK(st.st_mode):
                raise ToolError(
                    f"refused {target.display!r}: it became a symbolic link after it was checked"
                )
            mode = stat.S_IMODE(st.st_mode)
        tmp = f".sp4rk-{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=dir_fd,
            )
            try:
                with os.fdopen(fd, "wb", closefd=False) as f:
                    f.write(data)
                    f.flush()
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise ToolError(describe_os_error(exc, target.display)) from None


def _read_line(f: BinaryIO) -> tuple[bytes, bool] | None:
    """The next line (with its newline) capped at :data:`MAX_LINE_BYTES`, and whether cut.

    The rest of a cut line is consumed in bounded chunks, so a huge line never sits in
    memory whole.
    """
    line = f.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if line.endswith(b"\n") or len(line) <= MAX_LINE_BYTES:
        return line, False
    while rest := f.readline(MAX_LINE_BYTES):
        if rest.endswith(b"\n"):
            break
    return line[:MAX_LINE_BYTES], True


def _count_lines(f: BinaryIO, limit: int) -> tuple[int, bool]:
    """Lines from the current position to the end, reading at most ``limit`` bytes.

    Returns:
        The count, and whether it reached the end (else it is a lower bound).
    """
    count = 0
    read = 0
    last = b"\n"
    while read < limit and (block := f.read(min(_COUNT_CHUNK, limit - read))):
        count += block.count(b"\n")
        read += len(block)
        last = block[-1:]
    if read >= limit and f.read(1):
        return count, False
    return count + (last != b"\n"), True


def _read_range(
    f: BinaryIO, target: Target, start_line: int, end_line: int, line_numbers: bool
) -> str:
    head = f.read(BINARY_SNIFF_BYTES)
    if b"\x00" in head:
        size = os.fstat(f.fileno()).st_size
        raise ToolError(
            f"{target.display!r} looks binary ({size} bytes, NUL bytes near the start); "
            "read_file shows text only. Inspect it with bash_exec (for example `xxd | head`)."
        )
    f.seek(0)
    start = start_line if start_line > 0 else 1
    end = end_line if end_line > 0 else start + DEFAULT_READ_LINES - 1
    capped_window = end - start + 1 > MAX_WINDOW_LINES
    if capped_window:
        end = start + MAX_WINDOW_LINES - 1
    pieces: list[str] = []
    size = 0
    total = 0
    last = 0
    exact = True
    while (item := _read_line(f)) is not None:
        total += 1
        if total < start:
            continue
        if total > end or size >= MAX_READ_BYTES:
            rest, exact = _count_lines(f, MAX_COUNT_BYTES)
            total += rest
            break
        raw, cut = item
        text = raw.decode("utf-8", "replace")
        if cut:
            text += f" [...line {total} truncated at {MAX_LINE_BYTES} bytes...]\n"
        if line_numbers:
            text = f"{total:>6}\t{text}"
        pieces.append(text)
        size += len(raw)
        last = total
    name = target.path.name
    if total == 0:
        return f"[File: {name} | 0 lines | empty file]\n"
    if start > total:
        raise ToolError(f"start_line {start} is past the end of {target.display!r} ({total} lines)")
    content = "".join(pieces)
    nbytes = len(content.encode("utf-8"))
    of = f"{total}" if exact else f"at least {total}"
    text = f"[File: {name} | Lines {start}-{last} of {of} | {nbytes} bytes]\n{content}"
    if last < total:
        text += f"\n[Use start_line={last + 1} to continue reading]"
    return text
