"""Stage 1 of tool-output truncation: per-tool line and byte limits."""

from __future__ import annotations

from dataclasses import dataclass

from sp4rk._internal.serde import Serializable as _Serializable
from sp4rk._internal.text import byte_len, cut_utf8_bytes, head_lines


@dataclass(slots=True)
class ToolTruncationConfig(_Serializable):
    """Line and byte limits for one tool's output; ``0`` disables a limit."""

    max_lines: int = 0
    max_bytes: int = 0


def default_tool_truncation_config() -> dict[str, ToolTruncationConfig]:
    """The default per-tool limits, as a fresh dict."""
    return {
        "read_file": ToolTruncationConfig(max_lines=50_000),
        "ripgrep": ToolTruncationConfig(max_lines=5_000),
        "glob": ToolTruncationConfig(max_lines=5_000),
        "list_directory": ToolTruncationConfig(max_lines=5_000),
        "web_fetch": ToolTruncationConfig(max_bytes=2 * 1024 * 1024),
        "bash_exec": ToolTruncationConfig(max_lines=10_000),
    }


def apply_line_byte_limits(text: str, config: ToolTruncationConfig | None) -> tuple[str, str]:
    """Apply ``config`` to ``text``; return the kept text and what cut it.

    The second value is ``""`` (nothing cut), ``"lines"`` or ``"bytes"``. Lines are cut
    first, then bytes; a byte cut never splits a UTF-8 code point.
    """
    if config is None:
        return text, ""
    text, lines_cut = head_lines(text, config.max_lines)
    limit = config.max_bytes
    # Every code point is 1-4 bytes: only measure when the text could be over the limit.
    if limit > 0 and len(text) * 4 > limit and byte_len(text) > limit:
        return cut_utf8_bytes(text, limit), "bytes"
    return text, "lines" if lines_cut else ""
