"""ToolResultCache: full-hash keys, prefixes, TTL, coherence, memory bound."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sp4rk.agent import ToolResultCache, compute_tool_result_hash
from sp4rk.tools import result_cache as rc


def test_store_returns_the_full_hash_and_dedupes() -> None:
    cache = ToolResultCache()
    h = cache.store("rg", "abc")
    assert h == compute_tool_result_hash("rg", "abc") and len(h) == 64
    assert cache.store("rg", "abc") == h and len(cache) == 1
    assert cache.store("other", "abc") != h  # the tool is part of the key


def test_prefix_lookup_needs_eight_unique_characters() -> None:
    cache = ToolResultCache()
    h = cache.store("rg", "abc")
    assert cache.get(h) == "abc" and cache.get(h[:8]) == "abc" and cache.get(h[:20]) == "abc"
    assert cache.get(h[:7]) is None and cache.get("") is None
    assert cache.get(h.upper()[:10]) == "abc"


def test_ambiguous_prefixes_resolve_nothing_and_short_hash_grows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = {"one": "deadbeef" + "1" * 56, "two": "deadbeef" + "12" + "0" * 54}
    monkeypatch.setattr(rc, "compute_tool_result_hash", lambda tool, content: fake[content])
    cache = ToolResultCache()
    a, b = cache.store("t", "one"), cache.store("t", "two")
    assert cache.get("deadbeef") is None and cache.get("deadbeef1") is None
    assert cache.get(a) == "one" and cache.get(b) == "two"
    assert cache.short_hash(a) == "deadbeef11" and cache.short_hash(b) == "deadbeef12"


def test_mcp_entries_expire_and_core_entries_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(rc.time, "monotonic", lambda: now[0])
    cache = ToolResultCache(mcp_ttl=1.0)
    mcp = cache.store("search", "from server", source="filesystem")
    core = cache.store("read_file", "local", source="core")
    now[0] += 2
    assert cache.get(mcp) is None and cache.get(core) == "local"
    assert not cache.check_coherence(mcp)
    assert cache.store("search", "from server", source="filesystem") == mcp  # fresh again
    assert cache.get(mcp) == "from server"


def test_storing_the_same_mcp_result_again_renews_its_ttl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(rc.time, "monotonic", lambda: now[0])
    cache = ToolResultCache(mcp_ttl=10.0)
    key = cache.store("search", "same answer", source="filesystem")
    now[0] += 8
    assert cache.store("search", "same answer", source="filesystem") == key  # still live
    now[0] += 8  # 16 s after the first store, 8 s after the second
    assert cache.get(key) == "same answer"
    now[0] += 3
    assert cache.get(key) is None


def test_expired_entries_are_swept_periodically(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(rc.time, "monotonic", lambda: now[0])
    cache = ToolResultCache(mcp_ttl=1.0)
    for i in range(rc.SWEEP_EVERY - 1):
        cache.store("t", f"r{i}", source="srv")
    now[0] = 5
    assert len(cache) == 0  # live count excludes expired entries
    cache.store("t", "trigger", source="core")  # the 100th store sweeps
    assert len(cache._entries) == 1


def test_file_coherence(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("one")
    st = os.stat(target)
    cache = ToolResultCache()
    h = cache.store("read_file", "one", file_path=str(target), mtime=st.st_mtime, size=st.st_size)
    assert cache.check_coherence(h)
    target.write_text("one two")
    assert "has been modified" in cache.coherence_problem(h)
    target.unlink()
    assert "no longer accessible" in cache.coherence_problem(h)
    assert cache.coherence_problem("0" * 64) == "cache entry not found"


def test_memory_bound_drops_the_least_recently_used() -> None:
    cache = ToolResultCache(max_bytes=25)
    a = cache.store("t", "a" * 10)
    b = cache.store("t", "b" * 10)
    assert cache.get(a) is not None  # touch a: b is now the oldest
    cache.store("t", "c" * 10)
    assert cache.get(b) is None and cache.get(a) is not None


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match="mcp_ttl"):
        ToolResultCache(mcp_ttl=-1)
    with pytest.raises(ValueError, match="max_bytes"):
        ToolResultCache(max_bytes=0)
