"""The ``sp4rk`` command end to end (in-process ``main``, no terminal): run, resume, runs,
show, tools, approvals without a terminal, verify-on-edit, and the exit statuses."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sp4rk.cli import main
from sp4rk.cli.errors import EXIT_ERROR
from sp4rk.store import SQLiteRunStore
from tests.cli.helpers import (
    SP4RK,
    Sp4rk,
    call,
    command_env,
    done,
    events,
    finish,
    reply,
    write_script,
)


def test_a_scripted_run_finishes_and_everything_is_in_the_store(sp4rk: Sp4rk) -> None:
    (sp4rk.workspace / "notes.txt").write_text("alpha\n")
    replies = [
        reply(call("read_file", path="notes.txt"), content="Reading the notes."),
        reply(call("glob", pattern="*.txt"), call("list_directory", path=".")),
        finish("The notes say alpha."),  # the checklist gate asks once for a checklist
        finish("The notes say alpha."),
    ]
    assert sp4rk.run(replies, "--json") == 0, sp4rk.out + sp4rk.err
    lines = events(sp4rk.out)
    assert all("event" in e for e in lines)
    kinds = [e["event"] for e in lines]
    assert kinds[0] == "run" and kinds.count("step") == 4 and kinds.count("tool_call") == 3
    assert "checklist_gate_nudge" in [e.get("name") for e in lines]
    result = sp4rk.result()
    assert result["finished"] and result["exit_reason"] == "finished"
    assert result["output"] == "The notes say alpha."
    assert set(result) >= {"run_id", "steps", "input_tokens", "output_tokens"}
    run_id = result["run_id"]
    assert lines[0]["run_id"] == run_id

    shown = sp4rk.shown(run_id)
    assert shown["run"]["status"] == "finished"
    assert len(shown["steps"]) == 5  # trajectory entries
    assert (
        result["steps"] == shown["run"]["step_count"] == 4
    )  # model responses, as max_steps counts
    assert shown["steps"][0]["observation"].endswith("alpha\n")
    assert sp4rk("runs", "--json") == 0
    assert [(r["id"], r["status"]) for r in json.loads(sp4rk.out)] == [(run_id, "finished")]

    assert sp4rk("show", run_id) == 0  # readable: the thought, the calls, their results
    assert "Reading the notes." in sp4rk.out and "→ read_file" in sp4rk.out
    assert "output: The notes say alpha." in sp4rk.out
    assert "✗ Finish rejected: " in sp4rk.out  # the checklist gate's refusal looks refused
    assert "✓ Finish" not in sp4rk.out


def test_the_plain_view_shows_the_run_id_at_start_and_end(sp4rk: Sp4rk) -> None:
    assert sp4rk.run([finish("ok")]) == 0
    run_id = SQLiteRunStore(sp4rk.store).get_run("last").id
    assert sp4rk.err.count(run_id) >= 2
    assert sp4rk.out == "ok\n"  # the answer alone on stdout


def test_the_step_limit_ends_a_run_unfinished_and_resume_goes_on(sp4rk: Sp4rk) -> None:
    replies = [reply(call("glob", pattern=f"*.{n}")) for n in ("a", "b", "c")] + done()
    assert sp4rk.run(replies, "--max-steps", "2", "--json") == 4
    result = sp4rk.result()
    assert result["exit_reason"] == "step_limit" and not result["finished"]
    assert sp4rk("resume", result["run_id"], "--max-steps", "10", "--json") == 0, sp4rk.out
    assert sp4rk.result()["finished"]
    assert sp4rk.shown(result["run_id"])["run"]["status"] == "finished"


def test_without_a_terminal_approvals_are_denied_and_the_model_told_why(sp4rk: Sp4rk) -> None:
    replies = [reply(call("write_file", path="out.txt", content="x")), finish()]
    assert sp4rk.run(replies, "--json") == 0
    assert not (sp4rk.workspace / "out.txt").exists()
    approvals = [e for e in events(sp4rk.out) if e["event"] == "approval"]
    assert approvals[0]["decision"] == "denied" and approvals[0]["by"] == "no terminal"
    observation = sp4rk.shown("last")["steps"][0]["observation"]
    assert "no one is at a terminal to approve it" in observation


def test_approve_never_denies_and_auto_approves_loudly_with_an_audit_trail(sp4rk: Sp4rk) -> None:
    replies = [reply(call("write_file", path="out.txt", content="x")), finish()]
    assert sp4rk.run(replies, "--approve", "never") == 0
    assert not (sp4rk.workspace / "out.txt").exists()
    assert "--approve never" in sp4rk.shown("last")["steps"][0]["observation"]

    assert sp4rk.run(replies, "--approve", "auto") == 0
    assert (sp4rk.workspace / "out.txt").read_text() == "x"
    assert "WITHOUT asking you" in sp4rk.err and "APPROVED AUTOMATICALLY" in sp4rk.err
    run_id = SQLiteRunStore(sp4rk.store).get_run("last").id
    audit = sp4rk.store.parent / "audit" / f"{run_id}.jsonl"
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["tool"], e["decision"]) for e in entries] == [("write_file", "approved")]


def test_resume_with_a_message_delivers_it_to_the_model(sp4rk: Sp4rk) -> None:
    replies = [reply(call("glob", pattern="*")), reply(call("glob", pattern="*.md")), *done()]
    assert sp4rk.run(replies, "--max-steps", "1", "--json") == 4
    run_id = sp4rk.result()["run_id"]
    assert sp4rk("resume", run_id, "look at the docs too", "--max-steps", "5", "--json") == 0
    delivered = [e["text"] for e in events(sp4rk.out) if e["event"] == "message_delivered"]
    assert delivered == ["look at the docs too"]
    steps = sp4rk.shown(run_id)["steps"]
    users = [s["user_nudge"] for s in steps if s["nudge_kind"] == "user"]
    assert users == ["look at the docs too"]


def test_verify_runs_after_each_edit_and_the_model_sees_the_result(sp4rk: Sp4rk) -> None:
    (sp4rk.workspace / "a.py").write_text("x = 1\n")
    edit = call("edit_file", path="a.py", old_string="x = 1", new_string="x = 2")
    replies = [reply(edit), finish()]
    assert sp4rk.run(replies, "--approve", "auto", "--verify", "echo checked; exit 3") == 0
    observation = sp4rk.shown("last")["steps"][0]["observation"]
    assert "VERIFICATION FAILED (exit 3)" in observation and "checked" in observation


def test_a_system_prompt_file_reaches_the_model(sp4rk: Sp4rk, tmp_path: Path) -> None:
    prompt = tmp_path / "system.md"
    prompt.write_text("You are terse.")
    assert sp4rk.run([finish()], "--system", str(prompt)) == 0
    record = SQLiteRunStore(sp4rk.store).get_run("last")
    assert record.settings["system_prompt"] == "You are terse."


def test_workspace_configuration_sets_the_model_and_limits(sp4rk: Sp4rk) -> None:
    script = write_script(sp4rk.tmp / "s.json", [reply(call("glob", pattern="*"))] * 3)
    (sp4rk.workspace / "sp4rk.toml").write_text(
        f'model = "scripted:{script}"\nmax_steps = 1\napprove = "never"\n'
    )
    assert sp4rk("run", "go", "-w", str(sp4rk.workspace), "--json") == 4
    assert sp4rk.result()["exit_reason"] == "step_limit"


def test_pyproject_tool_section_is_read_too(sp4rk: Sp4rk) -> None:
    (sp4rk.workspace / "pyproject.toml").write_text('[tool.sp4rk]\nmax_steps = "many"\n')
    assert sp4rk("run", "go", "-w", str(sp4rk.workspace)) == 1
    assert "max_steps must be an integer" in sp4rk.err


def test_tools_lists_the_builtins_with_policies_and_traits(sp4rk: Sp4rk) -> None:
    assert sp4rk("tools", "--json") == 2  # tools takes no --store: a usage error
    assert main(["tools", "--json", "-w", str(sp4rk.workspace)]) == 0
    listed = {t["name"]: t for t in json.loads(sp4rk.capsys.readouterr().out)["tools"]}
    assert listed["write_file"]["policy"] == "user_confirm"
    assert "read_only" in listed["read_file"]["traits"]
    assert listed["bash_exec"]["untrusted"] is True


def test_no_arguments_prints_help_and_version_works(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "sp4rk run" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert "sp4rk" in capsys.readouterr().out
    assert main(["run", "--help"]) == 0
    assert "Exit status" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["run", "--help"], ["batch", "-h"]])
def test_help_and_version_load_none_of_the_work(argv: list[str]) -> None:
    # Commands import the agent, the stores, the tools and the terminal view when they run.
    code = (
        f"import sys\nfrom sp4rk.cli import main\nassert main({argv!r}) == 0\n"
        "heavy = ('sp4rk.agent', 'sp4rk.store', 'sp4rk.tools', 'sp4rk.batch', 'rich', 'asyncio')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=command_env(), check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_command_without_rich_says_which_extra_to_install() -> None:
    code = (
        "import sys\nsys.modules['rich'] = None\nfrom sp4rk.cli import main\n"
        "raise SystemExit(main(['runs']))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=command_env()
    )
    assert out.returncode == EXIT_ERROR, out.stderr
    assert "needs the cli extra: pip install 'sp4rk[cli]'" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_batch_commands_approvals_are_the_batch_runners() -> None:
    from sp4rk.batch import APPROVE_MODES
    from sp4rk.cli import batch_command

    assert batch_command.APPROVE_MODES == APPROVE_MODES


def test_mcp_servers_from_the_configuration_are_listed_and_offered(sp4rk: Sp4rk) -> None:
    # In subprocesses: a stdio server inherits the command's stderr, which pytest captures.
    pytest.importorskip("mcp")
    server = Path(__file__).resolve().parents[1] / "tools" / "mcp_demo_server.py"
    (sp4rk.workspace / "sp4rk.toml").write_text(
        f"[mcp.demo]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(server))}]\n"
        '[mcp.gone]\ncommand = "/nonexistent/server"\n'
    )
    listed = json.loads(command("tools", "--json", "-w", str(sp4rk.workspace)).stdout)
    add = next(t for t in listed["tools"] if t["name"] == "add")
    assert add["source"] == "demo" and add["untrusted"] is True
    assert list(listed["unavailable_servers"]) == ["gone"]

    script = write_script(sp4rk.tmp / "mcp.json", [reply(call("add", a=2, b=3)), *done()])
    ran = command(
        "run",
        "add",
        "-w",
        str(sp4rk.workspace),
        "--model",
        f"scripted:{script}",
        "--store",
        str(sp4rk.store),
        "--json",
    )
    assert events(ran.stdout)[-1]["finished"]
    assert "MCP server gone is unavailable" in ran.stdout
    shown = json.loads(command("show", "last", "--json", "--store", str(sp4rk.store)).stdout)
    assert shown["steps"][0]["observation"].startswith("5")


def command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SP4RK, *args],
        env=command_env(),
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def test_a_run_that_died_after_its_finish_ends_with_every_response_counted(
    sp4rk: Sp4rk,
) -> None:
    replies = [reply(call("glob", pattern="*")), *done()]
    assert sp4rk.run(replies, "--json") == 0
    run_id = sp4rk.result()["run_id"]
    responses = sp4rk.result()["steps"]
    # As if the process died after the finish was committed but before the run was marked
    # finished: the count is still the last boundary's, which leaves the finish out.
    with sqlite3.connect(sp4rk.store) as db:
        db.execute(
            "UPDATE runs SET status = 'running', owner = '', step_count = ? WHERE id = ?",
            (responses - 1, run_id),
        )
    assert sp4rk("resume", run_id, "--json") == 0, sp4rk.out
    assert sp4rk.result()["steps"] == responses
    assert sp4rk.shown(run_id)["run"]["step_count"] == responses
