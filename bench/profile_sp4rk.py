"""Profile sp4rk's hot path with cProfile: S2 by default, a shortened S4 with ``--endurance``.

cProfile adds a fixed cost to every Python call, so it overstates code made of many small
calls; read it for where time goes, and ``run.py`` for how much.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats

from anchors.common import S2_RESULT_BYTES, S2_STEPS, S4_RESULT_BYTES, Probe, RunSpec, go_offline


def main() -> None:
    """Run the chosen scenario under the profiler and print the top functions."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endurance", action="store_true", help="S4's configuration")
    parser.add_argument(
        "--store", action="store_true", help="journal the run to an SQLite runs store"
    )
    parser.add_argument("--steps", type=int, help="tool steps (default: 500, or 1500 for S4)")
    parser.add_argument("--sort", default="tottime", help="pstats sort key (default: tottime)")
    parser.add_argument("--top", type=int, default=30, help="functions to print (default: 30)")
    args = parser.parse_args()
    go_offline()
    from contenders import sp4rk_runner

    steps = args.steps or (1500 if args.endurance else S2_STEPS)
    size = S4_RESULT_BYTES if args.endurance else S2_RESULT_BYTES
    spec = RunSpec(steps, size, endurance=args.endurance, store=args.store)
    asyncio.run(sp4rk_runner.prepare(RunSpec(10, size), Probe())())  # warm-up
    run = sp4rk_runner.prepare(spec, Probe())
    profiler = cProfile.Profile()
    profiler.runcall(asyncio.run, run())
    pstats.Stats(profiler).strip_dirs().sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()
