"""Import and start-up time: ``import sp4rk.agent`` and ``sp4rk --help``, each in a fresh process.

CPU time (user + system) of the whole process, and its wall time, median of ``--reps`` runs,
run in turn (bare interpreter, import, help, bare, …) so that a change in the machine's load
hits them alike; the bare interpreter's own start-up is reported and subtracted. CPU time is
the number to compare: on the shared development machines the load stretches wall time
(the load average is printed with the numbers).

    cd bench && PYTHONPATH=$PWD/../src python startup.py          # --reps 11
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python (bare)": [sys.executable, "-c", "pass"],
    "import sp4rk.agent": [sys.executable, "-c", "import sp4rk.agent"],
    "sp4rk --help": [sys.executable, "-m", "sp4rk", "--help"],
}


def _once(command: list[str]) -> tuple[float, float]:
    """CPU and wall seconds of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return cpu, wall


def main() -> None:
    """Time every command ``--reps`` times, in turn; print the medians in milliseconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=11, help="runs of each command (default 11)")
    args = parser.parse_args()
    for command in COMMANDS.values():
        _once(command)  # byte-compile and warm the file cache
    load_before = os.getloadavg()[0]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(args.reps):
        for name, command in COMMANDS.items():
            times[name].append(_once(command))
    medians = {
        name: tuple(statistics.median(s[i] for s in samples) for i in (0, 1))
        for name, samples in times.items()
    }
    bare_cpu = medians["python (bare)"][0]
    print(f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    print("| command | CPU ms | CPU ms minus bare python | wall ms |")
    print("|---|---|---|---|")
    for name, (cpu, wall) in medians.items():
        print(f"| {name} | {cpu * 1000:.0f} | {(cpu - bare_cpu) * 1000:.0f} | {wall * 1000:.0f} |")


if __name__ == "__main__":
    main()
