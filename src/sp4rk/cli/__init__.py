"""The ``sp4rk`` command line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sp4rk import __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sp4rk`` and ``python -m sp4rk``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="sp4rk",
        description="sp4rk: a ReAct agent executor. See `make demo` for a full example run.",
    )
    parser.add_argument("--version", action="version", version=f"sp4rk {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0
