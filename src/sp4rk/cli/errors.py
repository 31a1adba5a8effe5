"""The command's failures and their exit statuses (0 finished, 3 paused, 4 unfinished)."""

from __future__ import annotations

#: Exit statuses of ``sp4rk run`` and ``sp4rk resume``.
EXIT_FINISHED = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PAUSED = 3
EXIT_UNFINISHED = 4


class CommandError(Exception):
    """A failure the user can fix (configuration, provider, store): one line, exit 1."""

    exit_code = EXIT_ERROR


class UsageProblem(CommandError):
    """Bad input on the command line (an unknown model, a missing workspace): exit 2."""

    exit_code = EXIT_USAGE
