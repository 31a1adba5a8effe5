"""read_file, write_file, edit_file, delete_file, create_directory and list_directory."""

from __future__ import annotations

import difflib
import os
import stat
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from sp4rk.tools import RunContext, Tool, ToolPolicy
from sp4rk.tools.base import PARSE_ERROR_PREFIX
from sp4rk.tools.builtins import builtin_tools
from sp4rk.tools.builtins import files as files_module
from sp4rk.tools.builtins.edit import MAX_FUZZY_WORK, WorkBudget, nearest_candidates
from sp4rk.tools.builtins.files import MAX_LINE_BYTES
from tests.tools.builtin_helpers import by_name, call


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def tools(ws: Path) -> dict[str, Tool]:
    return by_name(builtin_tools(ws))


# --- read_file -----------------------------------------------------------------------------


async def test_read_a_whole_file(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "f.txt").write_text("a\nb\nc\n")
    result = await call(tools["read_file"], path="f.txt")
    assert result.content == "[File: f.txt | Lines 1-3 of 3 | 6 bytes]\na\nb\nc\n"


async def test_read_a_range_says_how_to_continue(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "f.txt").write_text("1\n2\n3\n4\n5\n")
    result = await call(tools["read_file"], path="f.txt", start_line=2, end_line=2)
    assert (
        result.content
        == "[File: f.txt | Lines 2-2 of 5 | 2 bytes]\n2\n\n[Use start_line=3 to continue reading]"
    )
    numbered = await call(tools["read_file"], path="f.txt", start_line=4, line_numbers=True)
    assert numbered.content.endswith("     4\t4\n     5\t5\n")


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [(3, 2, "is after end_line"), (-1, 0, "must be positive"), (9, 0, "past the end")],
)
async def test_read_rejects_bad_ranges(
    ws: Path, tools: dict[str, Tool], start: int, end: int, message: str
) -> None:
    (ws / "f.txt").write_text("1\n2\n3\n")
    result = await call(tools["read_file"], path="f.txt", start_line=start, end_line=end)
    assert result.is_error
    assert message in result.content


async def test_read_an_empty_file(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "e.txt").write_bytes(b"")
    result = await call(tools["read_file"], path="e.txt")
    assert result.content == "[File: e.txt | 0 lines | empty file]\n"


async def test_binary_files_are_refused(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "b.bin").write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    result = await call(tools["read_file"], path="b.bin")
    assert result.is_error
    assert "looks binary" in result.content


async def test_invalid_utf8_is_tolerated(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "latin.txt").write_bytes(b"caf\xe9\nok\n")
    result = await call(tools["read_file"], path="latin.txt")
    assert not result.is_error
    assert "caf\ufffd\nok\n" in result.content


async def test_a_huge_line_is_cut_without_loading_it(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "wide.txt").write_bytes(b"x" * (24 * MAX_LINE_BYTES) + b"\nnext\n")
    tracemalloc.start()
    try:
        result = await call(tools["read_file"], path="wide.txt")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "Lines 1-2 of 2" in result.content
    assert f"[...line 1 truncated at {MAX_LINE_BYTES} bytes...]" in result.content
    assert result.content.endswith("next\n")
    assert peak < 8 * MAX_LINE_BYTES  # the 24 MiB line never sat in memory whole


async def test_counting_the_lines_of_a_huge_file_is_capped(
    ws: Path, tools: dict[str, Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "big.txt").write_text("".join(f"{i}\n" for i in range(1, 1001)))
    result = await call(tools["read_file"], path="big.txt", end_line=2)
    assert result.content.startswith("[File: big.txt | Lines 1-2 of 1000 |")
    monkeypatch.setattr(files_module, "MAX_COUNT_BYTES", 100)
    capped = await call(tools["read_file"], path="big.txt", end_line=2)
    # lines 3.. are 2 bytes each up to line 9, then 3 bytes: 100 bytes reach line 38
    assert capped.content.startswith("[File: big.txt | Lines 1-2 of at least 38 |")
    assert capped.content.endswith("[Use start_line=3 to continue reading]")
    (ws / "open.txt").write_text("a\nb\nc")  # no final newline: still three lines
    assert (
        "Lines 1-1 of 3 " in (await call(tools["read_file"], path="open.txt", end_line=1)).content
    )


async def test_long_files_default_to_2000_lines(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 5001)))
    result = await call(tools["read_file"], path="long.txt")
    assert "Lines 1-2000 of 5000" in result.content
    assert result.content.endswith("[Use start_line=2001 to continue reading]")


