"""bash_exec: process groups, timeouts, capped output, a clean environment and the rule set."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from sp4rk.agent import command_verify_runner
from sp4rk.tools import Registry, RunContext, Tool, ToolPolicy
from sp4rk.tools.builtins import Confinement, builtin_tools, judge_command, shell_tools
from sp4rk.tools.builtins.shell import HEAD_BYTES, TAIL_BYTES, ShellTool
from tests.tools.builtin_helpers import by_name, call, named, none_named, token


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return tmp_path.resolve()


@pytest.fixture
def bash(ws: Path) -> Tool:
    return by_name(builtin_tools(ws))["bash_exec"]


def read_if_there(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


async def file_appears(path: Path, within: float = 10.0) -> str:
    deadline = time.monotonic() + within
    while not (text := read_if_there(path)):
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.02)
    return text


async def test_a_timeout_kills_the_whole_group(bash: Tool) -> None:
    name = token()
    result = await call(bash, command=f"exec -a {name} sleep 60 & exec sleep 60", timeout=1)
    assert result.is_error
    assert result.content.endswith(
        "[Process killed: timeout exceeded after 1s. The command was killed (with 1 process "
        "it started). Output so far is shown above.]"
    )
    assert await none_named(name)


async def test_cancellation_kills_the_whole_group(ws: Path, bash: Tool) -> None:
    name = token()
    task = asyncio.create_task(
        call(bash, command=f"exec -a {name} sleep 60 & echo started > started; wait", timeout=60)
    )
    await file_appears(ws / "started")
    assert named(name)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await none_named(name)


async def test_background_processes_do_not_outlive_the_command(bash: Tool) -> None:
    name = token()
    result = await call(bash, command=f"exec -a {name} sleep 60 >/dev/null 2>&1 & echo ok")
    assert not result.is_error
    assert "[1 process still running when the command finished was killed." in result.content
    assert await none_named(name)


async def test_setsid_escapees_are_killed_too(bash: Tool) -> None:
    name = token()
    command = f"setsid bash -c 'exec -a {name} sleep 60' >/dev/null 2>&1 </dev/null & echo ok"
    result = await call(bash, command=command)
    assert not result.is_error, result.content
    assert "[1 process still running" in result.content
    assert await none_named(name)


async def test_a_background_job_holding_the_output_does_not_hold_up_the_result(
    bash: Tool,
) -> None:
    started = time.monotonic()
    result = await call(bash, command="sleep 30 & echo started", timeout=20)
    assert not result.is_error, result.content
    assert result.content.startswith("started\n")
    assert "[1 process still running when the command finished was killed." in result.content
    assert time.monotonic() - started < 10  # the exit, not the timeout, ended the wait


async def test_a_setsid_job_holding_the_output_is_killed(bash: Tool) -> None:
    name = token()
    result = await call(bash, command=f"setsid bash -c 'exec -a {name} sleep 30' & echo ok")
    assert not result.is_error, result.content
    assert "[1 process still running" in result.content
    assert await none_named(name)


async def test_the_command_exit_code_survives_leftover_processes(bash: Tool) -> None:
    result = await call(bash, command="sleep 30 & exit 4", timeout=20)
    assert result.is_error
    assert "[1 process still running when the command finished was killed." in result.content
    assert result.content.endswith("[exit status 4]")


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


async def test_the_verify_runner_gets_the_same_clean_environment(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-verify-1234567890")
    printenv = [sys.executable, "-c", "import os; print(sorted(os.environ))"]
    result = await command_verify_runner(printenv)(RunContext(workspace=ws))
    names = set(ast.literal_eval(result.output))
    assert "OPENAI_API_KEY" not in names
    assert {"PATH", "TERM", "GIT_TERMINAL_PROMPT"} <= names
    chosen = command_verify_runner(printenv, env={"ONLY": "this", "PATH": os.defpath})
    given = set(ast.literal_eval((await chosen(RunContext())).output))
    assert "ONLY" in given
    assert "TERM" not in given  # env= replaces the default entirely


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


def review(registry: Registry, command: str, **extra: str) -> tuple[ToolPolicy, str]:
    result = registry.review(RunContext(), "bash_exec", json.dumps({"command": command, **extra}))
    assert result is not None
    return result.policy, result.reason


async def test_the_registry_asks_a_human_for_flagged_commands(ws: Path, bash: Tool) -> None:
    registry = Registry([bash])
    assert isinstance(bash, ShellTool)
    assert review(registry, "ls -la") == (ToolPolicy.ALWAYS_ALLOW, "")
    policy, reason = review(registry, "curl https://example.com")
    assert (policy, reason) == (ToolPolicy.USER_CONFIRM, "curl reaches the network")
    ctx_input = json.dumps({"command": "cat /etc/hostname >/dev/null; echo ran"})
    refused = await registry.execute(RunContext(), "bash_exec", ctx_input)
    assert refused.is_error
    assert "needs a human's approval because it names /etc/hostname" in refused.content
    approved = await registry.execute(RunContext(tool_call_approved=True), "bash_exec", ctx_input)
    assert approved.content == "ran\n"


def test_the_judge_follows_the_working_directory_and_skips_bad_input(ws: Path, bash: Tool) -> None:
    (ws / "sub").mkdir()
    registry = Registry([bash])
    assert review(registry, "cat ../x", working_directory="sub") == (ToolPolicy.ALWAYS_ALLOW, "")
    assert review(registry, "cat ../x")[0] is ToolPolicy.USER_CONFIRM
    assert isinstance(bash, ShellTool)
    for raw in (
        "{not json",
        "[1]",
        '{"command": 5}',
        '{"command": "ls", "working_directory": "/"}',
    ):
        assert bash.judge(RunContext(), raw) == ""  # the call fails without running


def test_switching_the_rule_set_off_disables_the_judge(ws: Path) -> None:
    bash = by_name(shell_tools(Confinement(ws), confirm_risky=False))["bash_exec"]
    assert review(Registry([bash]), "curl https://example.com") == (ToolPolicy.ALWAYS_ALLOW, "")


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
        # directory changes
        ("cd && cat .ssh/id_rsa", "cd without a directory goes to the home directory"),
        ("cd; ls", "cd without a directory goes to the home directory"),
        ("cd - && ls", "cd - returns to a directory the rules cannot see"),
        ("pushd; ls", "pushd without a directory"),
        ("popd && ls", "popd returns to a directory"),
        ("pushd /etc", "names /etc"),
        ("mkdir -p a/b && cd a/b && cat ../../../x", "names ../../../x"),
        ("cd sub && cat x", ""),
        ("cd sub; cat ../x", "names ../x"),
        ("cd sub && cd .. && cat ../x", "names ../x"),
        ("for i in 1 2; do cd ..; done; ls", "cd .. inside a loop or function"),
        ("f() { cd ..; }; f; f; ls", "cd .. inside a loop or function"),
        ("cd $X && ls", "computed at run time"),
        # $ in paths and program names
        ("cat $PWD/../x", "names $PWD/../x"),
        ("cat $PWD/src/x", ""),
        ("cat ${PWD%/*}/x", "cannot tell where ${PWD%/*}/x points"),
        ("c${x}url evil.com", "the program name c${x}url is computed"),
        ("a=cu; b=rl; $a$b x", "the program name $a$b is computed"),
        ("$'\\x63url' x", "$'...' quoting"),
        ("cat $'\\x2fetc\\x2fpasswd'", "$'...' quoting"),
        ("X=build; cat $X/../../x", "cannot tell where $X/../../x points"),
        ("cat $(echo -n)/etc/passwd", "cannot tell where"),
        ("rm -rf $TMPDIR/*", "$TMPDIR/*"),
        ("rm -rf $HOME/*", "names $HOME/*, which is outside the workspace"),
        ("$BASH -c 'curl x'", "the program name $BASH is computed"),
        ("for f in *.py; do wc -l $f; done", ""),
        ("echo $PATH $1", ""),
        ("/usr/bin/cu?l x", "the program name /usr/bin/cu?l is computed"),
        ("c{u,}rl x", "the program name c{u,}rl is computed"),
        ("[ -f x ] && echo yes", ""),
        # other processes' secrets
        ("ps axeww", "ps e prints the environment of other processes"),
        ("ps e -p 1", "ps e prints the environment"),
        ("ps -E", "ps e prints the environment"),
        ("ps aux", ""),
        ("ps -ef", ""),
        ("ps -o pid,user,cmd", ""),
        ("env", ""),
        ("cat /proc/1/environ", "reads a process's environment (/proc/…/environ)"),
        ("tr '\\0' '\\n' < /proc/$PPID/environ", "reads a process's environment"),
        (
            "python3 -c \"import os; print(open('/proc/%d/environ' % os.getppid()).read())\"",
            "reads a process's environment",
        ),
        ("python3 -c \"print(open('/proc/self/maps').read())\"", "files under /proc"),
        ("gdb -p 1", "gdb reads the memory of another process"),
        ("strace -p 42", "strace reads the memory"),
        ("gdb ./a.out", ""),
        ("grep -rn environ src", ""),
        # global options, wrappers and attached option values
        ("git -C . push", "git push may reach the network"),
        ("git -c user.name=x fetch", "git fetch may reach the network"),
        ("git --git-dir=.git pull", "git pull may reach the network"),
        ("git -C . status", ""),
        ("command -p curl x", "curl reaches the network"),
        ("command -v curl", ""),
        ("exec -a name wget x", "wget reaches the network"),
        ("busybox wget x", "wget reaches the network"),
        ("toybox nc -l 80", "nc reaches the network"),
        ("uvx ruff", "uvx reaches the network"),
        ("python3 -m http.server", "python -m http.server reaches the network"),
        ("tar -C/etc -cf - .", "names /etc"),
        ("gcc -I../../include x.c", "names ../../include"),
        ("make PREFIX=/usr/local install", "names /usr/local"),
        ("cat /proc/self/cwd/x", "names /proc/self/cwd/x"),
        ("ls -la", ""),
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


@pytest.mark.parametrize("contain", [False, True])
async def test_a_cancelled_command_cannot_run_its_next_command(
    tmp_path: Path, contain: bool
) -> None:
    # Killing `sleep` before its shell would let the shell run `echo late` at once.
    from sp4rk._internal.proc import allowlisted_environment, run_process

    script = "sleep 30 & echo $! > started; wait; echo late > late.txt"
    task = asyncio.create_task(
        run_process(
            ["bash", "-c", script],
            cwd=str(tmp_path),
            env=allowlisted_environment(),
            timeout=60,
            max_output_bytes=1000,
            contain=contain,
        )
    )
    for _ in range(3000):  # until the shell waits for its sleep (at most 30 s)
        if (tmp_path / "started").exists() and (tmp_path / "started").read_text().strip():
            break
        await asyncio.sleep(0.01)
    assert (tmp_path / "started").exists()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # the whole group is dead and reaped when this returns
    assert not (tmp_path / "late.txt").exists()


def _processes_running(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PID namespaces: Linux only")
def test_a_command_dies_with_the_agent_even_by_kill_9(tmp_path: Path) -> None:
    import signal
    import subprocess

    from sp4rk._internal.proc import namespace_prefix

    if not asyncio.run(namespace_prefix()):
        pytest.skip("PID namespaces are unavailable here (the process group is all there is)")
    marker = f"{os.getpid()}.{time.monotonic_ns() % 1000}"  # a unique sleep length
    agent = (  # (the marker is passed reversed: the agent's own command line must not match)
        "import asyncio, sys\n"
        "from sp4rk._internal.proc import allowlisted_environment, run_process\n"
        "command = 'sleep 7' + sys.argv[1][::-1] + '; echo late > late.txt'\n"
        "asyncio.run(run_process(['bash', '-c', command], cwd=sys.argv[2], "
        "env=allowlisted_environment(), timeout=60, max_output_bytes=100, contain=True))\n"
    )
    child = subprocess.Popen([sys.executable, "-c", agent, marker[::-1], str(tmp_path)])
    try:
        for _ in range(3000):  # until the command runs (at most 30 s)
            if _processes_running(f"sleep 7{marker}"):
                break
            time.sleep(0.01)
        assert _processes_running(f"sleep 7{marker}")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    for _ in range(1000):  # the kernel takes the namespace down (at most 10 s)
        if not _processes_running(f"sleep 7{marker}"):
            break
        time.sleep(0.01)
    assert _processes_running(f"sleep 7{marker}") == []
