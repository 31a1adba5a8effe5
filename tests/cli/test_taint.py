"""Taint-aware approvals through the real command: after the run read untrusted content (an
MCP server's result), a risky call needs a human, the prompt says why, ``--approve auto``
says loudly that it approves those too, and every decision is in the audit log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import SP4RK, call, command_env, done, events, reply, write_script
from tests.cli.pty_terminal import Terminal

pytest.importorskip("mcp")
SERVER = Path(__file__).resolve().parents[1] / "tools" / "mcp_demo_server.py"
#: The MCP result taints the run; the write after it needs approval for two reasons.
REPLIES = [reply(call("add", a=2, b=3)), reply(call("write_file", path="sum.txt", content="5"))]
TAINT = "after untrusted content from MCP server 'demo' (add)"


def workspace(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A workspace with the demo MCP server configured, a store, and the run's arguments."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "sp4rk.toml").write_text(
        f"[mcp.demo]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(SERVER))}]\n"
    )
    script = write_script(tmp_path / "script.json", [*REPLIES, *done()])
    store = tmp_path / "runs.db"
    argv = [*SP4RK, "run", "add", "-w", str(ws), "--model", f"scripted:{script}"]
    return ws, store, [*argv, "--store", str(store)]


def audit(store: Path) -> list[dict[str, Any]]:
    (log,) = (store.parent / "audit").glob("*.jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_approve_auto_says_it_approves_calls_after_untrusted_content(tmp_path: Path) -> None:
    ws, store, argv = workspace(tmp_path)
    out = subprocess.run(
        [*argv, "--approve", "auto", "--json"],
        env=command_env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = events(out.stdout)
    warning = next(e["text"] for e in lines if e["event"] == "warning")
    assert "WITHOUT asking you" in warning and "after the run read untrusted content" in warning
    (approval,) = [e for e in lines if e["event"] == "approval"]
    assert approval["tool"] == "write_file" and approval["by"] == "--approve auto"
    assert approval["reason"] == f"its policy asks for confirmation, {TAINT}"
    assert (ws / "sum.txt").read_text() == "5"
    (entry,) = audit(store)
    assert entry["decision"] == "approved" and entry["reason"].endswith(TAINT)

    plain = subprocess.run(
        [*argv, "--approve", "auto"],
        env=command_env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert "APPROVED AUTOMATICALLY" in plain.stderr
    assert "this call came after untrusted content: a prompt injection" in plain.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs a POSIX pseudo-terminal")
def test_the_prompt_names_the_untrusted_source_and_denying_is_audited(tmp_path: Path) -> None:
    ws, store, argv = workspace(tmp_path)
    term = Terminal(argv, command_env(), str(tmp_path))
    term.expect(r"write_file needs your approval: its policy asks for confirmation, after")
    term.expect(r"the run has read untrusted content from MCP server 'demo' \(add\)")
    term.expect(r"prompt injection\) may have asked for this call")
    term.expect(r"\[y\] approve  \[n\] deny")
    term.send("n\r")
    term.expect(r"reason for the model")
    term.send("\r")
    assert term.wait() == 0
    assert not (ws / "sum.txt").exists()
    (entry,) = audit(store)
    assert entry["decision"] == "rejected" and entry["reason"].endswith(TAINT)
    shown = subprocess.run(
        [*SP4RK, "show", "last", "--store", str(store)],
        env=command_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"approvals: {store.parent / 'audit'}" in shown.stdout
