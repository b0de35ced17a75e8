"""How long the full depth sweep takes, without running it: its runs counted, a few of them timed.

Example::

    python -m benchmarks.bench_full_sweep                  # count the runs and their work; trains nothing
    python -m benchmarks.bench_full_sweep --measure        # + time one run per model and depth class (~2 CPU-min)
    python -m benchmarks.bench_full_sweep --measure --json # the same as JSON

The full sweep is ``render.py train depth_sweep`` with ``simulation.experiments.FULL_SWEEP`` (README): 220
runs. ``--measure`` trains, at the sweep's own settings (300 SGD steps, batch 128, the sweep's widths and
learning rates, seed 0), one run per model at the shallowest, a middle and the deepest depth, each in this
process with one torch thread, and records its CPU time (``time.process_time``: on a shared machine the
CPU time of a one-thread run moves much less with load than its wall time) and its wall time. A run's cost
grows linearly with its depth at a fixed step budget, so every run of the sweep is estimated by linear
interpolation in depth between the measured runs of its model (seeds cost the same). The wall time on W
single-threaded workers is the longest-first schedule of those estimates over W workers (what Dask's
scheduler approaches for independent tasks), plus nothing for the cluster's start (a few seconds). The
load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import sys
import time


from simulation.experiments import FULL_SWEEP, build_runs
from simulation.sweep import run_to_bytes, sweep_work

__all__ = ["full_sweep_runs", "count", "representatives", "estimate", "schedule_wall"]


def full_sweep_runs() -> dict:
    """``{RunKey: RunConfig}`` of the full sweep, exactly as ``render.py train depth_sweep`` builds it."""
    return build_runs("depth_sweep", dict(FULL_SWEEP))


def count(runs: dict) -> dict:
    """Runs and work (``sweep_work``, MLP block-steps) per model and depth: ``{model: {depth: {"runs", "work"}}}``."""
    out: dict = {}
    for config in runs.values():
        cell = out.setdefault(config.model, {}).setdefault(config.depth, {"runs": 0, "work": 0})
        cell["runs"] += 1
        cell["work"] += sweep_work(config)
    return {m: dict(sorted(d.items())) for m, d in sorted(out.items())}


def representatives(runs: dict) -> dict:
    """One run per model at its shallowest, middle and deepest depth: ``{(model, depth): RunConfig}``
    (the residual net of seed 0; a plain net of the same depth is taken to cost the same: it lacks only the
    shortcut's addition, a small part of a block's work; not measured here)."""
    by_model: dict = {}
    first = next(iter(runs)).seed if runs else None
    for key, config in runs.items():
        if key.seed == first and config.arch == "residual":
            by_model.setdefault(config.model, {})[config.depth] = config
    out = {}
    for model, depths in sorted(by_model.items()):
        ordered = sorted(depths)
        for depth in sorted({ordered[0], ordered[len(ordered) // 2], ordered[-1]}):
            out[(model, depth)] = depths[depth]
    return out


def measure(config) -> dict:
    """CPU and wall seconds of one run, trained here with one torch thread (the trace is thrown away)."""
    cpu, wall = time.process_time(), time.perf_counter()
    run_to_bytes(config.to_dict())
    return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}


def estimate(runs: dict, measured: dict) -> dict:
    """``{RunKey: seconds}``: each run's (``{RunKey: RunConfig}``) CPU time interpolated linearly in depth between
    the measured runs of its model (``measured``: ``{(model, depth): seconds}``; beyond them, the nearest one scaled
    by depth)."""
    import numpy as np

    out = {}
    for key, config in runs.items():
        model, depth = config.model, config.depth
        points = sorted((d, s) for (m, d), s in measured.items() if m == model)
        ds, ss = [d for d, _ in points], [s for _, s in points]
        if depth < ds[0] or depth > ds[-1]:
            near = ds[0] if depth < ds[0] else ds[-1]
            out[key] = ss[ds.index(near)] * depth / near
        else:
            out[key] = float(np.interp(depth, ds, ss))
    return out


def schedule_wall(seconds: list[float], workers: int) -> float:
    """Wall time of independent tasks of ``seconds`` on ``workers``, longest first, each to the worker free first."""
    free = [0.0] * workers
    for s in sorted(seconds, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + s)
    return max(free)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true", help="time one run per model and depth class")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    runs = full_sweep_runs()
    table = count(runs)
    report: dict = {"runs": len(runs), "work": sum(map(sweep_work, runs.values())), "settings": FULL_SWEEP,
                    "by_model": {m: {"runs": sum(c["runs"] for c in d.values()), "work": sum(c["work"] for c in d.values()),
                                     "depths": d} for m, d in table.items()}}
    yard = None
    if args.measure:
        from benchmarks.yardstick import measure as yardstick

        yard = yardstick()  # the machine index, in the same run as the times below
        report["yardstick_s"] = yard.seconds
        print(yard, file=sys.stderr, flush=True)
        report["load_before"] = os.getloadavg()
        timed = {}
        for (model, depth), config in representatives(runs).items():
            timed[(model, depth)] = measure(config)
            print(f"  measured {model} d{depth}: {timed[(model, depth)]['cpu_s']:.1f} CPU-s, "
                  f"{timed[(model, depth)]['wall_s']:.1f} wall-s (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
        report["load_after"] = os.getloadavg()
        report["measured"] = {f"{m}_d{d}": t for (m, d), t in timed.items()}
        per_run = estimate(runs, {k: t["cpu_s"] for k, t in timed.items()})
        report["estimate_cpu_s"] = sum(per_run.values())
        report["estimate_cpu_s_by_model"] = {m: sum(s for k, s in per_run.items() if runs[k].model == m)
                                             for m in table}
        report["estimate_wall_s"] = {str(w): schedule_wall(list(per_run.values()), w) for w in (1, 2)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"full sweep: {report['runs']} runs, work {report['work']:,} MLP block-steps  ({FULL_SWEEP})")
    for model, entry in report["by_model"].items():
        cells = ", ".join(f"d{d}: {c['runs']}" for d, c in entry["depths"].items())
        print(f"  {model}: {entry['runs']} runs, work {entry['work']:,}  ({cells})")
    if args.measure:
        print(yard)
        print(f"measured at the sweep's settings, one torch thread (load {report['load_before'][0]:.1f} before, "
              f"{report['load_after'][0]:.1f} after):")
        for name, t in report["measured"].items():
            print(f"  {name:<10} {t['cpu_s']:7.1f} CPU-s  {t['wall_s']:7.1f} wall-s  {yard.of(t['wall_s']):7.1f} yardsticks")
        print(f"estimate: {report['estimate_cpu_s']:,.0f} CPU-s in all "
              + ", ".join(f"{m} {s:,.0f}" for m, s in report["estimate_cpu_s_by_model"].items()))
        for w, s in report["estimate_wall_s"].items():
            print(f"  on {w} free core{'s' if w != '1' else ''}: {s / 60:.1f} min = {yard.of(s):,.0f} yardsticks "
                  "(longest-first schedule)")


if __name__ == "__main__":
    main()
