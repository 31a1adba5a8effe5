"""Verify-on-edit: one run per response that edited, note on the group's last observation."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from sp4rk.agent import (
    DEFAULT_VERIFY_ON_EDIT_CAP,
    CircuitBreakerConfig,
    EditVerifyResult,
    HITLHandler,
    HITLToolDecision,
    command_verify_runner,
    format_verify_note,
)
from sp4rk.agent.verify import format_duration
from sp4rk.llm.testing import finish_response, text_response, tool_calls_response
from sp4rk.tools import RunContext

from .helpers import run


class Runner:
    def __init__(self, result: EditVerifyResult | None = None) -> None:
        self.calls = 0
        self.result = result or EditVerifyResult(output="all 12 tests passed", exit_code=0)

    async def __call__(self, ctx: RunContext) -> EditVerifyResult:
        self.calls += 1
        return self.result


def edit(path: str = "a.py") -> tuple[str, Any]:
    return ("edit_file", {"path": path, "old_string": "a", "new_string": "b"})


def test_one_edit_runs_the_check_once_and_appends_the_note() -> None:
    runner = Runner()
    result, _, events = run(
        [tool_calls_response(edit()), finish_response("d")],
        setup=lambda ex: ex.set_verify_on_edit(runner),
    )
    assert runner.calls == 1
    obs = result.steps[0].observation
    assert obs.startswith("edited\n\n[verify_on_edit] Verification passed (exit 0)")
    assert "all 12 tests passed" in obs
    assert "[verify_on_edit]" in events.of("tool_result")[0][3]  # visible to event consumers


def test_without_a_runner_nothing_is_appended() -> None:
    result, _, _ = run([tool_calls_response(edit()), finish_response("d")])
    assert result.steps[0].observation == "edited"


def test_several_edits_in_one_response_verify_once_on_the_last_call() -> None:
    runner = Runner()
    both = tool_calls_response(edit(), ("write_file", {"path": "b", "content": "x"}))
    result, _, _ = run([both, finish_response("d")], setup=lambda ex: ex.set_verify_on_edit(runner))
    assert runner.calls == 1
    assert "[verify_on_edit]" not in result.steps[0].observation
    assert "[verify_on_edit]" in result.steps[1].observation


@pytest.mark.parametrize(
    "script",
    [
        [tool_calls_response(("read_file", {"path": "a"})), finish_response("d")],
        [tool_calls_response(("fail", {"q": "edit"})), finish_response("d")],
    ],
)
def test_reads_and_failed_calls_do_not_verify(script: list[Any]) -> None:
    runner = Runner()
    run(script, setup=lambda ex: ex.set_verify_on_edit(runner))
    assert runner.calls == 0


def test_edit_then_finish_in_one_response_puts_the_note_in_the_answer() -> None:
    runner = Runner(EditVerifyResult(output="1 failed", exit_code=1))
    result, _, _ = run(
        [tool_calls_response(edit(), ("finish", {"answer": "done"}))],
        setup=lambda ex: ex.set_verify_on_edit(runner),
    )
    assert runner.calls == 1
    assert result.output.startswith("done\n\n[verify_on_edit] VERIFICATION FAILED (exit 1)")
    assert "VERIFICATION FAILED" in result.steps[0].observation


class RejectBash(HITLHandler):
    async def on_tool_call(
        self, ctx: RunContext, tool_name: str, input: str
    ) -> HITLToolDecision | None:
        return HITLToolDecision(allow=False) if tool_name == "bash_exec" else None


def test_a_rejected_last_call_still_closes_the_group_with_the_note() -> None:
    runner = Runner()
    calls = tool_calls_response(edit(), ("bash_exec", {"command": "rm -rf /"}))
    result, _, _ = run(
        [calls, finish_response("d")],
        hitl=RejectBash(),
        setup=lambda ex: ex.set_verify_on_edit(runner),
    )
    assert runner.calls == 1
    assert result.steps[1].observation.startswith("[Tool call rejected")
    assert "[verify_on_edit]" in result.steps[1].observation


def test_a_breaker_that_skips_the_last_call_still_flushes_the_check() -> None:
    runner = Runner()
    same = ("search", {"q": "same"})
    script = [
        tool_calls_response(edit(), same, same, same, ("search", {"q": "never"})),
        finish_response("d"),
    ]
    result, _, _ = run(script, setup=lambda ex: ex.set_verify_on_edit(runner))
    assert runner.calls == 1
    group = result.steps[:-1]
    assert [s.tool_name for s in group] == ["edit_file", "search", "search", "search"]
    assert group[-1].observation.startswith("Not executed")  # the repeat nudge; 'never' skipped
    assert "[verify_on_edit]" in group[0].observation  # on the edit it verifies (decision 15)


def test_pending_verification_is_flushed_before_an_abort_returns() -> None:
    runner = Runner()
    cfg = CircuitBreakerConfig(fruitless_nudge_threshold=0, fruitless_abort_threshold=1)
    script = [tool_calls_response(edit(), ("empty", {"q": "x"}))]
    result, _, _ = run(script, circuit_breaker=cfg, setup=lambda ex: ex.set_verify_on_edit(runner))
    assert result.output.startswith("Aborted")
    assert runner.calls == 1
    assert "[verify_on_edit]" in result.steps[-1].observation  # the group's last call


def test_a_raising_runner_gives_a_not_verified_note() -> None:
    async def broken(ctx: RunContext) -> EditVerifyResult:
        raise FileNotFoundError("pytest not installed")

    result, _, _ = run(
        [tool_calls_response(edit()), text_response("x"), finish_response("d")],
        setup=lambda ex: ex.set_verify_on_edit(broken),
    )
    assert "Could not run the verification command: pytest not installed" in (
        result.steps[0].observation
    )


def test_note_formats() -> None:
    assert "VERIFICATION FAILED (exit 1)" in format_verify_note(EditVerifyResult(exit_code=1))
    timed_out = format_verify_note(EditVerifyResult(timed_out=True, timeout=90, output="partial"))
    assert "timed out (limit 1m30s)" in timed_out and "NOT verified" in timed_out
    killed = format_verify_note(EditVerifyResult(exit_code=-9))
    assert "did not complete" in killed and "NOT verified" in killed and "FAILED" not in killed
    assert "could not run" in format_verify_note(EditVerifyResult(error=OSError("x"))).lower()
    long = format_verify_note(EditVerifyResult(exit_code=0, output="y" * 10_000), 100)
    assert "[...truncated 9900 chars...]" in long and len(long) < 400
    checks = format_verify_note(EditVerifyResult(exit_code=0, output="✓" * 300), 100)
    assert checks.count("✓") == 100
    checks.encode("utf-8")
    default = format_verify_note(EditVerifyResult(exit_code=0, output="z" * 5000), 0)
    assert default.count("z") == DEFAULT_VERIFY_ON_EDIT_CAP


def test_durations() -> None:
    assert [format_duration(s) for s in (0.5, 30, 90, 3600)] == ["500ms", "30s", "1m30s", "1h0m0s"]


async def test_command_runner_reports_exit_codes_and_output(tmp_path: Path) -> None:
    ok = command_verify_runner([sys.executable, "-c", "print('fine')"])
    result = await ok(RunContext(workspace=tmp_path))
    assert result.exit_code == 0 and result.output.strip() == "fine"
    bad = command_verify_runner([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
    result = await bad(RunContext())
    assert result.exit_code == 3 and "boom" in result.output
    missing = command_verify_runner(["/nonexistent/verify-tool"])
    assert (await missing(RunContext())).error is not None


async def test_command_runner_kills_the_whole_group_on_timeout(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    runner = command_verify_runner([sys.executable, "-c", script], timeout=3.0)
    result = await runner(RunContext())
    assert result.timed_out and result.exit_code is None and "started" in result.output
    child = int(marker.read_text())
    await _gone(child)


async def _gone(pid: int) -> None:
    """Wait until process ``pid`` exits (a pidfd becomes readable when it does)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, exited.set_result, None)
        try:
            await asyncio.wait_for(exited, 10)
        finally:
            loop.remove_reader(fd)
    finally:
        os.close(fd)


def test_runner_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="argv"):
        command_verify_runner([])
    with pytest.raises(ValueError, match="timeout"):
        command_verify_runner(["true"], timeout=0)
