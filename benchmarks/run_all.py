"""Every speed and memory target of the project in one table: metric, target, median, spread, repeats, pass/fail.

Example::

    .venv/bin/python -m benchmarks.run_all                       # ~10-15 min on 2 cores
    .venv/bin/python -m benchmarks.run_all --include-hq --include-pytest
    .venv/bin/python -m benchmarks.run_all --quick --only recorder-mlp   # a smoke test, seconds
    .venv/bin/python -m benchmarks.run_all --only lecture --repeats 3 --json figures.json

Metrics (``--only`` takes these names, or a prefix such as ``recorder``):

- ``recorder-mlp``, ``recorder-conv``, ``recorder-transformer``: training-step time with the recorder over a bare
  PyTorch loop, and beside it, in the same interleaved rounds, a TensorBoard ``add_histogram`` gradient logger
  (``benchmarks/bench_recorder.py``). Target <= 1.05.
- ``recorder-resnet18``, ``recorder-gpt2``: the same for a user's own network (issue 20, ``--model``): torchvision's
  ResNet-18 on 3x32x32 digits and a 2-layer Hugging Face GPT-2 on the reverse task, recorded at every residual
  addition the tool found. Target <= 1.10.
- ``sweep``: speed-up of DepthSweep's default run set (12 runs) on a fresh local Dask cluster, 1 worker over 2 workers
  (``bench_sweep.py``), paired rounds, and the cluster's start alone. Target >= 1.5 (2.0 is ideal on 2 free cores).
- ``lecture``: ``render.py all -q l`` from the command line, video seconds per wall second, cold (empty trace
  cache, empty output) and cached (traces cached, a new output folder: Manim's caches empty); and the peak
  resident memory of the whole process tree during the cold run (psutil, summed over render.py and all its
  children, sampled every 0.1 s). Targets >= 1.5, >= 3, <= 1 GiB.
- ``hq`` (only with ``--include-hq``; about 10 min): ``render.py all -q h``, traces cached, wall / video.
  Target <= 1.5.
- ``pytest`` (only with ``--include-pytest``): wall time of the default ``pytest`` run. Target <= 180 s.
- ``explorer``: ``render.py explore`` of the default lecture's runs, timed in headless Chromium: ms per step
  change in each view (every record of the largest selection, 5 passes; ``bench_explore.py``) and the folder's
  size. Targets <= 50 ms, <= 10 MB.
- ``instructions`` (only with ``--include-instructions``; ~25 min on one core, needs valgrind): the recorder's
  overhead counted in instructions under callgrind (``bench_instructions.py``): the same count (to ~0.01 %)
  whatever the load, a floor under the time ratio. Target <= 1.05.

Ratios come from interleaved rounds (``benchmarks.measure``: rotating order, a discarded warm-up, median and
interquartile range, rounds added until the range is clear of the target or a cap is hit). The lecture,
1080p and pytest figures are one run each by default (``--repeats`` for more): each takes minutes. The load
column is the 1-minute load average while each figure was measured. ``--quick``: tiny configs and few rounds,
to check that everything runs; its figures mean nothing.

The machine index: the run starts with the project's yardstick (``benchmarks/yardstick.py``: the shared
``../shared/tools/yardstick.py``, else its vendored copy), prints it first, and gives every figure in seconds
also in yardsticks (time / yardstick), plus the cold lecture's wall time in yardsticks per 475 s of video
(target <= 210) and the pytest run's (target <= 120), so figures from two machines can be compared. Those two
divide each run by the mean of a yardstick taken just before and one just after it (``bracketed``): on the
2-core machine the yardstick drifts by ~15 % within minutes. ``--quick`` measures none.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent

from benchmarks.measure import Figure, Target, format_table, load
from benchmarks.process_tree import tree_rss
from benchmarks.yardstick import Yardstick

METRICS = ("recorder-mlp", "recorder-conv", "recorder-transformer", "recorder-resnet18", "recorder-gpt2", "instructions", "sweep", "lecture", "hq", "pytest",
           "explorer")
GIB = 2**30
T = TypeVar("T")
LECTURE_VIDEO_S = 475  # the default lecture's length when the yardstick targets were set (issue 21)


# -- recorder -------------------------------------------------------------------------------------

def recorder_rows(model: str, quick: bool) -> list[tuple[str, Figure | str]]:
    from benchmarks import bench_recorder

    figs = bench_recorder.overhead(model, quick=quick, min_rounds=2 if quick else 5, max_rounds=2 if quick else 11)
    return [(f"recorder / bare, {model}", figs["recorder"]),
            (f"  plain totals, {model}", figs["recorder total"]),
            (f"  + held-out test error, {model}", figs["recorder+test"]),
            (f"  TensorBoard histograms / bare, {model}", figs["tensorboard"])]


# -- sweep ----------------------------------------------------------------------------------------

def sweep_rows(quick: bool) -> list[tuple[str, Figure | str]]:
    from benchmarks import bench_sweep

    figs = bench_sweep.worker_speedup(runs=2 if quick else None, steps=10 if quick else 100,
                                      min_rounds=1 if quick else 3, max_rounds=1 if quick else 7)
    return [("sweep speed-up, 1 -> 2 workers", figs["speed-up"]),
            ("  local cluster start, wall", bench_sweep.start_figure(repeats=1 if quick else 3))]


# -- the lecture through the command line ---------------------------------------------------------

def render(args: list[str], cache: Path) -> tuple[float, int]:
    """Run ``render.py ARGS`` with trace cache ``cache``: (wall seconds, peak tree RSS in bytes). Exits with the
    command's error on failure."""
    env = {**os.environ, "RESIDUAL_CACHE": str(cache)}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(ROOT / "render.py"), *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.1):
            peak[0] = max(peak[0], tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = proc.communicate()
    wall = time.perf_counter() - started
    stop.set()
    sampler.join()
    if proc.returncode:
        sys.exit(f"render.py {' '.join(args)} failed ({proc.returncode}):\n{stderr[-3000:]}")
    return wall, peak[0]


def bracketed(run: Callable[[], T], measure_yardstick: bool) -> tuple[T, Yardstick | None]:
    """``run()`` between a yardstick just before and one just after it: (its result, their mean), or (its
    result, None) when ``measure_yardstick`` is false (--quick). Each sample of a long figure is divided by the
    yardstick of its own minutes (:meth:`Yardstick.between`), not by one taken at the start of the table."""
    if not measure_yardstick:
        return run(), None
    from benchmarks.yardstick import measure

    before = measure()
    result = run()
    own = Yardstick.between(before, measure())
    print(f"  {own} (mean of before {before.seconds:.2f} s and after)", file=sys.stderr, flush=True)
    return result, own


def lecture_command(quick: bool) -> list[str]:
    """``all`` or, with --quick, two small scenes trained for a few steps."""
    return ["render", "IdentityHighway", "Analogies", "--set", "steps=20"] if quick else ["all"]


def lecture_rows(quick: bool, repeats: int, include_hq: bool,
                 yardstick: Yardstick | None = None) -> list[tuple[str, Figure | str]]:
    from benchmarks.measure import video_seconds

    command = lecture_command(quick)
    cold, cached, rss, hq, hq_rss, cold_yd = [], [], [], [], [], []
    loads: dict[str, list[float]] = {"cold": [], "cached": [], "hq": []}
    with tempfile.TemporaryDirectory(prefix="bench-all-") as tmp:
        tmp = Path(tmp)
        traces = tmp / "traces"
        for index in range(repeats):
            cache, out = tmp / f"cache{index}", tmp / f"out{index}"
            (wall, peak), own = bracketed(lambda: render([*command, "-q", "l", "-o", str(out)], cache),
                                          yardstick is not None)
            video = video_seconds(out / "480p15" / "en")
            cold.append(video / wall)
            if own is not None:  # wall in its own yardsticks, scaled to the 475 s lecture the target was set for
                cold_yd.append(own.of(wall) * LECTURE_VIDEO_S / video)
            rss.append(peak / GIB)
            loads["cold"].append(load())
            if not traces.exists():
                # the traces only: Manim's segment cache ($RESIDUAL_CACHE/manim) would make it a no-op re-render
                shutil.copytree(cache, traces, ignore=shutil.ignore_patterns("manim"))
            shutil.rmtree(out)
            again = tmp / f"again{index}"
            shutil.rmtree(traces / "manim", ignore_errors=True)  # each cached run starts with Manim's caches empty
            wall, _ = render([*command, "-q", "l", "-o", str(again)], traces)
            cached.append(video_seconds(again / "480p15" / "en") / wall)
            loads["cached"].append(load())
            shutil.rmtree(again)
        if include_hq:
            for index in range(repeats):
                out = tmp / f"hq{index}"
                shutil.rmtree(traces / "manim", ignore_errors=True)  # no segment of an earlier run
                wall, peak = render([*command, "-q", "h", "-o", str(out)], traces)
                hq.append(wall / video_seconds(out / "1080p60" / "en"))
                hq_rss.append(peak / GIB)
                loads["hq"].append(load())
                shutil.rmtree(out)
    what = "2 scenes, steps=20" if quick else "render.py all"
    rows: list[tuple[str, Figure | str]] = [
        (f"lecture -ql cold, video s / wall s ({what})", Figure(cold, Target(">=", 1.5), "", loads["cold"])),
        ("lecture -ql traces cached, video s / wall s", Figure(cached, Target(">=", 3.0), "", loads["cached"])),
        (f"lecture -ql cold, yardsticks per {LECTURE_VIDEO_S} s of video",
         Figure(cold_yd, Target("<=", 210), "yd", loads["cold"]) if cold_yd else "skipped: no yardstick (--quick)"),
        ("peak RSS of the process tree, cold lecture", Figure(rss, Target("<=", 1.0), "GiB", loads["cold"])),
    ]
    rows.append(("1080p60 lecture, traces cached, wall / video",
                 Figure(hq, Target("<=", 1.5), "", loads["hq"]) if include_hq
                 else "skipped: pass --include-hq (~10 min)"))
    if include_hq:
        rows.append(("peak RSS of the process tree, 1080p60 lecture", Figure(hq_rss, Target("<=", 1.0), "GiB", loads["hq"])))
    return rows


def instruction_rows(include: bool, quick: bool) -> list[tuple[str, Figure | str]]:
    """Recorder / bare in instructions (callgrind; bench_instructions.py): one run each, deterministic."""
    from benchmarks import bench_instructions, bench_recorder

    if not include:
        return [("recorder / bare, instructions", "skipped: pass --include-instructions")]
    if not bench_instructions.available():
        return [("recorder / bare, instructions", "skipped: valgrind is not installed")]
    rows: list[tuple[str, Figure | str]] = []
    for model in (("mlp",) if quick else bench_recorder.MODELS):
        bare, recorded = bench_instructions.counts(model, 4 if quick else None)
        rows.append((f"recorder / bare, instructions, {model}",
                     Figure([recorded / bare], Target("<=", bench_instructions.TARGET), "x", [os.getloadavg()[0]])))
    return rows


# -- the default test run -------------------------------------------------------------------------

def pytest_wall() -> float:
    """Wall seconds of the default ``pytest`` run (README command 2's test run) in a fresh ``git clone`` of this
    checkout's HEAD (no Hypothesis database, no byte code, no media of earlier runs), with this checkout's
    ``.venv`` and ``web/node_modules`` linked in as set-up would have made them. Exits when git or pytest fails."""
    with tempfile.TemporaryDirectory(prefix="bench-pytest-") as tmp:
        clone = Path(tmp) / "clone"
        cloned = subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], capture_output=True, text=True)
        if cloned.returncode:
            sys.exit(f"git clone of {ROOT} failed: {cloned.stderr.strip()[-500:]}")
        for linked in (".venv", "web/node_modules"):
            if (ROOT / linked).exists():
                (clone / linked).symlink_to(ROOT / linked)
        env = {**os.environ, "PYTHONPATH": str(clone)}  # the clone's code, not an editable install's
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly"], cwd=clone, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: some test failed; the time still counts
        sys.exit(f"pytest could not run (exit {done.returncode})")
    return wall


