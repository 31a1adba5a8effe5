"""Verify-on-edit: run a trusted check after edits and tell the model how it went.

The command comes from the host's configuration, never from the model. The executor runs it
once per LLM response that successfully wrote or edited a file, and appends the formatted
note to that response's last observation.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sp4rk._internal.proc import allowlisted_environment, run_process
from sp4rk.tools.context import RunContext

#: Default cap on the verification output shown to the model, in characters.
DEFAULT_VERIFY_ON_EDIT_CAP = 4000


@dataclass(slots=True)
class EditVerifyResult:
    """What a verification run produced. ``exit_code=None`` means it never exited normally."""

    output: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    timeout: float = 0.0
    error: BaseException | None = None


EditVerifyRunner = Callable[[RunContext], Awaitable[EditVerifyResult]]


def format_verify_note(result: EditVerifyResult, max_chars: int = 0) -> str:
    """The ``[verify_on_edit]`` note for ``result``, its output capped at ``max_chars``."""
    cap = max_chars if max_chars > 0 else DEFAULT_VERIFY_ON_EDIT_CAP
    out = result.output.strip()
    if len(out) > cap:
        out = f"{out[:cap]}\n[...truncated {len(out) - cap} chars...]"
    if result.error is not None:
        note = f"[verify_on_edit] Could not run the verification command: {result.error}"
        return note + (f"\nOutput:\n{out}" if out else "")
    if result.timed_out:
        limit = f" (limit {format_duration(result.timeout)})" if result.timeout > 0 else ""
        return (
            f"[verify_on_edit] The verification command timed out{limit}. The edit was NOT "
            "verified: re-run the check or raise its timeout.\nPartial output:\n" + out
        )
    if result.exit_code is None or result.exit_code < 0:
        return (
            "[verify_on_edit] The verification command did not complete (blocked or killed, no "
            "exit code). The edit was NOT verified: inspect and re-run it.\n" + out
        )
    if result.exit_code > 0:
        return (
            f"[verify_on_edit] VERIFICATION FAILED (exit {result.exit_code}). Fix the failures "
            "before finishing.\n" + out
        )
    return "[verify_on_edit] Verification passed (exit 0). Output:\n" + out


def format_duration(seconds: float) -> str:
    """A compact duration such as ``500ms``, ``30s`` or ``1m30s``."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    sec_text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{sec_text}"
    if minutes:
        return f"{minutes}m{sec_text}"
    return sec_text


def command_verify_runner(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
    max_output_bytes: int = 1024 * 1024,
) -> EditVerifyRunner:
    """A verify runner that executes a trusted command, such as ``["pytest", "-x", "-q"]``.

    Args:
        argv: the command and its arguments, from host configuration (never from the model).
        cwd: where to run it; defaults to the run's workspace, else the current directory.
        timeout: seconds before the command's whole process group is killed.
        env: the complete environment; defaults to the allowlisted one ``bash_exec`` gives
            its commands (``PATH``, ``HOME``, locale … but no API keys or tokens; see
            :func:`sp4rk._internal.proc.allowlisted_environment`).
        max_output_bytes: output kept while reading; the rest is dropped, never buffered.

    Raises:
        ValueError: when ``argv`` is empty or ``timeout`` is not positive.
    """
    if not argv:
        raise ValueError("command_verify_runner needs a non-empty argv list")
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    command = [str(a) for a in argv]

    async def run(ctx: RunContext) -> EditVerifyResult:
        where = cwd if cwd is not None else ctx.workspace
        try:
            outcome = await run_process(
                command,
                cwd=os.fspath(where) if where is not None else None,
                env=env if env is not None else allowlisted_environment(),
                timeout=timeout,
                max_output_bytes=max_output_bytes,
            )
        except OSError as exc:
            return EditVerifyResult(error=exc)
        output = outcome.output
        if outcome.truncated_bytes:
            output += f"\n[... {outcome.truncated_bytes} more bytes of output dropped ...]"
        return EditVerifyResult(
            output=output,
            exit_code=outcome.exit_code,
            timed_out=outcome.timed_out,
            timeout=timeout,
        )

    return run
