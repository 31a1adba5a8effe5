"""The ``sp4rk`` command line: run an agent, watch it, approve, pause, steer and resume it.

``main(argv)`` is the console entry point (``sp4rk`` and ``python -m sp4rk``); see
``sp4rk --help`` and docs/cli.md. Needs the ``cli`` extra (``click`` and ``rich``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence

from sp4rk.cli.errors import (
    EXIT_ERROR,
    EXIT_FINISHED,
    EXIT_PAUSED,
    EXIT_UNFINISHED,
    EXIT_USAGE,
)

#: Ctrl-C before a run started (the shell's convention: 128 + SIGINT).
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sp4rk`` and ``python -m sp4rk``; returns the exit status."""
    try:
        import click

        from sp4rk.cli.app import invoke
    except ImportError as exc:
        return _needs_cli_extra(str(exc))
    # The commands import rich when they run (``--help`` stays light): check it is there.
    if importlib.util.find_spec("rich") is None:
        return _needs_cli_extra("No module named 'rich'")
    try:
        result = invoke(list(argv) if argv is not None else None)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        sys.stderr.write("sp4rk: interrupted before the run started (`sp4rk runs` lists runs)\n")
        return EXIT_INTERRUPTED
    return result if isinstance(result, int) else EXIT_FINISHED


def _needs_cli_extra(why: str) -> int:
    sys.stderr.write(
        f"sp4rk: the command line needs the cli extra: pip install 'sp4rk[cli]' ({why})\n"
    )
    return EXIT_ERROR


__all__ = [
    "EXIT_ERROR",
    "EXIT_FINISHED",
    "EXIT_PAUSED",
    "EXIT_UNFINISHED",
    "EXIT_USAGE",
    "main",
]
