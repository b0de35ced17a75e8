"""The lecture's throughput and memory, `render.py all -q l` cold and with traces cached, two checkouts interleaved.

Example::

    git archive main | tar -x -C /tmp/before          # the code to compare against
    nice -n 10 .venv/bin/python -m benchmarks.bench_pipeline --before /tmp/before --repeats 1

For each repeat and each checkout in turn (before, this one, before, ...): a cold run (empty trace cache,
empty output) and a render-only run (traces cached, Manim's caches and the output emptied), each through
benchmarks/tree_rss.py (psutil). Prints, per run, wall seconds, video seconds (the clips' durations), video
seconds per wall second, and the peak RSS of the whole process tree; with the load average beside it.
Extra arguments after ``--`` go to ``render.py all`` (e.g. ``-- --set steps=30``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.measure import video_seconds as _video_seconds
from benchmarks.tree_rss import measure

ROOT = Path(__file__).resolve().parent.parent


def _run(checkout: Path, cache: Path, out: Path, extra: list[str]) -> dict:
    env = {"RESIDUAL_CACHE": str(cache), "PYTHONPATH": str(checkout)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        result = measure([sys.executable, str(checkout / "render.py"), "all", "-q", "l", "-o", str(out), *extra])
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    video = _video_seconds(out)
    return {"wall_s": result["seconds"], "video_s": round(video, 1), "video_per_wall": round(video / result["seconds"], 2),
            "peak_tree_mib": round(result["peak_tree_rss"] / 2**20),
            "peak_process_mib": round(result["peak_process_rss"] / 2**20), "rc": result["returncode"],
            "load": round(os.getloadavg()[0], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout to compare against")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--only", choices=("cold", "cached", "both"), default="both")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    from benchmarks.yardstick import in_yardsticks, measure

    yard = measure()  # the machine index, in the same run as the figures below
    print(yard, flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        kinds = {"cold": ["cold"], "cached": ["cached"], "both": ["cold", "cached"]}[args.only]
        for repeat in range(args.repeats):
            for kind in kinds:  # before, after, before, after: the load drifts over both alike
                for name, checkout in (("before", args.before.resolve()), ("after", ROOT)):
                    cache, out = Path(tmp) / f"{name}-{repeat}-cache", Path(tmp) / f"{name}-{repeat}-{kind}"
                    if kind == "cached":
                        if not cache.exists():  # traces only: train them once, not timed
                            _run(checkout, cache, Path(tmp) / f"{name}-warm", args.extra)
                        shutil.rmtree(cache / "manim", ignore_errors=True)  # Manim renders every segment again
                    rows.append({"code": name, "run": kind, **_run(checkout, cache, out, args.extra)})
                    print(json.dumps(rows[-1]), flush=True)
    print(f"{'code':<7} {'run':<7} {'wall s':>7} {'video s':>8} {'video/wall':>10} {'peak tree MiB':>13} {'load':>5} {'wall yd':>8}")
    for r in rows:
        print(f"{r['code']:<7} {r['run']:<7} {r['wall_s']:>7.1f} {r['video_s']:>8.1f} {r['video_per_wall']:>10.2f} "
              f"{r['peak_tree_mib']:>13} {r['load']:>5} {yard.of(r['wall_s']):>8.1f}")


if __name__ == "__main__":
    main()
