"""Search tools confined to the workspace: ``glob`` (names) and ``ripgrep`` (contents).

Both honour ``.gitignore`` files (whether or not the tree is a git repository) and never
follow a symbolic link out of the tree: ``glob`` walks with
:func:`~sp4rk.tools.builtins.tree.walk_tree`, which does not descend into linked directories.
``rg`` does not follow links met while it walks, but it does follow the path it is given; so
it is never given the checked path text. The directory (or file) to search is opened here
without following links, and ``rg`` runs in ``/proc/self/fd/N`` searching ``.`` (or searches
``/proc/self/fd/N``, the opened file): a symlink swapped in after the check cannot redirect
it (Linux).

Both are bounded whatever pattern the model picks. ``rg`` matches with finite automata
(linear time), in a process that is killed at :data:`RG_TIMEOUT` or when the call is
cancelled. ``glob`` and ``.gitignore`` patterns are matched by :mod:`.globs` in linear time,
and the walk runs in a worker thread that stops at :data:`GLOB_TIMEOUT` (or when the call is
cancelled) with an error observation listing what it found.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import shutil
import stat
import sysconfig
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

from sp4rk._internal.proc import allowlisted_environment, run_process
from sp4rk.tools.base import Tool, ToolError, ToolResult
from sp4rk.tools.builtins.files import READS_WORKSPACE, open_regular
from sp4rk.tools.builtins.globs import Glob, GlobError, IgnorePattern, parse_gitignore
from sp4rk.tools.builtins.paths import (
    Confinement,
    Target,
    describe_os_error,
    open_directory,
    parent_dir,
)
from sp4rk.tools.builtins.tree import TreeTooDeepError, walk_tree
from sp4rk.tools.context import RunContext
from sp4rk.tools.function import tool

logger = logging.getLogger("sp4rk.tools")

#: Most paths glob returns.
MAX_GLOB_RESULTS = 5000
#: Seconds one glob may walk before it stops with what it found.
GLOB_TIMEOUT = 30.0
#: Files glob looks at between two checks of its time limit.
_CHECK_EVERY = 256
#: Default and largest number of matches ripgrep returns.
DEFAULT_MAX_MATCHES = 500
MAX_MATCHES = 5000
#: Seconds before a search is killed.
RG_TIMEOUT = 60.0
#: JSON output read from rg before it is stopped.
RG_MAX_OUTPUT_BYTES = 16 * 1024 * 1024
#: Longest line of text shown per match or context line.
MAX_MATCH_CHARS = 500
#: Largest .gitignore file read.
MAX_GITIGNORE_BYTES = 1024 * 1024
#: Where a process finds its open descriptors by number.
_FD_DIR = "/proc/self/fd"


class IgnoreRules:
    """``.gitignore`` files of a tree, applied the way git applies them.

    Patterns are relative to the directory holding the file; a deeper file's decision wins;
    ``.git`` is always ignored. Paths are POSIX-style and relative to the tree's root.
    Matching takes linear time whatever the patterns (see :mod:`.globs`): a ``.gitignore``
    is file content, and a model can write one.
    """

    def __init__(self) -> None:
        self._specs: dict[str, list[IgnorePattern]] = {}

    def add(self, rel_dir: str, text: str) -> None:
        """Use the ``.gitignore`` ``text`` found in ``rel_dir`` (``""`` for the root)."""
        patterns = parse_gitignore(text)
        if patterns:
            self._specs[rel_dir] = patterns

    def load(self, dir_fd: int, rel_dir: str) -> None:
        """Read ``.gitignore`` in the directory open as ``dir_fd``, if there is one."""
        try:
            fd = os.open(".gitignore", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            return
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_GITIGNORE_BYTES)
        self.add(rel_dir, data.decode("utf-8", "replace"))

    def ignored(self, rel_path: str, is_dir: bool) -> bool:
        """Whether ``rel_path`` is ignored."""
        if rel_path == ".git" or rel_path.endswith("/.git"):
            return True
        if not self._specs:
            return False
        parent = rel_path.rsplit("/", 1)[0] if "/" in rel_path else ""
        while True:
            patterns = self._specs.get(parent)
            if patterns is not None:
                sub = rel_path[len(parent) + 1 :] if parent else rel_path
                names = sub.split("/")
                for pattern in reversed(patterns):  # the last line that applies decides
                    if pattern.matches(names, is_dir):
                        return not pattern.negate
            if not parent:
                return False
            parent = parent.rsplit("/", 1)[0] if "/" in parent else ""


def compile_glob(pattern: str) -> Glob:
    """Compile a glob with ``**``, ``*``, ``?``, ``[...]`` and ``{a,b}`` (see :mod:`.globs`).

    Raises:
        ToolError: for an absolute pattern or one that cannot be used.
    """
    if pattern.startswith("/"):
        raise ToolError("glob error: the pattern must be relative; put the directory in path")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    try:
        return Glob(pattern)
    except GlobError as exc:
        raise ToolError(f"glob error: bad pattern {pattern[:200]!r}: {exc}") from None


def ignore_rules_for(base: Target) -> IgnoreRules:
    """Rules from the ``.gitignore`` files above ``base``, up to its root.

    When those rules ignore ``base`` itself, they are dropped: a search the model aimed at
    an ignored directory explicitly should still see its contents.
    """
    rules = IgnoreRules()
    for depth in range(len(base.parts)):
        parts = base.parts[:depth]
        ancestor = Target(base.root.joinpath(*parts), base.root, parts, "/".join(parts))
        try:
            with open_directory(ancestor) as fd:
                rules.load(fd, ancestor.display)
        except ToolError:
            break
    if base.parts and rules.ignored("/".join(base.parts), True):
        return IgnoreRules()
    return rules


def search_tools(fs: Confinement, *, rg_path: str | None = None) -> list[Tool]:
    """``glob`` and ``ripgrep`` bound to ``fs``; ``rg_path`` overrides the rg lookup."""

    def base_target(ctx: RunContext, path: str) -> Target:
        return fs.resolve(ctx, path or ".")

    @tool(name="glob", untrusted=True, traits=READS_WORKSPACE)
    async def glob(
        ctx: RunContext,
        pattern: str,
        path: str = "",
        type: Literal["files", "dirs", "all"] = "files",
    ) -> ToolResult:
        """Find files by name with a glob pattern such as "**/*.py" or "src/*.{js,ts}".

        Paths ignored by .gitignore files and the .git directory are skipped; symbolic
        links to directories are not descended into.

        Args:
            ctx: the run context.
            pattern: the glob, relative to path; "**" matches any number of directories.
            path: the directory to search (default: the workspace).
            type: what to return: "files", "dirs" or "all".
        """
        if not pattern:
            raise ToolError("validation error: pattern is required")
        matcher = compile_glob(pattern)
        base = base_target(ctx, path)
        stop = threading.Event()
        try:
            found = await asyncio.to_thread(_glob, base, matcher, type, stop)
            found.outside_workspace = base.outside_workspace
            return found
        finally:
            stop.set()  # a cancelled call stops its walk too

    @tool(name="ripgrep", untrusted=True, traits=READS_WORKSPACE)
    async def ripgrep(
        ctx: RunContext,
        pattern: str,
        path: str = "",
        file_pattern: str = "",
        ignore_case: bool = False,
        context_lines: int = 0,
        include_hidden: bool = False,
        max_results: int = DEFAULT_MAX_MATCHES,
    ) -> ToolResult:
        """Search file contents with a regular expression (ripgrep syntax).

        Matches print as "path:line:column: text"; context lines as "  line- text".
        Files ignored by .gitignore, hidden files (unless include_hidden) and binary
        files are skipped.

        Args:
            ctx: the run context.
            pattern: the regular expression.
            path: a directory or file to search (default: the workspace).
            file_pattern: only search files matching this glob, e.g. "*.py" or "!*.min.js".
            ignore_case: match case-insensitively.
            context_lines: lines of context before and after each match (0-10).
            include_hidden: also search hidden files and directories.
            max_results: most matches to return (1-5000, default 500).
        """
        if not pattern:
            raise ToolError("validation error: pattern is required")
        base = base_target(ctx, path)
        argv = [
            find_rg(rg_path),
            "--json",
            "--no-messages",
            "--no-config",
            "--no-require-git",
            "--glob",
            "!.git",
        ]
        if ignore_case:
            argv.append("--ignore-case")
        if context_lines > 0:
            argv += ["--context", str(min(context_lines, 10))]
        if file_pattern:
            argv += ["--glob", file_pattern]
        if include_hidden:
            argv.append("--hidden")
        argv += ["--regexp", pattern, "--"]
        with _open_search_base(base) as (fd, is_dir):
            # rg reaches what was opened through the descriptor, never through the path.
            opened = f"{_FD_DIR}/{fd}"
            outcome = await run_process(
                [*argv, "." if is_dir else opened],
                cwd=opened if is_dir else "/",
                env=allowlisted_environment(),
                timeout=RG_TIMEOUT,
                max_output_bytes=RG_MAX_OUTPUT_BYTES,
                kill_on_cap=True,
                pass_fds=(fd,),
            )
        limit = min(max(max_results, 1), MAX_MATCHES)
        report = _RgReport(_shown_as(base, is_dir), limit)
        report.feed(outcome.output.splitlines())
        if outcome.exit_code is not None and outcome.exit_code >= 2 and not report.lines:
            detail = "\n".join(report.errors).strip() or f"exit status {outcome.exit_code}"
            raise ToolError(f"search error: rg failed: {detail}")
        notes = []
        if outcome.timed_out:
            notes.append("[search timed out — results may be incomplete]")
        if outcome.capped:
            notes.append("[search stopped early: too much output; narrow the pattern or path]")
        found = report.render(notes)
        found.outside_workspace = base.outside_workspace
        return found

    return [glob, ripgrep]


class _Full(Exception):
    """glob found more matches than it returns."""


class _Cut(Exception):
    """glob ran out of time, or its call was cancelled."""


def _glob(base: Target, matcher: Glob, kind: str, stop: threading.Event) -> ToolResult:
    """Walk ``base`` for ``matcher`` (in a worker thread) within :data:`GLOB_TIMEOUT`."""
    rules = ignore_rules_for(base)
    under = "".join(part + "/" for part in base.parts)  # rules see root-relative paths
    matches: list[str] = []
    note = ""
    deadline = time.monotonic() + GLOB_TIMEOUT

    def check() -> None:
        if stop.is_set() or time.monotonic() > deadline:
            raise _Cut

    with open_directory(base) as base_fd:
        try:
            _walk_matches(base_fd, matcher, rules, under, kind, matches, check)
        except _Full:
            note = (
                f"[stopped at {MAX_GLOB_RESULTS} matches; more may exist. Narrow the pattern "
                "or the path]"
            )
        except TreeTooDeepError:
            note = (
                "[stopped: the directory tree is nested too deeply to walk further; search a "
                "deeper path]"
            )
        except _Cut:
            found = f"; the {len(matches)} matches found so far are listed" if matches else ""
            text = "\n".join(sorted(matches))
            return ToolResult(
                text or "no matching files found before the walk was cut",
                is_error=True,
                notes=f"[glob stopped after {GLOB_TIMEOUT:g}s before the walk was complete"
                f"{found}. Search a smaller directory (path) or use a more specific pattern.]",
            )
    matches.sort()
    return ToolResult("\n".join(matches) or "no matching files found", notes=note)


def _walk_matches(
    base_fd: int,
    matcher: Glob,
    rules: IgnoreRules,
    under: str,
    kind: str,
    matches: list[str],
    check: Callable[[], None],
) -> None:
    """Add the paths below ``base_fd`` that ``matcher`` matches to ``matches``.

    ``check`` is called for every directory and every :data:`_CHECK_EVERY` entries; it
    raises to end the walk.

    Raises:
        _Full: when one more match than :data:`MAX_GLOB_RESULTS` is found (the walk stops).
        TreeTooDeepError: when the tree is deeper than the walk goes (after the rest).
    """

    def collect(rel: str) -> None:
        if len(matches) >= MAX_GLOB_RESULTS:
            raise _Full
        matches.append(rel)

    walk = walk_tree(base_fd)
    seen = 0
    with contextlib.closing(walk):  # its directory descriptors close when the walk stops
        for rel_dir, dirnames, filenames, dir_fd in walk:
            check()
            prefix = rel_dir + "/" if rel_dir else ""
            rules.load(dir_fd, (under + prefix).rstrip("/"))
            kept_dirs = []
            for name in sorted(dirnames):
                rel = prefix + name
                if not rules.ignored(under + rel, True):
                    kept_dirs.append(name)
                    if kind != "files" and matcher.match(rel):
                        collect(rel)
            dirnames[:] = kept_dirs
            if kind == "dirs":
                continue
            for name in filenames:
                seen += 1
                if seen % _CHECK_EVERY == 0:
                    check()
                rel = prefix + name
                if matcher.match(rel) and not rules.ignored(under + rel, False):
                    collect(rel)


@contextlib.contextmanager
def _open_search_base(base: Target) -> Iterator[tuple[int, bool]]:
    """A descriptor of the directory or regular file to search, reached without symlinks.

    Yields:
        The descriptor, and whether it is a directory.
    """
    if base.parts:
        with parent_dir(base) as dir_fd:
            try:
                st = os.stat(base.name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError as exc:
                raise ToolError(describe_os_error(exc, base.display)) from None
        if not stat.S_ISDIR(st.st_mode):
            with open_regular(base, "ripgrep") as (f, _):
                yield f.fileno(), False
            return
    with open_directory(base) as fd:
        yield fd, True


def find_rg(explicit: str | None = None) -> str:
    """The ``rg`` executable: ``explicit``, else the one beside this Python, else on PATH.

    Raises:
        ToolError: when none is found, saying how to install it.
    """
    if explicit:
        if os.access(explicit, os.X_OK):
            return explicit
        raise ToolError(f"the configured rg binary {explicit!r} is missing or not executable")
    scripts = sysconfig.get_path("scripts")
    search = os.pathsep.join(p for p in (scripts, os.environ.get("PATH", "")) if p)
    found = shutil.which("rg", path=search)
    if found is None:
        raise ToolError(
            "ripgrep is unavailable: the 'rg' binary was not found next to Python "
            f"({scripts}) or on PATH. Install it with `pip install ripgrep==14.1.0` (a "
            "dependency of sp4rk) or `apt-get install ripgrep`; meanwhile use glob and "
            "read_file."
        )
    return found


def _shown_as(base: Target, is_dir: bool) -> Callable[[str], str]:
    """How a path rg prints is shown: relative to the workspace, like ``base.display``."""
    if not is_dir:
        return lambda _: base.display
    prefix = "" if base.display == "." else base.display + "/"
    return lambda path: prefix + path.removeprefix("./")


class _RgReport:
    """Turns rg's JSON lines into the tool's text, counting and capping matches."""

    def __init__(self, shown_as: Callable[[str], str], limit: int) -> None:
        self.shown_as = shown_as
        self.limit = limit
        self.lines: list[str] = []
        self.errors: list[str] = []
        self.matches = 0
        self.files: set[str] = set()
        self.long_line = False

    def feed(self, raw_lines: Iterable[str]) -> None:
        for raw in raw_lines:
            try:
                event = json.loads(raw)
            except json.JSONDecodeError:
                if raw.strip():
                    self.errors.append(raw)
                continue
            if isinstance(event, dict):
                self._event(event)

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        data = event.get("data") or {}
        if kind not in ("match", "context"):
            return
        path = self.shown_as(rg_text(data.get("path")))
        number = data.get("line_number")
        text = rg_text(data.get("lines")).rstrip("\r\n")
        if len(text) > MAX_MATCH_CHARS:
            text = text[:MAX_MATCH_CHARS] + "…"
            self.long_line = True
        if kind == "match":
            self.matches += 1
            if self.matches > self.limit:
                return
            self.files.add(path)
            submatches = data.get("submatches") or []
            if submatches:
                column = int(submatches[0].get("start", 0)) + 1
                self.lines.append(f"{path}:{number}:{column}: {text}")
            else:
                self.lines.append(f"{path}:{number}: {text}")
        elif self.matches < self.limit:
            self.lines.append(f"  {number}- {text}")

    def render(self, notes: list[str]) -> ToolResult:
        """The matches as content; the summary and why the search stopped as notes."""
        if not self.lines:
            return ToolResult("no matches found", notes="\n".join(notes))
        shown = min(self.matches, self.limit)
        summary = f"Found {shown} matches in {len(self.files)} files"
        if self.matches > self.limit:
            summary += (
                f" (stopped at {self.limit} of {self.matches}+ matches; raise max_results or "
                "narrow the search)"
            )
        parts = [summary]
        if self.long_line:
            parts.append(f"[long lines were cut at {MAX_MATCH_CHARS} characters]")
        return ToolResult("\n".join(self.lines), notes="\n".join(parts + notes))


def rg_text(value: Any) -> str:
    """Decode rg's ``{"text": ...}`` or ``{"bytes": base64}`` to text."""
    if not isinstance(value, dict):
        return ""
    if "text" in value:
        return str(value["text"])
    try:
        return base64.b64decode(value.get("bytes", "")).decode("utf-8", "replace")
    except ValueError:
        return ""
