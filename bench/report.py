"""Turn the workers' results into the Markdown table and the per-step plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anchors.common import (
    S1_STEPS,
    S2_EARLY,
    S2_LATE,
    S3_CALLS,
    S3_LATENCY_S,
    S3_RUNS,
    S4_EARLY,
    S4_LATE,
    S4_STEPS,
    S5_CALLS,
    S5_LATENCY_S,
)
from matplotlib.axes import Axes
from matplotlib.figure import Figure

#: The issue's goals for sp4rk (reported, never asserted).
TARGET_US_PER_STEP = 25.0
TARGET_GROWTH = 1.2
TARGET_EFFICIENCY = 0.95
TARGET_S5_EFFICIENCY = 0.7
#: S4 counts as flat when late steps cost at most this much more than early ones, and RSS grows
#: by at most this share between the early and the late window.
TARGET_S4_COST_RATIO = 1.2
TARGET_S4_RSS_GROWTH = 0.10

Results = dict[str, dict[str, Any]]


def _us(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _ratio(value: float) -> str:
    if value < 1:
        return f"{value:.2f}×"
    return f"{value:,.0f}×" if value >= 100 else f"{value:.1f}×"


def _versions(scenarios: dict[str, Any]) -> str:
    versions: dict[str, str] = {}
    for result in scenarios.values():
        versions.update(result.get("versions", {}))
    return ", ".join(f"{name} {v}" for name, v in versions.items())


def table(machine: dict[str, Any], results: Results) -> str:
    """The report: machine, main table, sp4rk's targets and the S4 endurance run."""
    lines = [
        f"Taken {machine['taken']} on {machine['cpu']} ({machine['cores']} cores, "
        f"{machine['memory_gib']:.0f} GiB), {machine['os']}, Python {machine['python']}, "
        f"sp4rk at {machine['commit']}; load average {machine['load_before']:.1f} before, "
        f"{machine['load_after']:.1f} after (other work shares the machine).",
        "",
        "Own time per tool step in µs: CPU time of the run minus the time inside the scripted "
        "model and the tool; lower is better. Growth: mean cost of steps "
        f"{S2_LATE[0]}–{S2_LATE[1]} over steps {S2_EARLY[0]}–{S2_EARLY[1]} in S2. "
        f"S3: {S3_RUNS} concurrent runs × {S3_CALLS} "
        f"model calls of {S3_LATENCY_S * 1000:.0f} ms; efficiency = ideal "
        f"{S3_CALLS * S3_LATENCY_S:.1f} s / wall. × floor and × sp4rk compare S2 µs/step.",
        "",
        "| contender | S1 N=" + " | S1 N=".join(map(str, S1_STEPS)) + " | S2 4 KB | S2 growth | "
        "S3 wall (eff.) | peak RSS S2 | × floor | × sp4rk |",
        "|---" * (len(S1_STEPS) + 7) + "|",
    ]
    ok = {name: {k: r for k, r in sc.items() if "error" not in r} for name, sc in results.items()}
    base = {name: sc.get("S2", {}).get("us_per_step") for name, sc in ok.items()}
    notes = []
    for name, scenarios in results.items():
        failed = {k: r["error"] for k, r in scenarios.items() if "error" in r}
        if failed and len(set(failed.values())) == 1 and not ok[name]:
            reason = next(iter(failed.values()))
            lines.append(f"| {name} | excluded: {reason} |" + " |" * (len(S1_STEPS) + 5))
            continue
        notes += [f"{name} {k}: {error}" for k, error in failed.items()]
        lines.append(f"| {name} | " + " | ".join(_cells(ok[name], base)) + " |")
    if notes:
        lines += ["", "Failed: " + "; ".join(notes) + "."]
    lines += ["", "Versions: " + "; ".join(_versions(s) for s in results.values() if _versions(s))]
    sp4rk = ok.get("sp4rk", {})
    if {"S2", "S3"} <= sp4rk.keys():
        floor_s3 = ok.get("floor", {}).get("S3")
        lines += ["", *_targets(sp4rk, floor_s3["efficiency"] if floor_s3 else None)]
    if "S4" in sp4rk:
        lines += ["", *_endurance(sp4rk["S4"])]
    many = {name: sc["S5"] for name, sc in ok.items() if "S5" in sc}
    if many:
        lines += ["", *_many_runs(many)]
    if "startup" in sp4rk:
        lines += ["", *_startup(sp4rk["startup"])]
    return "\n".join(lines) + "\n"


