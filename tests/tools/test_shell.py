"""bash_exec: process groups, timeouts, capped output, a clean environment and the rule set."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from sp4rk.tools import Registry, RunContext, Tool, ToolPolicy
from sp4rk.tools.builtins import Confinement, builtin_tools, judge_command, shell_tools
from sp4rk.tools.builtins.shell import HEAD_BYTES, TAIL_BYTES
from tests.tools.builtin_helpers import by_name, call


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return tmp_path.resolve()


@pytest.fixture
def bash(ws: Path) -> Tool:
    return by_name(builtin_tools(ws))["bash_exec"]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


async def gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def read_if_there(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


async def file_appears(path: Path, within: float = 10.0) -> str:
    deadline = time.monotonic() + within
    while not (text := read_if_there(path)):
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.02)
    return text


async def test_a_timeout_kills_the_whole_group(bash: Tool) -> None:
    result = await call(bash, command="sleep 60 & echo $!; sleep 60", timeout=1)
    assert result.is_error
    assert "[Process killed: timeout exceeded after 1s" in result.content
    child = int(result.content.split()[0])
    assert await gone(child)


async def test_cancellation_kills_the_whole_group(ws: Path, bash: Tool) -> None:
    task = asyncio.create_task(
        call(bash, command="sleep 60 & echo $! > child.pid; wait", timeout=60)
    )
    child = int(await file_appears(ws / "child.pid"))
    assert alive(child)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(child)


async def test_background_processes_do_not_outlive_the_command(bash: Tool) -> None:
    result = await call(bash, command="sleep 60 >/dev/null 2>&1 & echo $!")
    assert not result.is_error
    assert await gone(int(result.content.strip()))


async def test_endless_output_stays_capped(bash: Tool) -> None:
    result = await call(bash, command="yes", timeout=1)
    assert result.is_error
    assert "timeout exceeded" in result.content
    assert "bytes of output omitted" in result.content
    assert len(result.content) < HEAD_BYTES + TAIL_BYTES + 1000


async def test_long_output_keeps_its_beginning_and_end(bash: Tool) -> None:
    result = await call(bash, command="seq 1 200000")
    assert not result.is_error
    assert result.content.startswith("1\n2\n3\n")
    assert result.content.endswith("199999\n200000\n")
    assert "bytes of output omitted" in result.content


async def test_canary_secrets_are_not_inherited(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canaries = {
        "OPENAI_API_KEY": "sk-canary-openai-1234567890",
        "ANTHROPIC_API_KEY": "sk-ant-canary-0987654321",
        "GITHUB_TOKEN": "ghp_canary_token_abcdef",
        "AWS_SECRET_ACCESS_KEY": "aws-canary-secret",
        "MY_SERVICE_PASSWORD": "hunter2-canary",
    }
    for name, value in canaries.items():
        monkeypatch.setenv(name, value)
    bash = by_name(shell_tools(Confinement(ws), env={"EXTRA_FROM_HOST": "yes"}))["bash_exec"]
    result = await call(bash, command="env")
    assert not result.is_error
    for value in canaries.values():
        assert value not in result.content
    env = dict(line.split("=", 1) for line in result.content.splitlines() if "=" in line)
    assert env["PWD"] == str(ws)
    assert env["EXTRA_FROM_HOST"] == "yes"
    assert "PATH" in env


async def test_stdin_is_closed(bash: Tool) -> None:
    result = await call(bash, command='cat; read x; echo "got:$x"', timeout=5)
    assert result.content == "got:\n"


async def test_exit_status_and_signals(bash: Tool) -> None:
    failed = await call(bash, command="echo out; echo err >&2; exit 3")
    assert failed.is_error
    assert failed.content == "out\nerr\n\n[exit status 3]"
    killed = await call(bash, command="kill -9 $$")
    assert killed.is_error
    assert killed.content.endswith("[killed by signal 9]")


async def test_the_timeout_is_capped_by_the_host(ws: Path) -> None:
    bash = by_name(shell_tools(Confinement(ws), max_timeout=0.5))["bash_exec"]
    started = time.monotonic()
    result = await call(bash, command="sleep 30", timeout=600)
    assert time.monotonic() - started < 10
    assert "timeout exceeded after 0.5s" in result.content


@pytest.mark.parametrize(
    ("command", "message"),
    [("", "validation error: command is required"), ("echo a\x00b", "NUL byte")],
)
async def test_bad_commands(bash: Tool, command: str, message: str) -> None:
    result = await call(bash, command=command)
    assert result.is_error
    assert message in result.content


# --- the rule set and approvals --------------------------------------------------------------


async def test_risky_commands_need_approval(ws: Path, bash: Tool) -> None:
    command = "cat /etc/hostname >/dev/null; touch ran.txt"
    refused = await call(bash, approved=False, command=command)
    assert refused.is_error
    assert "needs the user's approval because it names /etc/hostname" in refused.content
    assert not (ws / "ran.txt").exists()
    approved = await call(bash, approved=True, command=command)
    assert not approved.is_error, approved.content
    assert (ws / "ran.txt").exists()


async def test_safe_commands_run_without_approval(ws: Path, bash: Tool) -> None:
    result = await call(
        bash, approved=False, command="mkdir -p out && echo hi > out/x && cat out/x"
    )
    assert result.content == "hi\n"


async def test_the_rule_set_can_be_switched_off(ws: Path) -> None:
    bash = by_name(shell_tools(Confinement(ws), confirm_risky=False))["bash_exec"]
    result = await call(bash, approved=False, command="ls / > /dev/null && echo listed")
    assert result.content == "listed\n"


async def test_registry_policies_still_apply(ws: Path, bash: Tool) -> None:
    registry = Registry([bash])
    assert registry.policy("bash_exec") is ToolPolicy.ALWAYS_ALLOW
    registry.set_policy("bash_exec", ToolPolicy.USER_CONFIRM)
    unconfirmed = await registry.execute(RunContext(), "bash_exec", '{"command": "echo hi"}')
    assert unconfirmed.is_error
    assert "needs a human's approval" in unconfirmed.content
    registry.set_policy("bash_exec", ToolPolicy.ALWAYS_DENY)
    denied = await registry.execute(
        RunContext(tool_call_approved=True), "bash_exec", '{"command": "echo hi"}'
    )
    assert "blocked by security policy" in denied.content


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("ls -la && pytest -q tests", ""),
        ("rm -rf build/ && git status && git diff", ""),
        ("for f in *.py; do wc -l $f; done | sort > counts.txt", ""),
        ("/usr/bin/python3 script.py 2>&1 | tee log.txt", ""),
        ("ls /tmp", "names /tmp"),
        ("curl https://example.com", "curl reaches the network"),
        ("echo hi\nwget x", "wget reaches the network"),
        ("x#; curl evil", "curl reaches the network"),
        ('echo "$(curl x)"', "curl reaches the network"),
        ("echo `nc -l 80`", "nc reaches the network"),
        ('bash -c "ssh host uptime"', "ssh reaches the network"),
        ("nice -n 5 curl x", "curl reaches the network"),
        ("git push origin main", "git push may reach the network"),
        ("python3 -m pip install requests", "pip install may reach the network"),
        ("npm install", "npm install may reach the network"),
        ("echo > /dev/tcp/1.2.3.4/80", "opens a network connection"),
        ("sudo ls", "sudo changes the system"),
        ("apt-get install -y jq", "apt-get changes the system"),
        ("kill 1", "kill changes the system"),
        ("cat /etc/passwd", "names /etc/passwd, which is outside the workspace"),
        ("echo x >/etc/hosts", "names /etc/hosts"),
        ("ls ~/.ssh", "names ~/.ssh"),
        ("cat $HOME/.netrc", "names $HOME/.netrc"),
        ("cat ~root/x", "cannot tell where ~root points"),
        ("cd .. && ls", "names .."),
        ("rm -rf /*", "names /*"),
        ("FOO=/etc/x make", "names /etc/x"),
        ("tool --out=/etc/y", "names /etc/y"),
        ('echo "unbalanced', "cannot be parsed"),
        ("eval $X", "eval runs text"),
    ],
)
def test_the_rule_set(ws: Path, command: str, reason: str) -> None:
    verdict = judge_command(command, roots=[ws], cwd=ws)
    assert verdict.needs_confirmation is bool(reason), verdict.reason
    assert reason in verdict.reason


def test_symlinks_out_of_the_workspace_count_as_outside(
    ws: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (ws / "out").symlink_to(outside)
    verdict = judge_command("rm -rf out/*", roots=[ws], cwd=ws)
    assert verdict.needs_confirmation
    assert "names out/*" in verdict.reason
