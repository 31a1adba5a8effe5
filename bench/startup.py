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


def measure(reps: int) -> dict[str, float]:
    """Medians of ``reps`` runs of every command, in turn: CPU and wall ms, and the load."""
    for command in COMMANDS.values():
        _once(command)  # byte-compile and warm the file cache
    load_before = os.getloadavg()[0]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(reps):
        for name, command in COMMANDS.items():
            times[name].append(_once(command))
    out = {"reps": float(reps), "load_before": load_before, "load_after": os.getloadavg()[0]}
    for name, samples in times.items():
        out[f"{name} cpu_ms"] = statistics.median(s[0] for s in samples) * 1000
        out[f"{name} wall_ms"] = statistics.median(s[1] for s in samples) * 1000
    return out


def main() -> None:
    """Time every command ``--reps`` times, in turn; print the medians in milliseconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=11, help="runs of each command (default 11)")
    args = parser.parse_args()
    times = measure(args.reps)
    bare_cpu = times["python (bare) cpu_ms"]
    print(f"load average {times['load_before']:.1f} before, {times['load_after']:.1f} after")
    print("| command | CPU ms | CPU ms minus bare python | wall ms |")
    print("|---|---|---|---|")
    for name in COMMANDS:
        cpu, wall = times[f"{name} cpu_ms"], times[f"{name} wall_ms"]
        print(f"| {name} | {cpu:.0f} | {cpu - bare_cpu:.0f} | {wall:.0f} |")


if __name__ == "__main__":
    main()