def _cells(scenarios: dict[str, Any], base: dict[str, float | None]) -> list[str]:
    """The row's cells; "–" where a scenario did not run or failed."""
    s1, s2, s3 = (scenarios.get(k) for k in ("S1", "S2", "S3"))
    floor, sp4rk = base.get("floor"), base.get("sp4rk")
    us = s2["us_per_step"] if s2 else None
    return [
        *(_us(s1["us_per_step"][str(n)]) if s1 else "–" for n in S1_STEPS),
        _us(us) if us else "–",
        f"{s2['growth']:.2f}" if s2 else "–",
        f"{s3['wall_s']:.2f} s ({s3['efficiency']:.2f})" if s3 else "–",
        f"{s2['peak_rss_mb']:.0f} MB" if s2 else "–",
        _ratio(us / floor) if us and floor else "–",
        _ratio(us / sp4rk) if us and sp4rk else "–",
    ]


def _targets(sp4rk: dict[str, Any], floor_efficiency: float | None) -> list[str]:
    s2, s3, s4 = sp4rk["S2"], sp4rk["S3"], sp4rk.get("S4", {})
    us, growth, efficiency = s2["us_per_step"], s2["growth"], s3["efficiency"]
    reached = f" (floor: {floor_efficiency:.2f})" if floor_efficiency else ""
    rows = [
        ("S2 µs/step", f"≤ {TARGET_US_PER_STEP:.0f}", _us(us), us <= TARGET_US_PER_STEP),
        ("S2 growth", f"≤ {TARGET_GROWTH}", f"{growth:.2f}", growth <= TARGET_GROWTH),
        (
            "S3 efficiency",
            f"≥ {TARGET_EFFICIENCY}",
            f"{efficiency:.2f}{reached}",
            efficiency >= TARGET_EFFICIENCY,
        ),
    ]
    if "S5" in sp4rk:
        s5 = sp4rk["S5"]["efficiency"]
        goal = TARGET_S5_EFFICIENCY
        rows.append(("S5 efficiency", f"≥ {goal}", f"{s5:.2f}", s5 >= goal))
    if "growth" in s4:
        cost = s4["growth"]
        rss = s4["rss_late_mb"] / s4["rss_early_mb"] - 1
        cost_goal, rss_goal = TARGET_S4_COST_RATIO, TARGET_S4_RSS_GROWTH
        rows += [
            ("S4 cost, late / early", f"≤ {cost_goal}", f"{cost:.2f}", cost <= cost_goal),
            ("S4 RSS, late vs early", f"≤ +{rss_goal:.0%}", f"{rss:+.0%}", rss <= rss_goal),
        ]
    return [
        "sp4rk against the issue's targets:",
        "",
        "| target | goal | measured | met |",
        "|---|---|---|---|",
        *(
            f"| {what} | {goal} | {got} | {'yes' if ok else '**no**'} |"
            for what, goal, got, ok in rows
        ),
    ]


def _many_runs(many: dict[str, dict[str, Any]]) -> list[str]:
    runs = next(iter(many.values()))["runs"]
    return [
        f"S5, many concurrent runs: {runs:,} runs × {S5_CALLS} model calls of "
        f"{S5_LATENCY_S * 1000:.0f} ms with 4 KB results, on one event loop; efficiency = "
        f"ideal {S5_CALLS * S5_LATENCY_S:.1f} s / wall. CPU per step: the whole process's CPU "
        "time (executor, scripted model, tool, event loop) over every run's tool steps. RSS per "
        "run: the peak RSS the runs added, shared out.",
        "",
        "| contender | wall (eff.) | CPU µs/step | RSS per run |",
        "|---|---|---|---|",
        *(
            f"| {name} | {r['wall_s']:.2f} s ({r['efficiency']:.2f}) | "
            f"{_us(r['cpu_us_per_step'])} | {r['rss_per_run_kb']:.0f} KB |"
            for name, r in many.items()
        ),
    ]


