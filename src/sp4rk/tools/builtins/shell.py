"""``bash_exec``: run a shell command in the workspace, hygienically.

- **Own process group, stdin closed, own PID namespace.** A timeout, a cancelled run, or the
  command returning kills every process it left behind, grandchildren and ``setsid``
  escapees included; where Linux allows it the command runs in a PID namespace with its own
  ``/proc``, which no process can leave (``env -i setsid`` included) and in which this
  process, and so its environment, is not visible (:func:`sp4rk._internal.proc.run_process`).
- **Capped output.** stdout and stderr are merged and read as they come; the first
  :data:`HEAD_BYTES` and the last :data:`TAIL_BYTES` are kept, the middle is counted and
  dropped, so ``yes`` cannot fill memory.
- **Allowlisted environment.** The child sees only
  :data:`~sp4rk._internal.proc.ENV_ALLOWLIST` (plus what the host adds): API keys and tokens
  in the parent's environment are not inherited.
- **Confined working directory.** It must be inside the workspace or an extra root.
- **Approval by rule set.** The tool's policy is ``ALWAYS_ALLOW``, and it is a
  :class:`~sp4rk.tools.base.ToolJudge`: :meth:`ShellTool.judge` applies
  :func:`~sp4rk.tools.builtins.shell_rules.judge_command`, and ``Registry.review`` turns a
  flagged call (network, system changes, paths outside the workspace) into one that needs a
  human's confirmation, with the rules' reason handed to the HITL handler
  (``RunContext.tool_review``). ``Registry.set_policy("bash_exec", ToolPolicy.USER_CONFIRM)``
  asks for every command; ``confirm_risky=False`` turns the rule set off.
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sp4rk._internal.proc import ProcessOutcome, allowlisted_environment, run_process
from sp4rk.tools.base import Tool, ToolError, ToolResult, ToolTraits
from sp4rk.tools.builtins.paths import Confinement
from sp4rk.tools.builtins.shell_rules import MAX_COMMAND_BYTES, ShellVerdict, judge_command
from sp4rk.tools.context import RunContext
from sp4rk.tools.function import FunctionTool
from sp4rk.tools.tool_input import parse_tool_input

#: Seconds a command may run when the model gives no timeout.
DEFAULT_TIMEOUT = 60.0
#: The longest timeout a model may ask for; longer requests are cut to this.
MAX_TIMEOUT = 120.0
#: Output kept from the start and from the end of a command's output.
HEAD_BYTES = 256 * 1024
TAIL_BYTES = 64 * 1024


def child_environment(cwd: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a command runs with: the allowlist, fixed settings, ``PWD``, ``extra``."""
    return allowlisted_environment({"PWD": cwd, **(extra or {})})


class ShellTool(FunctionTool[..., Awaitable[ToolResult]]):
    """``bash_exec``: a function tool whose calls are judged by the shell rule set."""

    def __init__(
        self,
        fn: Callable[..., Awaitable[ToolResult]],
        *,
        verdict: Callable[[RunContext, Any], str],
        assess: Callable[[RunContext, Any], str],
    ) -> None:
        super().__init__(
            fn, name="bash_exec", untrusted=True, traits=ToolTraits(reads_workspace=True)
        )
        self._verdict = verdict
        self._assess = assess

    def judge(self, ctx: RunContext, input: str) -> str:
        """Why the command in ``input`` needs a human's confirmation; ``""`` when it does not.

        Input the tool would refuse anyway (unparseable, no command, a working directory
        outside the workspace) is not flagged: the call fails without running.
        """
        args = _arguments(input)
        return self._verdict(ctx, args) if args is not None else ""

    def risk(self, ctx: RunContext, input: str) -> str:
        """What the rule set finds in the command, whether or not it asks for approval."""
        args = _arguments(input)
        return self._assess(ctx, args) if args is not None else ""


