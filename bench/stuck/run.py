"""``make bench-stuck``: every stuck shape through sp4rk and OpenHands' StuckDetector, side by side.

Scripted and offline: a stubborn scripted model, in-memory tools, no network (IP connections are
refused). For each shape it records whether the run was stopped, after how many model calls,
and any warning or stop on legitimate work (a false positive).

Writes ``bench/results/stuck.json`` and ``bench/results/stuck.md`` and refreshes the stuck
section of ``bench/README.md``. ``--sp4rk-only`` runs without the OpenHands SDK (it needs
Python 3.12 or newer) and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
sys.path.insert(0, str(BENCH))  # anchors.common: the offline switch shared with `make bench`

from anchors.common import TELEMETRY_OFF_ENV, go_offline  # noqa: E402

os.environ.update(TELEMETRY_OFF_ENV)
go_offline()

import sp4rk_side  # noqa: E402
from shapes import SHAPES, Shape  # noqa: E402

RESULTS = BENCH / "results"
README = BENCH / "README.md"
README_START, README_END = "<!-- stuck:start -->", "<!-- stuck:end -->"
#: Model calls a loop may make before the run counts as not stopped.
MAX_CALLS = 30


def main(argv: list[str] | None = None) -> int:
    """Run every shape through both detectors and report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sp4rk-only", action="store_true", help="skip OpenHands; write nothing")
    parser.add_argument("--max-calls", type=int, default=MAX_CALLS)
    args = parser.parse_args(argv)
    openhands = None
    if not args.sp4rk_only:
        import openhands_side as openhands

    rows = []
    for shape in SHAPES:
        limit = shape.length or args.max_calls
        row: dict[str, Any] = {
            "shape": shape.name,
            "kind": shape.kind,
            "what": shape.what,
            "length": shape.length,
            "sp4rk": asdict(sp4rk_side.run(shape, limit)),
        }
        if openhands is not None:
            row["openhands"] = asdict(openhands.run(shape, limit))
        row["verdict"] = verdict(shape, row)
        rows.append(row)
        print(f"{shape.kind:5}  {shape.name:36} {row['verdict']}", flush=True)

    if openhands is None:
        return 0
    meta = {
        "taken": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "sp4rk": version("sp4rk"),
        "sp4rk_commit": _commit(),
        "openhands_sdk": openhands.VERSION,
        "max_calls": args.max_calls,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "stuck.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    table = report(meta, rows)
    (RESULTS / "stuck.md").write_text(table)
    text = README.read_text()
    if README_START in text and README_END in text:
        head, rest = text.split(README_START, 1)
        _, tail = rest.split(README_END, 1)
        README.write_text(f"{head}{README_START}\n{table}{README_END}{tail}")
    print(f"\nwrote {RESULTS / 'stuck.md'} and stuck.json")
    return 0


def verdict(shape: Shape, row: dict[str, Any]) -> str:
    """One word on the shape: for loops, who stopped it first; for legitimate work, who erred."""
    mine = row["sp4rk"]
    theirs = row.get("openhands")
    if shape.kind == "legit":
        ok = mine["exit_reason"] == "finished" and mine["model_calls"] == shape.length
        words = ["sp4rk ok" if ok and not mine["warnings"] else "sp4rk FALSE POSITIVE"]
        if theirs is not None:
            words.append("OpenHands FALSE POSITIVE" if theirs["stuck_at"] else "OpenHands ok")
        return ", ".join(words)
    stop = mine["model_calls"] if mine["stopped_by"] else None
    if theirs is None:
        return f"sp4rk stops at {stop}" if stop else "sp4rk MISSES"
    other = theirs["stuck_at"] or None
    if stop is None and other is None:
        return "both miss"
    if other is None:
        return "sp4rk only"
    if stop is None:
        return "OpenHands only"
    return "sp4rk earlier" if stop < other else "same" if stop == other else "sp4rk LATER"


def _calls(n: int, limit: int) -> str:
    return str(n) if n else f"not stopped ({limit})"


def report(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """The Markdown tables: loops, then legitimate work, then a summary."""
    limit = meta["max_calls"]
    out = [
        f"Taken {meta['taken']} with Python {meta['python']}, sp4rk {meta['sp4rk']} at "
        f"{meta['sp4rk_commit']}, openhands-sdk {meta['openhands_sdk']} (default thresholds: "
        "action-observation 4, action-error 3, monologue 3, alternating 6). Numbers are model "
        f"calls; a loop not stopped within {limit} calls counts as a miss.",
        "",
        "**Loops** (the run should stop as early as possible):",
        "",
        "| shape | what the model does | sp4rk stops at | by | first warning | "
        "OpenHands stuck at | its check | first warning | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    loops = [r for r in rows if r["kind"] == "loop"]
    for r in loops:
        mine, theirs = r["sp4rk"], r["openhands"]
        stop = mine["model_calls"] if mine["stopped_by"] else 0
        out.append(
            f"| {r['shape']} | {r['what']} | {_calls(stop, limit)} | {mine['stopped_by'] or '—'} "
            f"| {mine['first_warning'] or '—'} | {_calls(theirs['stuck_at'], limit)} "
            f"| {theirs['pattern'] or '—'} | {theirs['first_warning'] or '—'} | {r['verdict']} |"
        )
    out += [
        "",
        "**Legitimate work** (the run should reach its final answer, with no warning):",
        "",
        "| shape | what the model does | model calls | sp4rk | sp4rk warnings | OpenHands |",
        "|---|---|---|---|---|---|",
    ]
    legit = [r for r in rows if r["kind"] == "legit"]
    for r in legit:
        mine, theirs = r["sp4rk"], r["openhands"]
        ran = mine["exit_reason"] == "finished" and mine["model_calls"] == r["length"]
        sp4rk = (
            "ran to its end" if ran else f"stopped at {mine['model_calls']} ({mine['exit_reason']})"
        )
        oh = (
            f"stuck at {theirs['stuck_at']} ({theirs['pattern']})"
            if theirs["stuck_at"]
            else "ran to its end"
        )
        out.append(
            f"| {r['shape']} | {r['what']} | {r['length']} | {sp4rk} "
            f"| {', '.join(mine['warnings']) or 'none'} | {oh} |"
        )
    caught = [r for r in loops if r["sp4rk"]["stopped_by"]]
    theirs_caught = [r for r in loops if r["openhands"]["stuck_at"]]
    both = [r for r in caught if r["openhands"]["stuck_at"]]
    earlier = sum(r["verdict"] == "sp4rk earlier" for r in loops)
    same = sum(r["verdict"] == "same" for r in loops)
    later = [r["shape"] for r in loops if r["verdict"] == "sp4rk LATER"]
    mine_fp = [r["shape"] for r in legit if not r["verdict"].startswith("sp4rk ok")]
    their_fp = [r["shape"] for r in legit if "OpenHands FALSE" in r["verdict"]]
    mean = _mean_calls(both)
    out += [
        "",
        "| summary | sp4rk | OpenHands |",
        "|---|---|---|",
        f"| loops stopped | {len(caught)} of {len(loops)} | {len(theirs_caught)} of {len(loops)} |",
        f"| mean model calls, loops both stop | {mean[0]:.1f} | {mean[1]:.1f} |",
        f"| loops stopped earlier / same / later than the other | {earlier} / {same} / "
        f"{len(later)} | — |",
        f"| legitimate shapes with a false positive | {len(mine_fp)} of {len(legit)} "
        f"| {len(their_fp)} of {len(legit)} |",
        "",
    ]
    if later:
        out += [f"sp4rk stops later than OpenHands on: {', '.join(later)}.", ""]
    if mine_fp:
        out += [f"sp4rk false positives: {', '.join(mine_fp)}.", ""]
    return "\n".join(out)


def _mean_calls(rows: list[dict[str, Any]]) -> tuple[float, float]:
    if not rows:
        return 0.0, 0.0
    mine = sum(r["sp4rk"]["model_calls"] for r in rows) / len(rows)
    theirs = sum(r["openhands"]["stuck_at"] for r in rows) / len(rows)
    return mine, theirs


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=BENCH,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