async def test_directories_and_fifos_are_not_read(
    ws: Path, tools: dict[str, Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "d").mkdir()
    os.mkfifo(ws / "pipe")
    opened: list[str] = []
    real_open = os.open

    def recording_open(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(os.fsdecode(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording_open)
    directory = await call(tools["read_file"], path="d")
    assert directory.is_error
    assert "is a directory" in directory.content
    fifo = await call(tools["read_file"], path="pipe")
    assert fifo.is_error
    assert "not a regular file" in fifo.content
    assert "pipe" not in opened  # checked by name: a FIFO is never opened


async def test_a_file_replaced_while_it_is_opened_is_refused(
    ws: Path, tools: dict[str, Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "f.txt").write_text("checked\n")
    real_open = os.open

    def replacing_open(path: Any, *args: Any, **kwargs: Any) -> int:
        if path == "f.txt":
            (ws / "new.txt").write_text("swapped in\n")
            (ws / "new.txt").replace(ws / "f.txt")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", replacing_open)
    result = await call(tools["read_file"], path="f.txt")
    assert result.is_error
    assert result.content == "'f.txt' was replaced while it was being opened; try again"


async def test_missing_files_and_bad_input(tools: dict[str, Tool]) -> None:
    missing = await call(tools["read_file"], path="nope.txt")
    assert missing.is_error
    assert "no such file or directory: 'nope.txt'" in missing.content
    empty = await call(tools["read_file"], path="")
    assert empty.content == "validation error: path is required"
    bad = await tools["read_file"].execute(RunContext(), "{not json")
    assert bad.is_error
    assert bad.content.startswith(PARSE_ERROR_PREFIX)


# --- write_file ----------------------------------------------------------------------------


async def test_write_creates_parents_and_reports_bytes(ws: Path, tools: dict[str, Tool]) -> None:
    result = await call(tools["write_file"], path="a/b/c.txt", content="héllo\n")
    target = (ws / "a" / "b" / "c.txt").resolve()
    assert result.content == f"successfully wrote 7 bytes to {target}"
    assert target.read_text() == "héllo\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in target.parent.iterdir()) == ["c.txt"]  # no temp file left


async def test_write_is_atomic_and_keeps_the_mode(ws: Path, tools: dict[str, Tool]) -> None:
    target = ws / "run.sh"
    target.write_text("old")
    target.chmod(0o751)
    inode = target.stat().st_ino
    await call(tools["write_file"], path="run.sh", content="new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert target.stat().st_ino != inode  # a new file was renamed into place


async def test_write_refuses_a_directory(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "d").mkdir()
    result = await call(tools["write_file"], path="d", content="x")
    assert result.is_error
    assert "is a directory" in result.content


# --- edit_file -----------------------------------------------------------------------------


async def test_edit_replaces_one_occurrence_and_keeps_the_mode(
    ws: Path, tools: dict[str, Tool]
) -> None:
    f = ws / "m.py"
    f.write_text("x = 1\ny = 2\n")
    f.chmod(0o600)
    result = await call(tools["edit_file"], path="m.py", old_string="y = 2", new_string="y = 3")
    assert result.content == "successfully edited file"
    assert f.read_text() == "x = 1\ny = 3\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600


async def test_an_ambiguous_match_names_every_line(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "m.py").write_text("a = 1\nb = 2\na = 1\n")
    result = await call(tools["edit_file"], path="m.py", old_string="a = 1", new_string="z")
    assert result.is_error
    assert (
        "old_string is not unique, found 2 occurrences (starting at lines 1, 3)" in result.content
    )
    assert (ws / "m.py").read_text() == "a = 1\nb = 2\na = 1\n"


async def test_a_missing_match_shows_the_nearest_candidates(
    ws: Path, tools: dict[str, Tool]
) -> None:
    source = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    (ws / "m.py").write_text(source)
    result = await call(
        tools["edit_file"], path="m.py", old_string="def g():\n  return 2", new_string="x"
    )
    assert result.is_error
    assert result.content.startswith("old_string not found in file.")
    assert "--- lines 5-6" in result.content
    assert "    return 2" in result.content
    assert result.content.endswith("The file was not changed.")
    assert (ws / "m.py").read_text() == source


def test_nearest_candidates_skips_overlaps_and_weak_matches() -> None:
    text = "alpha beta\ngamma\nalpha betx\nzzz\n"
    found = nearest_candidates(text, "alpha beta")
    assert [(first, last) for first, last, _, _ in found] == [(1, 1), (3, 3)]
    assert nearest_candidates(text, "completely different words here") == []


class CountingMatcher(difflib.SequenceMatcher):  # type: ignore[type-arg]
    """Counts the characters compared (len(a) * len(b) per ratio) by every instance."""

    work = 0
    limit = 0

    def ratio(self) -> float:
        CountingMatcher.work += len(self.a) * len(self.b)
        assert CountingMatcher.work <= CountingMatcher.limit, "the near-match search ran away"
        return super().ratio()


def source_lines(count: int, salt: str) -> list[str]:
    return [
        f"    value_{salt}_{i} = compute({i}, '{salt}' * {i % 7})  # step {i}" for i in range(count)
    ]


@pytest.mark.parametrize(("file_lines", "old_lines"), [(2630, 10), (2630, 100), (20000, 60)])
def test_a_large_miss_is_searched_within_a_fixed_budget(
    monkeypatch: pytest.MonkeyPatch, file_lines: int, old_lines: int
) -> None:
    monkeypatch.setattr(difflib, "SequenceMatcher", CountingMatcher)
    monkeypatch.setattr(CountingMatcher, "work", 0)
    monkeypatch.setattr(CountingMatcher, "limit", MAX_FUZZY_WORK)
    lines = source_lines(file_lines, "a")
    wanted = lines[1500 : 1500 + old_lines]
    wanted[old_lines // 2] = "    a line the model misremembered entirely = 1"
    budget = WorkBudget(MAX_FUZZY_WORK)
    found = nearest_candidates("\n".join(lines), "\n".join(wanted), budget)
    assert found[0][:2] == (1501, 1500 + old_lines)
    assert budget.spent <= MAX_FUZZY_WORK
    assert CountingMatcher.work <= budget.spent


def test_an_adversarial_miss_stays_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(difflib, "SequenceMatcher", CountingMatcher)
    monkeypatch.setattr(CountingMatcher, "work", 0)
    monkeypatch.setattr(CountingMatcher, "limit", MAX_FUZZY_WORK)
    text = "\n".join(("ab" * 1500) for _ in range(300))
    budget = WorkBudget(MAX_FUZZY_WORK)
    nearest_candidates(text, "ba" * 1900, budget)
    assert budget.spent <= MAX_FUZZY_WORK


async def test_a_large_miss_through_the_tool_names_the_region(
    ws: Path, tools: dict[str, Tool]
) -> None:
    lines = source_lines(2630, "b")
    (ws / "big.py").write_text("\n".join(lines) + "\n")
    wanted = [line.replace("compute", "computer") for line in lines[2000:2100]]
    result = await call(
        tools["edit_file"], path="big.py", old_string="\n".join(wanted), new_string="x"
    )
    assert result.is_error
    assert "--- lines 2001-2100 (" in result.content
    assert result.content.endswith("The file was not changed.")


async def test_a_whitespace_only_difference_is_named(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "m.py").write_text("def f():\n    return 1\n")
    result = await call(
        tools["edit_file"], path="m.py", old_string="def f():\n  return 1", new_string="x"
    )
    assert "--- lines 1-2 (differs only in whitespace):" in result.content


async def test_several_edits_apply_in_order_or_not_at_all(ws: Path, tools: dict[str, Tool]) -> None:
    f = ws / "m.txt"
    f.write_text("one two three\n")
    ok = await call(
        tools["edit_file"],
        path="m.txt",
        edits=[
            {"old_string": "one", "new_string": "1"},
            {"old_string": "1 two", "new_string": "1 2"},
        ],
    )
    assert ok.content == "successfully edited file (2 edits applied)"
    assert f.read_text() == "1 2 three\n"
    failed = await call(
        tools["edit_file"],
        path="m.txt",
        edits=[
            {"old_string": "three", "new_string": "3"},
            {"old_string": "four", "new_string": "4"},
        ],
    )
    assert failed.is_error
    assert failed.content.startswith("edit 2 of 2: old_string not found")
    assert f.read_text() == "1 2 three\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"old_string": "", "new_string": "x"}, "old_string is required"),
        ({"old_string": "a", "new_string": "a"}, "identical"),
        ({"old_string": "a", "new_string": "b", "edits": [{"old_string": "a", "new_string": "b"}]},
         "not both"),
    ],
)  # fmt: skip
async def test_edit_input_errors(
    ws: Path, tools: dict[str, Tool], args: dict[str, object], message: str
) -> None:
    (ws / "m.txt").write_text("a\n")
    result = await call(tools["edit_file"], path="m.txt", **args)
    assert result.is_error
    assert message in result.content


async def test_edit_handles_crlf_and_keeps_invalid_bytes(ws: Path, tools: dict[str, Tool]) -> None:
    f = ws / "w.txt"
    f.write_bytes(b"caf\xe9\r\nline two\r\nend\r\n")
    result = await call(
        tools["edit_file"], path="w.txt", old_string="line two\nend", new_string="second\nlast"
    )
    assert not result.is_error, result.content
    assert f.read_bytes() == b"caf\xe9\r\nsecond\r\nlast\r\n"


async def test_edit_refuses_binary_files(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "b.bin").write_bytes(b"a\x00b")
    result = await call(tools["edit_file"], path="b.bin", old_string="a", new_string="b")
    assert result.is_error
    assert "looks binary" in result.content


# --- delete_file, create_directory, list_directory ----------------------------------------


async def test_delete_files_and_directories(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "f.txt").write_text("x")
    (ws / "d" / "e").mkdir(parents=True)
    (ws / "d" / "e" / "g.txt").write_text("x")
    assert (
        await call(tools["delete_file"], path="f.txt")
    ).content == "successfully deleted file: f.txt"
    refused = await call(tools["delete_file"], path="d")
    assert refused.is_error
    assert "pass recursive=true" in refused.content
    assert (ws / "d" / "e" / "g.txt").exists()
    removed = await call(tools["delete_file"], path="d", recursive=True)
    assert removed.content == "successfully deleted directory: d"
    assert not (ws / "d").exists()
    root = await call(tools["delete_file"], path=".", recursive=True)
    assert root.is_error
    assert "workspace root" in root.content
    assert not (await call(tools["write_file"], path="still-here.txt", content="x")).is_error


async def test_create_directory_is_idempotent(ws: Path, tools: dict[str, Tool]) -> None:
    first = await call(tools["create_directory"], path="x/y")
    assert first.content == "successfully created directory: x/y"
    assert not (await call(tools["create_directory"], path="x/y")).is_error
    (ws / "file").write_text("x")
    clash = await call(tools["create_directory"], path="file/sub")
    assert clash.content == "'file/sub': 'file' is a file, not a directory"
    itself = await call(tools["create_directory"], path="file")
    assert itself.content == "'file' is a file, not a directory"


async def test_listing_a_file_says_it_is_a_file(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "f.txt").write_text("x")
    result = await call(tools["list_directory"], path="f.txt")
    assert result.is_error
    assert result.content == "'f.txt' is a file, not a directory"


async def test_list_directory_format(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "b.txt").write_text("12345")
    (ws / "a").mkdir()
    (ws / "link").symlink_to("b.txt")
    listing = await call(tools["list_directory"], path=".")
    lines = listing.content.splitlines()
    assert lines[0].startswith("a\tdir\t")
    assert lines[1] == "b.txt\tfile\t5"
    assert lines[2] == "link\tfile\t5"
    (ws / "empty").mkdir()
    assert (await call(tools["list_directory"], path="empty")).content == ""


def test_policies_and_trust_flags_follow_the_spec(tools: dict[str, Tool]) -> None:
    confirm = {"write_file", "edit_file", "delete_file", "create_directory"}
    for name in confirm:
        assert tools[name].default_policy is ToolPolicy.USER_CONFIRM
        assert tools[name].is_untrusted is False
    for name in ("read_file", "list_directory", "glob", "ripgrep", "web_fetch"):
        assert tools[name].default_policy is ToolPolicy.ALWAYS_ALLOW
        assert tools[name].is_untrusted is True
        assert getattr(tools[name], "read_only", False) is True
    assert tools["bash_exec"].is_untrusted is True
    assert set(tools["read_file"].input_schema["properties"]) >= {"path", "start_line", "end_line"}
    assert tools["read_file"].input_schema["required"] == ["path"]
    assert tools["edit_file"].input_schema["required"] == ["path"]
