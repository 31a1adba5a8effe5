"""Processes that leave the group *and* drop the environment marker still die with the command.

Each escape below used to survive ``bash_exec`` (issue 12: 5 of 18). Where PID namespaces
work (Linux, as root or with user namespaces), the command runs in one of its own, which no
process can leave; elsewhere only the process group and the marker are followed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sp4rk._internal import proc
from sp4rk.tools import Tool
from sp4rk.tools.builtins import builtin_tools
from tests.tools.builtin_helpers import by_name, call, named, none_named, token

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="process containment is Linux-only"
)

ESCAPES = {
    "env -i setsid": "env -i setsid bash -c 'exec -a {name} sleep 60' &",
    "unset the marker": "(unset SP4RK_PROCESS_TAG; setsid bash -c 'exec -a {name} sleep 60') &",
    "execve with no environment": (
        'setsid python3 -c \'import os; os.execve("/bin/sleep", ["{name}", "60"], {{}})\' &'
    ),
    "double fork, env -i": "( env -i setsid bash -c 'exec -a {name} sleep 60 &' ) &",
    "nohup env -i": "nohup env -i setsid bash -c 'exec -a {name} sleep 60' >/dev/null 2>&1 &",
}


@pytest.fixture
async def bash(tmp_path: Path) -> Tool:
    if not await proc.namespace_prefix():
        pytest.skip("PID namespaces are unavailable on this machine")
    return by_name(builtin_tools(tmp_path))["bash_exec"]


@pytest.mark.parametrize("escape", ESCAPES.values(), ids=ESCAPES.keys())
async def test_an_escape_that_drops_the_marker_is_killed(bash: Tool, escape: str) -> None:
    name = token()
    command = escape.format(name=name) + " sleep 0.3; echo done"
    result = await call(bash, command=command, timeout=20)
    assert result.content.startswith("done"), result.content
    assert await none_named(name), f"{escape!r} survived the command"


async def test_the_command_cannot_see_this_process(bash: Tool) -> None:
    result = await call(bash, command="ls /proc | grep -c '^[0-9]'; echo $$")
    count, shell_pid = result.content.split()
    assert int(shell_pid) == 2  # PID 1 is the namespace's init
    assert int(count) < 10  # only the command's own processes (and its init) are listed


async def test_exit_codes_and_signals_pass_through_the_namespace(bash: Tool) -> None:
    assert (await call(bash, command="exit 5")).content.endswith("[exit status 5]")
    assert (await call(bash, command="kill -TERM $$")).content.endswith("[killed by signal 15]")


@pytest.fixture
def without_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proc, "_namespace_prefix", [])


@pytest.mark.usefixtures("without_namespaces")
async def test_without_namespaces_the_group_and_marker_still_contain(tmp_path: Path) -> None:
    bash = by_name(builtin_tools(tmp_path))["bash_exec"]
    name = token()
    result = await call(bash, command=f"setsid bash -c 'exec -a {name} sleep 60' & echo ok")
    assert "[1 process still running" in result.content
    assert await none_named(name)
    assert not named(name)