def _startup(times: dict[str, Any]) -> list[str]:
    bare = times["python (bare) cpu_ms"]
    rows = [name.removesuffix(" cpu_ms") for name in times if name.endswith(" cpu_ms")]
    return [
        f"Start-up, sp4rk only: each command in a fresh process, median of {times['reps']:.0f} "
        f"runs in turn (load average {times['load_before']:.1f} before, "
        f"{times['load_after']:.1f} after); CPU time is the measure, wall time moves with the "
        "load.",
        "",
        "| command | CPU ms | CPU ms less bare python | wall ms |",
        "|---|---|---|---|",
        *(
            f"| `{name}` | {times[f'{name} cpu_ms']:.0f} | "
            f"{times[f'{name} cpu_ms'] - bare:.0f} | {times[f'{name} wall_ms']:.0f} |"
            for name in rows
        ),
    ]


def _endurance(s4: dict[str, Any]) -> list[str]:
    per_block = 1000 // s4["bucket_steps"]  # curve points per block of 1000 steps
    curve = s4["curve_us"]
    blocks = [curve[i : i + per_block] for i in range(0, len(curve), per_block)]
    header = [f"{i * 1000 + 1}–{(i + 1) * 1000}" for i in range(len(blocks))]
    rss = [s4["rss_mb"].get(str((i + 1) * 1000), "–") for i in range(len(blocks))]
    return [
        f"S4 endurance, sp4rk only, with the SQLite runs store attached (without one, memory "
        "grows by each step's result: `s4_memory.py`): "
        f"{S4_STEPS:,} steps with 1 MB results, "
        f"{s4['wall_s']:.0f} s in all. Windows compared: steps {S4_EARLY[0]}–{S4_EARLY[1]} "
        f"and {S4_LATE[0]}–{S4_LATE[1]}.",
        "",
        "| steps | " + " | ".join(header) + " |",
        "|---" * (len(blocks) + 1) + "|",
        "| µs/step (wall) | " + " | ".join(_us(sum(b) / len(b)) for b in blocks) + " |",
        "| RSS at end (MB) | " + " | ".join(f"{v:.0f}" if v != "–" else v for v in rss) + " |",
    ]


def plot(results: Results, path: Path) -> None:
    """Per-step own cost against step index: S2 for every contender, S4 for sp4rk.

    Writes nothing when neither scenario ran.
    """
    curves = {
        name: scenarios["S2"]["curve_us"]
        for name, scenarios in results.items()
        if "curve_us" in scenarios.get("S2", {})
    }
    endurance = results.get("sp4rk", {}).get("S4", {})
    panels = [draw for draw, data in ((_plot_s2, curves), (_plot_s4, endurance)) if data]
    if not panels:
        return
    fig = Figure(figsize=(7 * len(panels), 4.5), layout="tight")
    for draw, ax in zip(panels, fig.subplots(1, len(panels), squeeze=False)[0], strict=True):
        draw(ax, curves, endurance)
    fig.savefig(path, dpi=120)


def _plot_s2(ax: Axes, curves: dict[str, list[float]], endurance: dict[str, Any]) -> None:
    for name, curve in curves.items():
        ax.plot(range(1, len(curve) + 1), _rolling_median(curve, 9), label=name, linewidth=1.2)
    ax.set(
        yscale="log",
        xlabel="step index",
        ylabel="own cost per step (µs, rolling median of 9)",
        title="S2: 500 steps, 4 KB results",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def _plot_s4(ax: Axes, curves: dict[str, list[float]], endurance: dict[str, Any]) -> None:
    block = endurance["bucket_steps"]
    xs = [block * (i + 1) for i in range(len(endurance["curve_us"]))]
    ax.plot(xs, endurance["curve_us"], color="tab:blue", label="µs/step")
    ax.set(
        xlabel="step index",
        ylabel=f"own cost per step (µs, mean of {block})",
        title=f"S4 (sp4rk): {S4_STEPS:,} steps, 1 MB results",
        ylim=(0, None),
    )
    rss = ax.twinx()
    steps = [int(step) for step in endurance["rss_mb"]]
    rss.plot(steps, list(endurance["rss_mb"].values()), color="tab:red", label="RSS (MB)")
    rss.set(ylabel="RSS (MB)", ylim=(0, None))
    ax.legend(loc="upper left", fontsize=8)
    rss.legend(loc="lower right", fontsize=8)


def _rolling_median(values: list[float], width: int) -> list[float]:
    half = width // 2
    out = []
    for i in range(len(values)):
        window = sorted(values[max(0, i - half) : i + half + 1])
        out.append(window[len(window) // 2])
    return out
