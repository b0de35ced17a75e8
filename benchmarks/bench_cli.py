"""How incremental the command line is, measured on the real lecture at preview quality.

Example::

    .venv/bin/python -m benchmarks.bench_cli                          # the whole lecture, default parameters
    .venv/bin/python -m benchmarks.bench_cli --set steps=30 IdentityHighway ChainRuleProduct

Runs ``render.py`` as a user would, in fresh temporary cache and output folders:

1. cold: nothing cached, ``render.py all -q l`` (or the named scenes): trains and renders everything;
2. no-op: the same command again; prints its time over the cold run's (target: at most 5 %);
3. scene-only change: one scene with a trace, in the other language; prints the training runs it caused
   (target: 0);
4. render only: every trace cached but Manim's caches empty, into a new folder;

and the lecture's video seconds per wall second of (1) and (4).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(args: list[str], cache: Path) -> tuple[float, str]:
    """Run ``render.py ARGS``; returns (wall seconds, stderr). Exits on failure."""
    env = {**os.environ, "RESIDUAL_CACHE": str(cache)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(ROOT / "render.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"render.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return wall, done.stderr


def trained(stderr: str) -> int:
    """Training runs a command started, from its 'traces: N to train' line (0 when it needed none)."""
    found = re.search(r"traces: (\d+) to train", stderr)
    return int(found.group(1)) if found else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenes", nargs="*", help="scene names (default: the whole lecture, `render.py all`)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="passed on to render.py (e.g. steps=30 for a quicker run)")
    args = parser.parse_args()
    from benchmarks.yardstick import in_yardsticks, measure

    yard = measure()  # the machine index, in the same run as the figures below
    print(yard, flush=True)
    import scenes as scene_package
    from benchmarks.measure import video_seconds

    names = args.scenes or [s.__name__ for s in scene_package.lecture_scenes()]  # `render.py all`: no chapters
    with_trace = [s.__name__ for s in scene_package.SCENES_IN_ORDER if s.__name__ in names and s.experiment]
    sets = [item for pair in args.sets for item in ("--set", pair)]
    command = ["render", *args.scenes] if args.scenes else ["all"]

    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        tmp = Path(tmp)
        cache, out = tmp / "cache", tmp / "out"
        base = [*command, "-q", "l", "-o", str(out), *sets]
        cold, cold_log = run(base, cache)
        noop, noop_log = run(base, cache)
        rerendered = re.search(r"scenes: (\d+) to render", noop_log)
        if rerendered and int(rerendered.group(1)):  # a source file changed while the cold run ran
            print(f"warning: the no-op re-run rendered {rerendered.group(1)} scenes: files changed meanwhile; "
                  "run the benchmark on a tree nobody edits", file=sys.stderr)
        folder = out / "480p15" / "en"
        seconds = video_seconds(folder)
        changed = 0
        if with_trace:
            _, change_log = run(["render", with_trace[0], "-q", "l", "--lang", "zh", "-o", str(out), *sets], cache)
            changed = trained(change_log)
        # Render only: the traces are cached, Manim's segment, Tex and text caches are not.
        fresh = tmp / "cache2"
        fresh.mkdir()
        for trace in cache.glob("*.npz"):
            os.link(trace, fresh / trace.name)
        render_only, render_log = run([*command, "-q", "l", "-o", str(tmp / "out2"), *sets], fresh)
        assert trained(render_log) == 0, render_log

    print(f"scenes: {len(names)}, lecture video: {seconds:.1f} s at 480p15, training runs in the cold run: "
          f"{trained(cold_log)}")
    print(f"cold run (train + render): {in_yardsticks(cold, yard)}")
    print(f"no-op re-run:              {in_yardsticks(noop, yard)}   ratio {noop / cold:.1%}  (target <= 5 %)")
    print(f"scene-only change ({with_trace[0] if with_trace else '-'} in zh): training runs caused: {changed}"
          "  (target 0)")
    print(f"render only (traces cached, Manim caches empty): {in_yardsticks(render_only, yard)}")
    print(f"video seconds per wall second: cold {seconds / cold:.3f}, render only {seconds / render_only:.3f}")


if __name__ == "__main__":
    main()
