"""``bash_exec``: run a shell command in the workspace, hygienically.

- **Own process group, stdin closed.** A timeout, a cancelled run, or the command returning
  kills the whole group, grandchildren included (:func:`sp4rk._internal.proc.run_process`).
- **Capped output.** stdout and stderr are merged and read as they come; the first
  :data:`HEAD_BYTES` and the last :data:`TAIL_BYTES` are kept, the middle is counted and
  dropped, so ``yes`` cannot fill memory.
- **Allowlisted environment.** The child sees only :data:`ENV_ALLOWLIST` (plus what the host
  adds): API keys and tokens in the parent's environment are not inherited.
- **Confined working directory.** It must be inside the workspace or an extra root.
- **Approval by rule set.** The registry-level policy is ``ALWAYS_ALLOW``; each call is judged
  by :func:`~sp4rk.tools.builtins.shell_rules.judge_command`, and a command the rules flag
  (network, system changes, paths outside the workspace) runs only when the HITL handler
  approved that call (``HITLToolDecision(allow=True)``); otherwise the model is told why it
  did not run. ``Registry.set_policy("bash_exec", ToolPolicy.USER_CONFIRM)`` asks for every
  command; ``confirm_risky=False`` turns the rule set off.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

from sp4rk._internal.proc import ProcessOutcome, run_process
from sp4rk.tools.base import Tool, ToolError, ToolResult
from sp4rk.tools.builtins.paths import Confinement
from sp4rk.tools.builtins.shell_rules import judge_command
from sp4rk.tools.context import RunContext
from sp4rk.tools.function import tool

#: Seconds a command may run when the model gives no timeout.
DEFAULT_TIMEOUT = 60.0
#: The longest timeout a model may ask for; longer requests are cut to this.
MAX_TIMEOUT = 120.0
#: Output kept from the start and from the end of a command's output.
HEAD_BYTES = 256 * 1024
TAIL_BYTES = 64 * 1024
#: Variables a command inherits from the parent environment; nothing else is passed on.
ENV_ALLOWLIST = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
)
#: Set for every command so that tools behave non-interactively.
_FIXED_ENV = {
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "NO_COLOR": "1",
}


def child_environment(cwd: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a command runs with: the allowlist, fixed settings, then ``extra``."""
    env = {k: v for k in ENV_ALLOWLIST if (v := os.environ.get(k)) is not None}
    env.setdefault("PATH", os.defpath)
    env.update(_FIXED_ENV)
    env["PWD"] = cwd
    env.update(extra or {})
    return env


def shell_tools(
    fs: Confinement,
    *,
    env: Mapping[str, str] | None = None,
    confirm_risky: bool = True,
    max_timeout: float = MAX_TIMEOUT,
) -> list[Tool]:
    """``bash_exec`` bound to ``fs``.

    Args:
        fs: the workspace confinement (working directory and the rule set's roots).
        env: variables added to every command's environment (the host's choice; never
            filtered).
        confirm_risky: apply the rule set; ``False`` runs every command unasked.
        max_timeout: the most seconds a command may run.
    """
    shell = shutil.which("bash") or "/bin/sh"

    @tool(name="bash_exec", untrusted=True)
    async def bash_exec(
        ctx: RunContext, command: str, timeout: float = DEFAULT_TIMEOUT, working_directory: str = ""
    ) -> ToolResult:
        """Run a bash command in the workspace; stdout and stderr come back combined.

        stdin is closed (nothing can prompt), the environment holds no credentials, and
        the command with everything it started is killed at the timeout. Commands that
        reach the network, change the system, or touch paths outside the workspace need
        the user's approval. Long output keeps its beginning and end.

        Args:
            ctx: the run context.
            command: the command line, run with bash -c.
            timeout: seconds before the command is killed (default 60, at most 120).
            working_directory: where to run, relative to the workspace (default: its root).
        """
        if not command.strip():
            raise ToolError("validation error: command is required")
        if "\x00" in command:
            raise ToolError("invalid command: it contains a NUL byte")
        limit = min(timeout if timeout > 0 else DEFAULT_TIMEOUT, max_timeout)
        roots = fs.roots(ctx)
        try:
            cwd = fs.resolve(ctx, working_directory or ".")
        except ToolError as exc:
            raise ToolError(f"working_directory rejected: {exc}") from None
        if not cwd.path.is_dir():
            raise ToolError(f"working_directory rejected: {cwd.display!r} is not a directory")
        if confirm_risky and not ctx.tool_call_approved:
            verdict = judge_command(command, roots=roots, cwd=cwd.path)
            if verdict.needs_confirmation:
                raise ToolError(
                    f"bash_exec did not run this command: it needs the user's approval because "
                    f"{verdict.reason}. Prefer commands that stay inside the workspace and "
                    "offline; if this one is necessary, say why, and the host can approve it "
                    "(HITLToolDecision(allow=True))."
                )
        outcome = await run_process(
            [shell, "-c", command],
            cwd=str(cwd.path),
            env=child_environment(str(cwd.path), env),
            timeout=limit,
            max_output_bytes=HEAD_BYTES,
            tail_bytes=TAIL_BYTES,
        )
        return format_outcome(outcome, limit)

    return [bash_exec]


def format_outcome(outcome: ProcessOutcome, limit: float) -> ToolResult:
    """The observation for a finished (or killed) command."""
    text = outcome.output
    if outcome.truncated_bytes:
        text += f"\n[... {outcome.truncated_bytes} bytes of output omitted ...]\n"
    text += outcome.tail
    if outcome.timed_out:
        text += (
            f"\n[Process killed: timeout exceeded after {limit:g}s; the command and every "
            "process it started were stopped. Output so far is shown above.]"
        )
        return ToolResult(text, is_error=True)
    code = outcome.exit_code
    if code is None or code == 0:
        return ToolResult(text)
    if code < 0:
        return ToolResult(text + f"\n[killed by signal {-code}]", is_error=True)
    return ToolResult(text + f"\n[exit status {code}]", is_error=True)
