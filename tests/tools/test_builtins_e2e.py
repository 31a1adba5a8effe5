"""Every built-in used end to end by a scripted agent in a temporary workspace."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from sp4rk.agent import (
    Executor,
    HITLHandler,
    HITLToolDecision,
    Step,
    TaintPolicy,
    ToolResultCache,
)
from sp4rk.llm.testing import ScriptedLLM, finish_response, tool_calls_response
from sp4rk.memory import ContextWindow
from sp4rk.tools import Registry, RunContext, ToolPolicy
from sp4rk.tools.builtins import builtin_tools, register_builtins
from sp4rk.tools.stores import InMemoryFactStore
from tests.tools.builtin_helpers import PAGE, serve

MCP_SERVER = str(Path(__file__).with_name("mcp_demo_server.py"))
CONFIRM = {"write_file", "edit_file", "delete_file", "create_directory"}


class Approver(HITLHandler):
    """Approves the listed tools explicitly, lets the rest run unapproved, records every call."""

    def __init__(self, approve: set[str], deny: frozenset[str] = frozenset()) -> None:
        self.approve, self.deny = approve, deny
        self.seen: list[str] = []

    async def on_tool_call(self, ctx: RunContext, tool_name: str, input: str) -> Any:
        self.seen.append(tool_name)
        if tool_name in self.deny:
            return HITLToolDecision(allow=False, reason="not today")
        return HITLToolDecision(allow=True) if tool_name in self.approve else None


class ReviewApprover(HITLHandler):
    """Approves exactly the calls a tool's judge flagged, and records what it was told."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, ToolPolicy | None, str]] = []

    async def on_tool_call(self, ctx: RunContext, tool_name: str, input: str) -> Any:
        self.seen.append((tool_name, ctx.tool_policy, ctx.tool_review))
        return HITLToolDecision(allow=True) if ctx.tool_review else None


def unchecked(executor: Executor) -> Executor:
    """The checklist gate is on whenever update_checklist is offered; these runs keep none."""
    executor.set_checklist_gate_enabled(False)
    return executor


def steps_by_tool(steps: list[Step]) -> dict[str, Step]:
    return {s.action.name: s for s in steps if s.action is not None}


