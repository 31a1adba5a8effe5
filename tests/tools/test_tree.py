"""walk_tree: an iterative, descriptor-based walk that goes equally deep on every Python."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sp4rk.tools.builtins.tree import TreeTooDeepError, tree_deeper_than, walk_tree


@pytest.fixture
def top_fd(tmp_path: Path) -> Iterator[int]:
    for rel in ("a/b/c/d", "a/x", "skip/inner", "z"):
        (tmp_path / rel).mkdir(parents=True)
    (tmp_path / "a" / "f.txt").write_text("f")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_top_down_with_pruning_and_symlinks_listed_but_not_entered(top_fd: int) -> None:
    seen: dict[str, tuple[list[str], list[str]]] = {}
    for rel, dirnames, filenames, _ in walk_tree(top_fd):
        seen[rel] = (sorted(dirnames), sorted(filenames))
        if "skip" in dirnames:
            dirnames.remove("skip")
    assert seen[""] == (["a", "link", "skip", "z"], [])
    assert seen["a"] == (["b", "x"], ["f.txt"])
    assert sorted(seen) == ["", "a", "a/b", "a/b/c", "a/b/c/d", "a/x", "z"]  # no link/, skip/


def test_the_depth_cut_walks_the_rest_then_raises(top_fd: int) -> None:
    walked: list[str] = []

    def walk() -> None:
        for rel, _, _, _ in walk_tree(top_fd, max_depth=2):
            walked.append(rel)

    with pytest.raises(TreeTooDeepError, match="deeper than 2 levels"):
        walk()
    assert sorted(walked) == ["", "a", "a/b", "a/x", "skip", "skip/inner", "z"]
    assert tree_deeper_than(top_fd, "a", 2) and not tree_deeper_than(top_fd, "a", 3)


def test_descriptors_are_closed_when_a_walk_stops_early(top_fd: int) -> None:
    before = open_fds()
    walk = walk_tree(top_fd)
    for rel, _, _, _ in walk:
        if rel == "a/b/c":
            assert open_fds() > before  # one per level held while inside
            break
    walk.close()
    assert open_fds() == before
    for _ in walk_tree(top_fd):
        pass
    assert open_fds() == before
