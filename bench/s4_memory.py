"""S4's memory along the run, with and without the runs store (issue 17, item 3: flat memory).

Runs sp4rk in S4's configuration (1 MB results, a 128 000-token window) for ``--steps`` tool
steps, sampling RSS every ``--every`` calls, and prints the samples and the growth between
step 1,000 (after the result cache has filled) and the last step: in all, per step, and as a
share of the RSS at step 1,000. With ``--store`` the run is journaled to an SQLite runs store
in a temporary folder, so completed observations are read back from disk on demand; without
it every observation stays in memory (the default, unchanged).

    python bench/s4_memory.py --steps 4000            # no store
    python bench/s4_memory.py --steps 4000 --store    # with the runs store
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from anchors.common import S4_RESULT_BYTES, S4_STEPS, Probe, RunSpec, go_offline

#: The step from which growth is measured (S4's early window starts here).
FROM_STEP = 1000


def main() -> None:
    """Run once and print the RSS samples and the growth as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=S4_STEPS, help="tool steps (default 10000)")
    parser.add_argument("--every", type=int, default=250, help="RSS sample interval (calls)")
    parser.add_argument("--store", action="store_true", help="journal to an SQLite runs store")
    args = parser.parse_args()
    if args.steps <= FROM_STEP:
        parser.error(f"--steps must be above {FROM_STEP}")
    go_offline()
    from contenders import sp4rk_runner

    probe = Probe(rss_every=args.every)
    spec = RunSpec(args.steps, S4_RESULT_BYTES, endurance=True, store=args.store)
    started = time.perf_counter()
    asyncio.run(sp4rk_runner.prepare(spec, probe)())
    wall = time.perf_counter() - started
    samples = dict(probe.rss_samples)
    first = min(step for step in samples if step >= FROM_STEP)
    last = max(samples)
    growth = samples[last] - samples[first]
    print(
        json.dumps(
            {
                "store": args.store,
                "steps": args.steps,
                "wall_s": round(wall, 1),
                "rss_mb": {str(k): round(v, 1) for k, v in sorted(samples.items())},
                "from_step": first,
                "to_step": last,
                "growth_mb": round(growth, 1),
                "growth_kb_per_step": round(growth * 1024 / (last - first), 2),
                "growth_percent": round(growth * 100 / samples[first], 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
