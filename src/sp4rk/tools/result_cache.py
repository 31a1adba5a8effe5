"""The tool-result cache: full (pre-truncation) tool outputs, retrievable by hash.

Every result the executor cuts stays here, so the model can page the rest back with the
``tool_result_read`` tool. Keys are the hex SHA-256 of the tool name, a NUL and the content; any
unique prefix of at least :data:`MIN_PREFIX` characters resolves. File-backed entries (from
``read_file``, ``write_file``, ``edit_file``) remember the file's mtime and size so a stale read
is refused; entries from MCP servers expire after ``mcp_ttl`` seconds; and the cache holds at
most ``max_bytes`` of content, dropping the least recently used entries beyond that.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

#: Shortest hash prefix accepted on read and shown to the model.
MIN_PREFIX = 8
#: How many stores between sweeps of expired entries.
SWEEP_EVERY = 100
#: Default memory bound for cached content.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


def compute_tool_result_hash(tool_name: str, content: str) -> str:
    """The key :meth:`ToolResultCache.store` uses for ``content`` from ``tool_name``."""
    # Incremental: joining first would copy a megabyte-sized result once more.
    digest = hashlib.sha256(tool_name.encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(content.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


@dataclass(slots=True)
class CacheEntry:
    """One cached result and what is known about where it came from."""

    hash: str
    tool_name: str
    content: str
    created_at: float
    file_path: str | None = None
    mtime: float | None = None
    size: int | None = None
    ttl: float = 0.0

    def expired(self, now: float) -> bool:
        """Whether a TTL applies and has passed."""
        return self.ttl > 0 and now - self.created_at > self.ttl


class ToolResultCache:
    """Session-scoped, thread-safe store of full tool results.

    Args:
        mcp_ttl: seconds after which entries whose ``source`` is an MCP server expire
            (``0`` keeps them forever). Built-in (``"core"`` or ``""``) entries never expire.
        max_bytes: memory bound for cached content; least recently used entries go first.
    """

    def __init__(self, mcp_ttl: float = 300.0, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if mcp_ttl < 0:
            raise ValueError("mcp_ttl must be >= 0 seconds")
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.mcp_ttl = mcp_ttl
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, CacheEntry] = OrderedDict()
        self._by_prefix: dict[str, set[str]] = {}
        self._bytes = 0
        self._stores = 0
        self._expiring = 0  # entries with a TTL: only those need sweeping
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            now = time.monotonic()
            return sum(1 for e in self._entries.values() if not e.expired(now))

    def store(
        self,
        tool_name: str,
        content: str,
        *,
        file_path: str | None = None,
        mtime: float | None = None,
        size: int | None = None,
        source: str = "",
        digest: str = "",
    ) -> str:
        """Cache ``content`` and return its full hash; storing the same result twice is free.

        ``digest`` is ``compute_tool_result_hash(tool_name, content)`` when the caller has it
        already (the executor does), so a large result is not hashed twice.
        """
        full = digest or compute_tool_result_hash(tool_name, content)
        now = time.monotonic()
        with self._lock:
            self._stores += 1
            existing = self._entries.get(full)
            ttl = self.mcp_ttl if source not in ("", "core") else 0.0
            if existing is not None and not existing.expired(now):
                if existing.ttl:  # the same result came again: it is fresh again
                    existing = self._entries[full] = dataclasses.replace(existing, created_at=now)
                if file_path is not None:  # the same text read again: trust the fresh stat
                    self._entries[full] = dataclasses.replace(
                        existing, file_path=file_path, mtime=mtime, size=size
                    )
                self._entries.move_to_end(full)
                return full
            if existing is not None:
                self._remove(full)
            entry = CacheEntry(full, tool_name, content, now, file_path, mtime, size, ttl)
            self._entries[full] = entry
            bucket = self._by_prefix.get(full[:MIN_PREFIX])
            if bucket is None:
                self._by_prefix[full[:MIN_PREFIX]] = {full}
            else:
                bucket.add(full)
            self._bytes += _size(content)
            if ttl:
                self._expiring += 1
            if self._expiring and self._stores % SWEEP_EVERY == 0:
                self._sweep(now)
            while self._bytes > self.max_bytes and len(self._entries) > 1:
                self._remove(next(iter(self._entries)))
        return full

    def get(self, hash_or_prefix: str) -> str | None:
        """The cached content for a full hash or unique prefix (≥ 8 chars), else ``None``."""
        entry = self.lookup(hash_or_prefix)
        return None if entry is None else entry.content

    def lookup(self, hash_or_prefix: str) -> CacheEntry | None:
        """The entry for a full hash or unique prefix (≥ 8 chars); expired entries are dropped."""
        with self._lock:
            full = self._resolve(hash_or_prefix)
            if full is None:
                return None
            entry = self._entries[full]
            if entry.expired(time.monotonic()):
                self._remove(full)
                return None
            self._entries.move_to_end(full)
            return entry

    def check_coherence(self, hash: str) -> bool:
        """False when the entry is gone or its backing file changed since it was cached.

        ``hash`` may be the full hash or a unique prefix of at least 8 characters.
        """
        return self.coherence_problem(hash) == ""

    def coherence_problem(self, hash_or_prefix: str) -> str:
        """Why the entry can no longer be trusted, or ``""`` when it can."""
        with self._lock:
            full = self._resolve(hash_or_prefix)
            entry = None if full is None else self._entries[full]
        if entry is None:
            return "cache entry not found"
        if entry.expired(time.monotonic()):
            return "cache entry expired"
        if not entry.file_path:
            return ""
        try:
            st = os.stat(entry.file_path)
        except OSError as exc:
            return f"file '{entry.file_path}' is no longer accessible: {exc.strerror or exc}"
        if (entry.mtime is not None and st.st_mtime != entry.mtime) or (
            entry.size is not None and st.st_size != entry.size
        ):
            return f"file '{entry.file_path}' has been modified since the result was cached"
        return ""

    def short_hash(self, full_hash: str) -> str:
        """The shortest prefix (≥ 8 chars) of ``full_hash`` that is unique in the cache."""
        with self._lock:
            bucket = self._by_prefix.get(full_hash[:MIN_PREFIX], set())
            others = [h for h in bucket if h != full_hash]
        n = MIN_PREFIX
        while n < len(full_hash) and any(h.startswith(full_hash[:n]) for h in others):
            n += 1
        return full_hash[:n]

    def _resolve(self, key: str) -> str | None:
        key = key.strip().lower()
        if len(key) < MIN_PREFIX:
            return None
        if key in self._entries:
            return key
        matches = [h for h in self._by_prefix.get(key[:MIN_PREFIX], ()) if h.startswith(key)]
        return matches[0] if len(matches) == 1 else None

    def _remove(self, full: str) -> None:
        entry = self._entries.pop(full)
        self._bytes -= _size(entry.content)
        if entry.ttl:
            self._expiring -= 1
        bucket = self._by_prefix.get(full[:MIN_PREFIX])
        if bucket is not None:
            bucket.discard(full)
            if not bucket:
                del self._by_prefix[full[:MIN_PREFIX]]

    def _sweep(self, now: float) -> None:
        for full in [h for h, e in self._entries.items() if e.expired(now)]:
            self._remove(full)


def _size(content: str) -> int:
    """UTF-8 size of ``content`` (cheap for ASCII, the common case)."""
    return len(content) if content.isascii() else len(content.encode("utf-8", "surrogatepass"))
