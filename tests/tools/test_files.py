"""read_file, write_file, edit_file, delete_file, create_directory and list_directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sp4rk.tools import RunContext, Tool, ToolPolicy
from sp4rk.tools.base import PARSE_ERROR_PREFIX
from sp4rk.tools.builtins import builtin_tools
from sp4rk.tools.builtins.edit import nearest_candidates
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
    (ws / "wide.txt").write_bytes(b"x" * (3 * MAX_LINE_BYTES) + b"\nnext\n")
    result = await call(tools["read_file"], path="wide.txt")
    assert "Lines 1-2 of 2" in result.content
    assert f"[...line 1 truncated at {MAX_LINE_BYTES} bytes...]" in result.content
    assert result.content.endswith("next\n")


async def test_long_files_default_to_2000_lines(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 5001)))
    result = await call(tools["read_file"], path="long.txt")
    assert "Lines 1-2000 of 5000" in result.content
    assert result.content.endswith("[Use start_line=2001 to continue reading]")


async def test_directories_and_fifos_are_not_read(ws: Path, tools: dict[str, Tool]) -> None:
    (ws / "d").mkdir()
    os.mkfifo(ws / "pipe")
    directory = await call(tools["read_file"], path="d")
    assert directory.is_error
    assert "is a directory" in directory.content
    fifo = await call(tools["read_file"], path="pipe")
    assert fifo.is_error
    assert "not a regular file" in fifo.content


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
    assert clash.is_error
    assert "not a directory" in clash.content


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