def pytest_rows(include: bool, repeats: int, yardstick: Yardstick | None = None) -> list[tuple[str, Figure | str]]:
    if not include:
        return [("default pytest run, wall", "skipped: pass --include-pytest")]
    walls, in_yd, loads = [], [], []
    for _ in range(repeats):
        wall, own = bracketed(pytest_wall, yardstick is not None)
        walls.append(wall)
        loads.append(load())
        if own is not None:
            in_yd.append(own.of(wall))
    rows: list[tuple[str, Figure | str]] = [("default pytest run, wall", Figure(walls, Target("<=", 180), "s", loads))]
    if in_yd:
        rows.append(("default pytest run, yardsticks", Figure(in_yd, Target("<=", 120), "yd", loads)))
    return rows


# -- the explorer in a browser ----------------------------------------------------------------------

def explorer_rows(quick: bool) -> list[tuple[str, Figure | str]]:
    from benchmarks import bench_explore

    return bench_explore.rows(rounds=1 if quick else 5)


# -- the command ----------------------------------------------------------------------------------

def selected(only: list[str] | None) -> list[str]:
    """The metrics named by ``--only`` (exact names or prefixes), in table order; all without it."""
    if not only:
        return list(METRICS)
    chosen = []
    for name in only:
        match = [m for m in METRICS if m == name or m.startswith(name)]
        if not match:
            raise SystemExit(f"error: unknown metric {name!r}; known: {', '.join(METRICS)}")
        chosen += match
    return [m for m in METRICS if m in chosen]


