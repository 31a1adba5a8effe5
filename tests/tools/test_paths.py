"""Workspace confinement: an attack battery that must never escape; a benign set that passes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sp4rk.tools import RunContext, Tool, ToolError
from sp4rk.tools.builtins import builtin_tools, edit_tools, file_tools, search_tools
from sp4rk.tools.builtins.paths import Confinement, Target
from tests.tools.builtin_helpers import CANARY, by_name, call, snapshot


@dataclass
class Layout:
    tmp: Path
    ws: Path
    evil: Path
    outside: Path
    extra: Path
    tools: dict[str, Tool]


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    srv = tmp_path / "srv"
    ws, evil, outside, extra = srv / "ws", srv / "ws-evil", tmp_path / "outside", tmp_path / "extra"
    for d in (ws / "sub", evil, outside / "sub", extra):
        d.mkdir(parents=True)
    (ws / "a.txt").write_text("alpha\n")
    (ws / "sub" / "b.txt").write_text("beta\n")
    (ws / "name with spaces ü.txt").write_text("unicode\n")
    (evil / "secret.txt").write_text(CANARY + "\n")
    (outside / "secret.txt").write_text(CANARY + "\n")
    (outside / "sub" / "b.txt").write_text(CANARY + "\n")
    (extra / "data.txt").write_text("extra data\n")
    (ws / "inner_link").symlink_to("a.txt")
    (ws / "inner_dir_link").symlink_to("sub")
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "link_dir").symlink_to(outside)
    (ws / "rel_up").symlink_to("../../outside")
    (ws / "chain2").symlink_to(outside / "secret.txt")
    (ws / "chain1").symlink_to("chain2")
    (ws / "dangling").symlink_to(outside / "new.txt")
    (ws / "loop").symlink_to("loop")
    tools = by_name(builtin_tools(ws, extra_roots=[extra]))
    return Layout(tmp_path, ws, evil, outside, extra, tools)


def attack_paths(lay: Layout) -> dict[str, str]:
    return {
        "dotdot": "../../outside/secret.txt",
        "dotdot_evil": "../ws-evil/secret.txt",
        "absolute": str(lay.outside / "secret.txt"),
        "prefix_trick": str(lay.evil / "secret.txt"),
        "prefix_trick_dir": str(lay.evil),
        "etc_passwd": "/etc/passwd",
        "root": "/",
        "file_symlink_out": "link_file",
        "dir_symlink_out": "link_dir/secret.txt",
        "dir_symlink_itself": "link_dir",
        "relative_symlink_up": "rel_up/secret.txt",
        "symlink_chain": "chain1",
        "dangling_symlink_out": "dangling",
        "dotdot_inside_then_out": "sub/../../ws-evil/secret.txt",
        "symlink_then_dotdot": "inner_dir_link/../../ws-evil/secret.txt",
        "nul_byte": "a.txt\x00/../../outside/secret.txt",
        "tilde": "~/.bashrc",
        "very_long_path": "a/" * 2100 + "x",
        "very_long_component": "x" * 300,
        "symlink_loop": "loop",
    }


#: Paths whose last component is a link inside the workspace: deleting them removes the link.
LINK_LEAVES = {"file_symlink_out", "symlink_chain", "dangling_symlink_out", "dir_symlink_itself",
               "symlink_loop"}  # fmt: skip


def attack_calls(name: str, path: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "pwned"}),
        ("write_file", {"path": path + "/new.txt", "content": "pwned"}),
        ("edit_file", {"path": path, "old_string": CANARY, "new_string": "pwned"}),
        ("create_directory", {"path": path + "/newdir"}),
        ("list_directory", {"path": path}),
        ("glob", {"pattern": "**", "path": path, "type": "all"}),
        ("ripgrep", {"pattern": "CANARY|root", "path": path}),
        ("bash_exec", {"command": "cat secret.txt; echo pwned > pwned.txt",
                       "working_directory": path}),
        ("delete_file", {"path": path, "recursive": True}),
    ]  # fmt: skip


async def test_attack_battery_has_zero_escapes(layout: Layout) -> None:
    before = {p: snapshot(p) for p in (layout.outside, layout.evil)}
    escapes: list[str] = []
    total = 0
    for name, path in attack_paths(layout).items():
        for tool_name, args in attack_calls(name, path):
            total += 1
            result = await call(layout.tools[tool_name], **args)
            benign_link_delete = tool_name == "delete_file" and name in LINK_LEAVES
            if CANARY in result.content:
                escapes.append(f"{tool_name}({name}) leaked the canary")
            if not result.is_error and not benign_link_delete:
                escapes.append(f"{tool_name}({name}) succeeded: {result.content[:80]!r}")
            for root, state in before.items():
                if snapshot(root) != state:
                    escapes.append(f"{tool_name}({name}) changed {root}")
                    before[root] = snapshot(root)
    assert total == 200
    assert escapes == []


async def test_attack_errors_say_what_is_wrong(layout: Layout) -> None:
    read = layout.tools["read_file"]
    assert "path is outside the session workspace" in (await call(read, path="../x")).content
    assert "NUL byte" in (await call(read, path="a\x00b")).content
    assert "longer than 4096 bytes" in (await call(read, path="a/" * 2100)).content
    assert "longer than 255 bytes" in (await call(read, path="x" * 300)).content
    assert "'~' is not expanded" in (await call(read, path="~/x")).content
    prefix = await call(read, path=str(layout.evil / "secret.txt"))
    assert "outside the session workspace" in prefix.content
    assert str(layout.evil) in prefix.content


def benign_paths(lay: Layout) -> dict[str, tuple[str, str]]:
    return {
        "relative": ("a.txt", "alpha"),
        "dot_slash": ("./a.txt", "alpha"),
        "dotdot_inside": ("sub/../a.txt", "alpha"),
        "absolute_inside": (str(lay.ws / "a.txt"), "alpha"),
        "symlink_inside": ("inner_link", "alpha"),
        "dir_symlink_inside": ("inner_dir_link/b.txt", "beta"),
        "spaces_unicode": ("name with spaces ü.txt", "unicode"),
        "extra_root_absolute": (str(lay.extra / "data.txt"), "extra data"),
        "extra_root_relative": ("../../extra/data.txt", "extra data"),
    }


@pytest.mark.parametrize(
    "case",
    ["relative", "dot_slash", "dotdot_inside", "absolute_inside", "symlink_inside",
     "dir_symlink_inside", "spaces_unicode", "extra_root_absolute", "extra_root_relative"],
)  # fmt: skip
async def test_benign_paths_pass(layout: Layout, case: str) -> None:
    path, expected = benign_paths(layout)[case]
    result = await call(layout.tools["read_file"], path=path)
    assert not result.is_error, result.content
    assert expected in result.content


async def test_benign_writes_edits_and_listing_pass(layout: Layout) -> None:
    tools = layout.tools
    assert not (await call(tools["write_file"], path="new/deep/f.txt", content="x\n")).is_error
    assert not (await call(tools["edit_file"], path="inner_link", old_string="alpha",
                           new_string="ALPHA")).is_error  # fmt: skip
    assert (layout.ws / "a.txt").read_text() == "ALPHA\n"
    assert (layout.ws / "inner_link").is_symlink()
    assert not (await call(tools["create_directory"], path="inner_dir_link/c")).is_error
    assert (layout.ws / "sub" / "c").is_dir()
    listing = await call(tools["list_directory"], path=".")
    assert "a.txt\tfile\t6" in listing.content
    assert "sub\tdir\t" in listing.content
    assert not (await call(tools["write_file"], path=str(layout.extra / "out.txt"),
                           content="ok")).is_error  # fmt: skip


async def test_a_workspace_reached_through_a_symlink_works(layout: Layout) -> None:
    alias = layout.tmp / "ws_alias"
    alias.symlink_to(layout.ws)
    tools = by_name(builtin_tools(alias))
    assert "alpha" in (await call(tools["read_file"], path="a.txt")).content
    assert (await call(tools["read_file"], path="../ws-evil/secret.txt")).is_error


async def test_the_run_context_workspace_overrides_the_bound_one(layout: Layout) -> None:
    tools = by_name(builtin_tools(None))
    no_ws = await call(tools["read_file"], path="a.txt")
    assert no_ws.is_error
    assert "no workspace is configured" in no_ws.content
    ctx = RunContext(workspace=layout.ws)
    assert "alpha" in (await call(tools["read_file"], path="a.txt", ctx=ctx)).content
    assert (await call(tools["read_file"], path="../ws-evil/secret.txt", ctx=ctx)).is_error


async def test_deleting_a_link_never_touches_its_target(layout: Layout) -> None:
    delete = layout.tools["delete_file"]
    result = await call(delete, path="link_file")
    assert (
        result.content == "successfully deleted symbolic link: link_file (its target is untouched)"
    )
    assert not (layout.ws / "link_file").exists()
    assert (layout.outside / "secret.txt").read_text() == CANARY + "\n"
    assert not (await call(delete, path="link_dir/", recursive=True)).is_error
    assert (layout.outside / "sub" / "b.txt").exists()
    assert not (await call(delete, path="inner_link")).is_error
    assert (layout.ws / "a.txt").exists()


class SwappingConfinement(Confinement):
    """Swaps part of the tree for a symlink right after the check: a check-then-use race."""

    def __init__(self, ws: Path, swap: Any) -> None:
        super().__init__(ws)
        self.swap = swap

    def resolve(self, ctx: RunContext, raw: str, *, follow_last: bool = True) -> Target:
        target = super().resolve(ctx, raw, follow_last=follow_last)
        self.swap()
        return target


def swap_dir(ws: Path, outside: Path) -> None:
    (ws / "sub").rename(ws / "sub_real")
    (ws / "sub").symlink_to(outside / "sub")


def swap_file(ws: Path, outside: Path) -> None:
    (ws / "a.txt").unlink()
    (ws / "a.txt").symlink_to(outside / "secret.txt")


def swapping_tools(layout: Layout, swap: Any) -> dict[str, Tool]:
    fs = SwappingConfinement(layout.ws, lambda: swap(layout.ws, layout.outside))
    return by_name([*file_tools(fs), *edit_tools(fs), *search_tools(fs)])


@pytest.mark.parametrize(
    ("swap", "tool_name", "args"),
    [
        (swap_dir, "read_file", {"path": "sub/b.txt"}),
        (swap_dir, "write_file", {"path": "sub/new.txt", "content": "pwned"}),
        (swap_dir, "write_file", {"path": "sub/b.txt", "content": "pwned"}),
        (swap_dir, "edit_file", {"path": "sub/b.txt", "old_string": "b", "new_string": "pwned"}),
        (swap_dir, "delete_file", {"path": "sub/b.txt"}),
        (swap_dir, "delete_file", {"path": "sub/b.txt", "recursive": True}),
        (swap_dir, "list_directory", {"path": "sub"}),
        (swap_dir, "create_directory", {"path": "sub/d"}),
        (swap_dir, "glob", {"pattern": "**", "path": "sub"}),
        (swap_dir, "ripgrep", {"pattern": "CANARY|beta", "path": "sub"}),
        (swap_dir, "ripgrep", {"pattern": "CANARY|beta", "path": "sub/b.txt"}),
        (swap_file, "read_file", {"path": "a.txt"}),
        (swap_file, "write_file", {"path": "a.txt", "content": "pwned"}),
        (swap_file, "edit_file", {"path": "a.txt", "old_string": "T", "new_string": "pwned"}),
        (swap_file, "ripgrep", {"pattern": "CANARY|alpha", "path": "a.txt"}),
    ],
)
async def test_symlink_swaps_between_check_and_use_are_refused(
    layout: Layout, swap: Any, tool_name: str, args: dict[str, Any]
) -> None:
    tools = swapping_tools(layout, swap)
    before = snapshot(layout.outside)
    result = await call(tools[tool_name], **args)
    assert result.is_error, result.content
    assert "symbolic link" in result.content
    assert CANARY not in result.content
    assert snapshot(layout.outside) == before


def swap_inner_dir(ws: Path, outside: Path) -> None:
    (ws / "sub" / "inner").rename(ws / "inner_real")
    (ws / "sub" / "inner").symlink_to(outside / "sub")


async def test_a_recursive_delete_removes_a_link_swapped_into_the_tree(layout: Layout) -> None:
    (layout.ws / "sub" / "inner").mkdir()
    (layout.ws / "sub" / "inner" / "c.txt").write_text("gamma\n")
    tools = swapping_tools(layout, swap_inner_dir)
    before = snapshot(layout.outside)
    result = await call(tools["delete_file"], path="sub", recursive=True)
    assert result.content == "successfully deleted directory: sub"
    assert not (layout.ws / "sub").exists()
    assert snapshot(layout.outside) == before


async def test_glob_and_ripgrep_do_not_follow_links_out(layout: Layout) -> None:
    found = await call(layout.tools["glob"], pattern="**", type="all")
    assert "link_dir/secret.txt" not in found.content
    assert "rel_up/secret.txt" not in found.content
    hits = await call(layout.tools["ripgrep"], pattern="TOP-SECRET")
    assert CANARY not in hits.content
    assert hits.content == "no matches found"


async def test_bash_working_directory_is_confined(layout: Layout) -> None:
    result = await call(layout.tools["bash_exec"], command="pwd", working_directory="link_dir")
    assert result.is_error
    assert result.content.startswith("working_directory rejected:")
    inside = await call(layout.tools["bash_exec"], command="pwd", working_directory="sub")
    assert inside.content.strip() == str(layout.ws / "sub")


def test_confinement_reports_no_workspace_as_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="workspace '/nonexistent-sp4rk-ws' does not exist"):
        Confinement(Path("/nonexistent-sp4rk-ws"))
    fs = Confinement(None)
    with pytest.raises(ToolError, match="no workspace is configured"):
        fs.roots(RunContext())
    missing = RunContext(workspace="/nonexistent-sp4rk-ws")
    with pytest.raises(ToolError, match="'/nonexistent-sp4rk-ws' does not exist"):
        fs.roots(missing)
    with pytest.raises(ToolError, match="contains a NUL byte"):
        fs.roots(RunContext(workspace="/tmp/a\x00b"))
    assert fs.roots(RunContext(workspace=str(tmp_path))) == [tmp_path.resolve()]