def _arguments(input: str) -> dict[str, Any] | None:
    """The call's arguments, or ``None`` when they do not parse (the call fails anyway)."""
    try:
        return parse_tool_input(input)
    except ValueError:
        return None


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

    def assess(ctx: RunContext, args: Mapping[str, Any]) -> ShellVerdict | None:
        command, where = args.get("command"), args.get("working_directory") or "."
        if not isinstance(command, str) or not isinstance(where, str):
            return None
        if _too_long(command):
            return None  # refused without running
        try:
            roots = fs.roots(ctx)
            cwd = fs.resolve(ctx, where)
        except ToolError:
            return None
        environment = child_environment(str(cwd.path), env)
        return judge_command(command, roots=roots, cwd=cwd.path, env=environment)

    def verdict(ctx: RunContext, args: Mapping[str, Any]) -> str:
        found = assess(ctx, args) if confirm_risky else None
        return found.reason if found is not None else ""

    def risk(ctx: RunContext, args: Mapping[str, Any]) -> str:
        found = assess(ctx, args)
        return found.risk if found is not None else ""

    async def bash_exec(
        ctx: RunContext, command: str, timeout: float = DEFAULT_TIMEOUT, working_directory: str = ""
    ) -> ToolResult:
        """Run a bash command in the workspace; stdout and stderr come back combined.

        stdin is closed (nothing can prompt), the environment holds no credentials, and
        the command with everything it started is killed at the timeout; background
        processes still running when it returns are killed too. Commands that reach the
        network, change the system, or touch paths outside the workspace need the user's
        approval. Long output keeps its beginning and end.

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
        if _too_long(command):
            raise ToolError(
                f"invalid command: longer than {MAX_COMMAND_BYTES} bytes, more than the system "
                "accepts; write a script file with write_file and run that"
            )
        limit = min(timeout if timeout > 0 else DEFAULT_TIMEOUT, max_timeout)
        try:
            cwd = fs.resolve(ctx, working_directory or ".")
        except ToolError as exc:
            raise ToolError(f"working_directory rejected: {exc}") from None
        if not cwd.path.is_dir():
            raise ToolError(f"working_directory rejected: {cwd.display!r} is not a directory")
        # The registry asked a human when the judge flagged this call; the same rules run
        # here again on the validated input, so nothing unjudged runs unapproved.
        if not ctx.tool_call_approved:
            reason = verdict(ctx, {"command": command, "working_directory": working_directory})
            if reason:
                raise ToolError(
                    f"Not run: this command needs the user's approval because {reason}, and "
                    "it was not approved. Use commands that stay inside the workspace and "
                    "offline, or explain in your answer why this one is necessary."
                )
        outcome = await run_process(
            [shell, "-c", command],
            cwd=str(cwd.path),
            env=child_environment(str(cwd.path), env),
            timeout=limit,
            max_output_bytes=HEAD_BYTES,
            tail_bytes=TAIL_BYTES,
            contain=True,
        )
        return format_outcome(outcome, limit)

    return [ShellTool(bash_exec, verdict=verdict, assess=risk)]


def format_outcome(outcome: ProcessOutcome, limit: float) -> ToolResult:
    """The observation for a finished (or killed) command."""
    text = outcome.output
    if outcome.truncated_bytes:
        text += f"\n[... {outcome.truncated_bytes} bytes of output omitted ...]\n"
    text += outcome.tail
    count = outcome.leftovers
    if outcome.timed_out:
        started = f" (with {_processes(count)} it started)" if count else ""
        text += (
            f"\n[Process killed: timeout exceeded after {limit:g}s. The command was killed"
            f"{started}. Output so far is shown above.]"
        )
        return ToolResult(text, is_error=True)
    if count:
        text += (
            f"\n[{_processes(count)} still running when the command finished "
            f"{'was' if count == 1 else 'were'} killed. Run servers and other long-lived "
            "programs in the foreground, with a timeout.]"
        )
    code = outcome.exit_code
    if code is None or code == 0:
        return ToolResult(text)
    if code < 0:
        return ToolResult(text + f"\n[killed by signal {-code}]", is_error=True)
    return ToolResult(text + f"\n[exit status {code}]", is_error=True)


def _too_long(command: str) -> bool:
    return len(command.encode("utf-8", "surrogatepass")) > MAX_COMMAND_BYTES


def _processes(count: int) -> str:
    return "1 process" if count == 1 else f"{count} processes"