def collect(metrics: list[str], quick: bool, repeats: int, include_hq: bool, include_pytest: bool,
            include_instructions: bool = False, yardstick: Yardstick | None = None) -> list[tuple[str, Figure | str]]:
    rows: list[tuple[str, Figure | str]] = []
    steps: dict[str, Callable[[], list[tuple[str, Figure | str]]]] = {
        "recorder-mlp": lambda: recorder_rows("mlp", quick),
        "recorder-conv": lambda: recorder_rows("conv", quick),
        "recorder-transformer": lambda: recorder_rows("transformer", quick),
        "recorder-resnet18": lambda: recorder_rows("resnet18", quick),
        "recorder-gpt2": lambda: recorder_rows("gpt2", quick),
        "instructions": lambda: instruction_rows(include_instructions, quick),
        "sweep": lambda: sweep_rows(quick),
        "lecture": lambda: lecture_rows(quick, repeats, include_hq, yardstick),
        "hq": lambda: [] if "lecture" in metrics else lecture_rows(quick, repeats, include_hq)[-1:],
        "pytest": lambda: pytest_rows(include_pytest, repeats, yardstick),
        "explorer": lambda: explorer_rows(quick),
    }
    for metric in metrics:
        started = time.perf_counter()
        new = steps[metric]()
        rows += new
        # Each metric's rows as soon as they exist: a long run stopped half-way keeps what it measured.
        print(f"[{metric}: {time.perf_counter() - started:.0f} s]\n{format_table(new, yardstick)}", file=sys.stderr, flush=True)
    return rows


