"""Model-chosen patterns (glob, .gitignore, tool_result_read) run in bounded time."""

from __future__ import annotations

import asyncio
import random
import re
import threading
from pathlib import Path

import pytest

from sp4rk.agent import ToolResultCache
from sp4rk.tools import RunContext, ToolResult
from sp4rk.tools.builtins import builtin_tools, tool_result_read
from sp4rk.tools.builtins import result_read as result_read_module
from sp4rk.tools.builtins import search as search_module
from sp4rk.tools.builtins.globs import MAX_ALTERNATIVES, Glob, GlobError, expand_braces
from tests.tools.builtin_helpers import by_name, call

pytestmark = pytest.mark.timeout(60)

HOSTILE_GLOB = "**/" * 16 + "*.zzz"


def deep_tree(root: Path, depth: int = 40) -> Path:
    d = root
    for i in range(depth):
        d = d / f"d{i % 3}"
    d.mkdir(parents=True)
    (d / "file.txt").write_text("x")
    (d / "hit.zzz").write_text("x")
    return d


async def test_a_backtracking_glob_on_a_deep_tree_finishes(tmp_path: Path) -> None:
    deep_tree(tmp_path)
    glob = by_name(builtin_tools(tmp_path))["glob"]
    found = await call(glob, pattern=HOSTILE_GLOB)
    assert not found.is_error
    assert found.content.endswith("/hit.zzz") and found.content.count("\n") == 0
    missing = await call(glob, pattern="**/" * 16 + "*.nope")
    assert missing.content == "no matching files found"


async def test_a_hostile_gitignore_does_not_stall_the_walk(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*a*a*a*a*a*a*a*b\n" + "**/" * 20 + "*a*a*a*c\n")
    (tmp_path / ("a" * 200)).write_text("x")
    (tmp_path / "kept.txt").write_text("x")
    glob = by_name(builtin_tools(tmp_path))["glob"]
    found = await call(glob, pattern="*")
    assert found.content.splitlines() == [".gitignore", "a" * 200, "kept.txt"]


async def test_a_glob_past_its_time_limit_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep_tree(tmp_path, 5)
    monkeypatch.setattr(search_module, "GLOB_TIMEOUT", 0.0)
    result = await call(by_name(builtin_tools(tmp_path))["glob"], pattern="**/*")
    assert result.is_error
    assert "glob stopped after 0s before the walk was complete" in result.notes
    assert "Search a smaller directory" in result.notes


async def test_cancelling_a_glob_stops_its_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, ended = threading.Event(), threading.Event()

    def endless(base: object, matcher: object, kind: str, stop: threading.Event) -> ToolResult:
        started.set()
        stop.wait()  # a walk that only ends when told to
        ended.set()
        return ToolResult("")

    monkeypatch.setattr(search_module, "_glob", endless)
    glob = by_name(builtin_tools(tmp_path))["glob"]
    task = asyncio.create_task(call(glob, pattern="*"))
    await asyncio.to_thread(started.wait)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(ended.wait, 30)


def test_brace_expansion_is_bounded() -> None:
    expanded = ["a/x1", "a/x2", "bc/x1", "bc/x2", "bd/x1", "bd/x2"]
    assert expand_braces("{a,b{c,d}}/x{1,2}") == expanded
    assert expand_braces("{a}/{b") == ["{a}/{b"]
    with pytest.raises(GlobError, match=f"more than {MAX_ALTERNATIVES}"):
        Glob("{a,b}" * 9)


def _reference(pattern: str) -> re.Pattern[str]:
    """The translation glob used before (backtracking, but right on small inputs)."""
    out = []
    parts = pattern.split("/")
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".+" if last else "(?:[^/]+/)*")
            continue
        body = "".join(
            {"*": "[^/]*", "?": "[^/]", "[": "[", "]": "]"}.get(c, re.escape(c)) for c in part
        )
        out.append(body + ("" if last else "/"))
    return re.compile("".join(out) + r"\Z")


def test_matching_agrees_with_a_regex_translation_on_random_cases() -> None:
    rng = random.Random(7)
    atoms = ["a", "b", "*", "?", "**", "[ab]", "/"]
    for _ in range(3000):
        pattern = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 6)))
        pattern = "/".join(p for p in pattern.split("/") if p)
        if not pattern or any("**" in p and p != "**" for p in pattern.split("/")):
            continue
        path = "/".join(
            "".join(rng.choice("ab") for _ in range(rng.randint(1, 3)))
            for _ in range(rng.randint(1, 4))
        )
        assert Glob(pattern).match(path) == bool(_reference(pattern).match(path)), (
            pattern,
            path,
        )


@pytest.mark.parametrize(
    ("lines", "path", "is_dir", "ignored"),
    [
        ("*.log\n!keep.log\n", "x/keep.log", False, False),
        ("*.log\n", "x/y.log", False, True),
        ("build/\n", "build", False, False),  # a directory-only line skips files
        ("build/\n", "a/build/x.py", False, True),  # ...and ignores what is inside one
        ("/top.txt\n", "a/top.txt", False, False),  # anchored
        ("a/**/z\n", "a/b/c/z", False, True),
        ("src/**\n", "src", True, False),  # what is inside src, not src itself
        ("\\#hash\n# comment\n", "#hash", False, True),
    ],
)
def test_gitignore_semantics(lines: str, path: str, is_dir: bool, ignored: bool) -> None:
    rules = search_module.IgnoreRules()
    rules.add("", lines)
    assert rules.ignored(path, is_dir) is ignored


async def test_a_catastrophic_regex_in_tool_result_read_finishes() -> None:
    cache = ToolResultCache()
    h = cache.store("dump", "\n".join(["a" * 5000 + "b", "a" * 64, "x"]))
    ctx = RunContext(tool_result_cache=cache)
    found = await tool_result_read.execute(ctx, f'{{"hash": "{h}", "pattern": "(a+)+$"}}')
    assert not found.is_error, found.content
    assert found.content.splitlines()[2] == "2: " + "a" * 64


async def test_a_pattern_search_past_its_time_limit_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = tmp_path / "slow-rg"
    slow.write_text("#!/bin/sh\nexec sleep 60\n")
    slow.chmod(0o755)
    monkeypatch.setattr(result_read_module, "find_rg", lambda: str(slow))
    monkeypatch.setattr(result_read_module, "PATTERN_TIMEOUT", 0.2)
    cache = ToolResultCache()
    h = cache.store("dump", "alpha")
    ctx = RunContext(tool_result_cache=cache)
    result = await tool_result_read.execute(ctx, f'{{"hash": "{h}", "pattern": "a"}}')
    assert result.is_error
    assert "stopped after 0.2s" in result.content and "start_line" in result.content