async def test_a_scripted_agent_uses_every_builtin(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    app = "def greet(name):\n    return 'Hello, ' + name\n\nprint(greet('world'))\n"
    async with serve() as server:
        server.routes["/docs"] = (200, {"Content-Type": "text/html"}, PAGE)
        registry = Registry()
        register_builtins(registry, ws, allow_hosts=[server.host])
        llm = ScriptedLLM(
            [
                tool_calls_response(
                    ("write_file", {"path": "src/app.py", "content": app}),
                    ("create_directory", {"path": "docs"}),
                ),
                tool_calls_response(
                    ("read_file", {"path": "src/app.py"}),
                    ("list_directory", {"path": "."}),
                    ("glob", {"pattern": "**/*.py"}),
                ),
                tool_calls_response(
                    (
                        "edit_file",
                        {"path": "src/app.py", "old_string": "'Hello, '", "new_string": "'Hi, '"},
                    ),
                    ("ripgrep", {"pattern": "greet", "path": "src"}),
                ),
                tool_calls_response(
                    ("bash_exec", {"command": f"{sys.executable} src/app.py && ls docs; echo ok"})
                ),
                tool_calls_response(
                    ("web_fetch", {"url": f"{server.url}/docs"}),
                    ("update_checklist", {"todo_list": "- [x] write the app\n- [x] run it"}),
                ),
                tool_calls_response(
                    (
                        "store_fact",
                        {
                            "keywords": ["app", "greeting", "style"],
                            "content": "The app greets with 'Hi, '.",
                        },
                    ),
                    ("search_facts", {"keywords": ["greeting"]}),
                ),
                tool_calls_response(
                    ("write_file", {"path": "scratch.txt", "content": "temporary"}),
                    ("delete_file", {"path": "scratch.txt"}),
                ),
                finish_response("The app now greets with Hi."),
            ]
        )
        hitl = Approver(CONFIRM)
        executor = Executor(llm, registry, 20, hitl=hitl)
        ctx = RunContext(workspace=ws, fact_store=InMemoryFactStore())
        result = await executor.run(registry.list(), ContextWindow(task="Fix the greeting"), ctx)

    assert result.finished, result.exit_reason
    assert result.output == "The app now greets with Hi."
    errors = [(s.action.name, s.observation) for s in result.steps if s.action and s.is_error]
    assert errors == []
    steps = steps_by_tool(result.steps)
    used = {name for name in steps if name != "finish"}
    assert used == {t.name for t in builtin_tools(ws)} - {"finish", "tool_result_read"}
    assert (ws / "src" / "app.py").read_text().count("'Hi, '") == 1
    assert (ws / "docs").is_dir()
    assert not (ws / "scratch.txt").exists()
    assert "Hi, world\nok" in steps["bash_exec"].observation
    assert "Getting started" in steps["web_fetch"].observation
    assert "src/app.py:1:5: def greet(name):" in steps["ripgrep"].observation
    assert "The app greets with 'Hi, '." in steps["search_facts"].observation
    for name in ("read_file", "list_directory", "glob", "ripgrep", "bash_exec", "web_fetch"):
        assert steps[name].is_untrusted, name
    for name in ("write_file", "edit_file", "create_directory", "delete_file"):
        assert not steps[name].is_untrusted, name
    prompt = "\n".join(m.content for m in llm.requests[-1].messages)
    assert '<untrusted-content source="web_fetch"' in prompt
    assert hitl.seen[:2] == ["write_file", "create_directory"]
    llm.assert_complete()


async def test_confirmation_fails_closed_and_policies_hold(tmp_path: Path) -> None:
    registry = Registry()
    register_builtins(registry, tmp_path)
    registry.set_policy("delete_file", ToolPolicy.ALWAYS_DENY)
    (tmp_path / "keep.txt").write_text("keep")
    llm = ScriptedLLM(
        [
            tool_calls_response(
                ("write_file", {"path": "a.txt", "content": "x"}),
                ("bash_exec", {"command": "cat /etc/hostname; touch ran.txt"}),
                ("delete_file", {"path": "keep.txt"}),
                ("edit_file", {"path": "keep.txt", "old_string": "keep", "new_string": "gone"}),
            ),
            finish_response("could not"),
        ]
    )
    hitl = Approver(approve={"delete_file"}, deny=frozenset({"edit_file"}))
    result = await unchecked(Executor(llm, registry, 5, hitl=hitl)).run(
        registry.list(), ContextWindow(task="t"), RunContext(workspace=tmp_path)
    )
    steps = steps_by_tool(result.steps)
    assert "needs a human's approval" in steps["write_file"].observation
    assert (
        "needs a human's approval because it names /etc/hostname, which is outside the "
        "workspace" in steps["bash_exec"].observation
    )
    assert "blocked by security policy" in steps["delete_file"].observation
    assert steps["edit_file"].observation.startswith("[Tool call rejected: not today]")
    assert all(steps[n].is_error for n in ("write_file", "bash_exec", "delete_file", "edit_file"))
    assert not (tmp_path / "a.txt").exists()
    assert not (tmp_path / "ran.txt").exists()
    assert (tmp_path / "keep.txt").read_text() == "keep"


async def test_a_flagged_command_is_put_to_the_human_with_the_reason(tmp_path: Path) -> None:
    registry = Registry()
    register_builtins(registry, tmp_path)
    llm = ScriptedLLM(
        [
            tool_calls_response(("bash_exec", {"command": "ls / >/dev/null && echo listed"})),
            tool_calls_response(("bash_exec", {"command": "echo safe"})),
            finish_response("done"),
        ]
    )
    hitl = ReviewApprover()
    result = await unchecked(Executor(llm, registry, 5, hitl=hitl)).run(
        registry.list(), ContextWindow(task="t"), RunContext(workspace=tmp_path)
    )
    observations = [s.observation for s in result.steps if s.action and s.action.name != "finish"]
    assert observations == ["listed\n", "safe\n"]
    assert hitl.seen[:2] == [
        ("bash_exec", ToolPolicy.USER_CONFIRM, "it names /, which is outside the workspace"),
        ("bash_exec", ToolPolicy.ALWAYS_ALLOW, ""),
    ]


async def test_confirm_risky_commands_off_runs_flagged_commands_unasked(tmp_path: Path) -> None:
    registry = Registry()
    register_builtins(registry, tmp_path, confirm_risky_commands=False)
    llm = ScriptedLLM(
        [
            tool_calls_response(("bash_exec", {"command": "ls / >/dev/null && echo listed"})),
            finish_response("done"),
        ]
    )
    hitl = ReviewApprover()
    result = await unchecked(Executor(llm, registry, 5, hitl=hitl)).run(
        registry.list(), ContextWindow(task="t"), RunContext(workspace=tmp_path)
    )
    assert steps_by_tool(result.steps)["bash_exec"].observation == "listed\n"
    assert hitl.seen[0] == ("bash_exec", ToolPolicy.ALWAYS_ALLOW, "")


async def test_mcp_tools_in_a_run_are_untrusted_and_cached_with_the_ttl(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the MCP gateway needs the sp4rk[mcp] extra")
    from sp4rk.tools.mcp import MCPGateway, MCPServerConfig

    errlog = (tmp_path / "mcp.log").open("w")
    config = MCPServerConfig(
        name="demo", command=sys.executable, args=[MCP_SERVER], call_timeout=2.0, stderr=errlog
    )
    try:
        async with MCPGateway([config]) as gateway:
            registry = Registry()
            register_builtins(registry, tmp_path)
            await gateway.register(registry)
            llm = ScriptedLLM(
                [
                    tool_calls_response(("add", {"a": 40, "b": 2})),
                    tool_calls_response(("hang", {})),
                    tool_calls_response(("add", {"a": 1, "b": 1})),
                    finish_response("42"),
                ]
            )
            cache = ToolResultCache(mcp_ttl=123.0)
            executor = unchecked(Executor(llm, registry, 10))
            # The demo server's tools carry no annotations: after the first MCP result, taint
            # would ask a human before each (tests/agent/test_taint.py covers that).
            executor.set_taint_policy(TaintPolicy(trusted_tools=frozenset({"add", "hang"})))
            executor.set_tool_cache(cache)
            result = await executor.run(
                registry.list(), ContextWindow(task="add"), RunContext(workspace=tmp_path)
            )
    finally:
        errlog.close()
    assert result.finished
    add, hang, again = result.steps[:3]
    assert (add.observation, add.is_untrusted) == ("42", True)
    assert hang.is_error
    assert "did not answer within 2s" in hang.observation
    assert again.observation == "2"
    entry = cache.lookup(add.cache_hash)
    assert entry is not None
    assert entry.ttl == 123.0
    offered = {t.name: t.description for t in llm.requests[0].tools}
    assert offered["add"].startswith("[MCP] ")
    assert "read_file" in offered