def to_json(rows: list[tuple[str, Figure | str]], yardstick: Yardstick | None = None) -> list[dict]:
    out = []
    if yardstick is not None:
        out.append({"metric": "yardstick", "unit": "s", "median": yardstick.seconds, "train": yardstick.train,
                    "render": yardstick.render, "source": yardstick.source})
    for metric, fig in rows:
        if isinstance(fig, str):
            out.append({"metric": metric, "skipped": fig})
            continue
        q1, q3 = fig.iqr
        out.append({"metric": metric, "target": None if fig.target is None else str(fig.target), "unit": fig.unit,
                    "median": fig.median, "q1": q1, "q3": q3, "repeats": fig.repeats, "passed": fig.passed,
                    "decided": fig.decided, "samples": fig.samples, "load": fig.loads,
                    **({"yardsticks": yardstick.of(fig.median)} if yardstick is not None and fig.unit == "s" else {})})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny configs, few rounds: a smoke test")
    parser.add_argument("--only", action="append", metavar="NAME", help=f"one of {', '.join(METRICS)} (repeatable)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each lecture / 1080p / pytest figure")
    parser.add_argument("--include-hq", action="store_true", help="also the 1080p60 lecture (~10 min)")
    parser.add_argument("--include-pytest", action="store_true", help="also the default pytest run's wall time")
    parser.add_argument("--include-instructions", action="store_true",
                        help="also the recorder's overhead in instructions (valgrind; ~25 min on one core)")
    parser.add_argument("--json", type=Path, help="also write the figures, every sample included, to this file")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    metrics = selected(args.only)
    named = set(args.only or ())  # naming a flagged metric in --only includes it
    started = time.perf_counter()
    yardstick = None
    if args.quick:
        print("yardstick: not measured (--quick)", flush=True)
    else:
        from benchmarks.yardstick import measure

        yardstick = measure()
        print(yardstick, flush=True)  # first: a run stopped half-way still says how fast the machine was
    rows = collect(metrics, args.quick, args.repeats, args.include_hq or "hq" in named,
                   args.include_pytest or "pytest" in named, args.include_instructions or "instructions" in named,
                   yardstick)
    load = os.getloadavg()
    print(format_table(rows, yardstick))
    print(f"({time.perf_counter() - started:.0f} s; load average now {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; "
          f"{os.cpu_count()} cores{'; --quick: figures mean nothing' if args.quick else ''})")
    if args.json:
        args.json.write_text(json.dumps(to_json(rows, yardstick), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
