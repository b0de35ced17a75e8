"""Timeline of one ``render.py`` run: when each training run and each scene's render started and ended, its CPU s.

Example::

    RESIDUAL_CACHE=$(mktemp -d) .venv/bin/python -m benchmarks.bench_timeline --json /tmp/cold.json -- \\
        all -q l -o $(mktemp -d)

Runs ``render.py ARGS`` (this checkout) and samples its process tree with psutil every ``--interval`` seconds: each
process's first and last sighting, its CPU seconds (user + sys, its reaped children included: LaTeX, dvisvgm) and
its peak RSS, and the peak of the tree's summed RSS. The trainer's run events (:mod:`simulation.events`: a JSON
line as each training run starts and ends, with its CPU s, in a file named by ``$RESIDUAL_EVENTS``, which this sets)
split the trainer into its runs. Prints one line per task in start order (training runs, render
workers), then CPU s per phase (start-up of the command, training, rendering) and where the cores of this tree were
idle: the seconds during which fewer tasks ran than ``--cores``, the wall time after the trainer ended, and the
task that ended last. The load average is printed at the start and the end: CPU seconds are robust to other
programs' load, wall seconds are not. """

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
from pathlib import Path

import psutil

from benchmarks.process_tree import processes
from benchmarks.process_tree import rss as rss_of
from simulation.events import EVENTS_ENV, read_events

ROOT = Path(__file__).resolve().parent.parent


def _cpu(proc: psutil.Process, kind: str) -> float:
    """CPU s of ``proc``; a worker's reaped children (LaTeX, dvisvgm) count as its own, the command's (the
    trainer and the workers, counted on their own lines) do not."""
    t = proc.cpu_times()
    return t.user + t.system + (t.children_user + t.children_system if kind == "worker" else 0.0)


def _label(cmdline: list[str]) -> tuple[str, str]:
    """(kind, name) of a process of the tree: main, trainer, worker (the scene), or tool."""
    text = " ".join(cmdline)
    if "_worker" in cmdline:
        try:
            return "worker", json.loads(cmdline[cmdline.index("_worker") + 1])["scene"]
        except (IndexError, ValueError, KeyError):
            return "worker", "?"
    if "simulation.cache" in text:
        return "trainer", "trainer"
    if "render.py" in text:
        return "main", "render.py"
    return "tool", Path(cmdline[0]).name if cmdline else "?"


def record(args: list[str], interval: float = 0.1) -> dict:
    """Run ``render.py ARGS`` to its end; {"wall_s", "returncode", "load", "processes", "log", "active", "events",
    "peak_tree_rss"}: ``events`` are the run events (:mod:`simulation.events`) with ``time`` in seconds since the
    start, ``log`` the time-stamped lines of its stderr (kept for reading, not parsed)."""
    events = Path(tempfile.mkdtemp(prefix="timeline-")) / "events.jsonl"
    started, started_epoch = time.perf_counter(), time.time()
    load_start = os.getloadavg()[0]
    proc = subprocess.Popen([sys.executable, str(ROOT / "render.py"), *args], cwd=ROOT,
                            env={**os.environ, EVENTS_ENV: str(events)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log: list[tuple[float, str]] = []

    def read() -> None:
        for line in proc.stderr:
            log.append((time.perf_counter() - started, line.rstrip()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    root = psutil.Process(proc.pid)
    seen: dict[int, dict] = {}
    peak_tree = 0  # summed RSS of the tree, as benchmarks/tree_rss.py
    active: list[tuple[float, int, float]] = []  # (t, tasks running, tree CPU s so far)
    while proc.poll() is None:
        now = time.perf_counter() - started
        tree = processes(root)
        if not tree:
            break
        tasks, total, rss = 0, 0.0, 0
        for p in tree:
            try:
                info = seen.get(p.pid)
                if info is None:
                    kind, name = _label(p.cmdline())
                    info = seen[p.pid] = {"pid": p.pid, "kind": kind, "name": name, "start": now, "end": now,
                                          "cpu": 0.0, "ppid": p.ppid()}
                info["end"], info["cpu"] = now, _cpu(p, info["kind"])
                mem = rss_of(p)
                if mem is None:
                    continue
                info["peak_rss"] = max(info.get("peak_rss", 0), mem)
                rss += mem
            except psutil.Error:
                continue
            if info["kind"] in ("trainer", "worker"):
                tasks += 1
            if info["kind"] != "tool":  # a tool's CPU is its parent's children_* once reaped
                total += info["cpu"]
        active.append((now, tasks, total))
        peak_tree = max(peak_tree, rss)
        time.sleep(interval)
    returncode = proc.wait()
    reader.join()
    found = [{**e, "time": e["time"] - started_epoch} for e in read_events(events)]
    shutil.rmtree(events.parent, ignore_errors=True)
    return {"wall_s": round(time.perf_counter() - started, 2), "returncode": returncode,
            "load": [round(load_start, 2), round(os.getloadavg()[0], 2)], "processes": list(seen.values()),
            "log": log, "active": active, "events": found, "peak_tree_rss": peak_tree}


def trainings(run: dict) -> list[dict]:
    """Each training run of ``run`` (:func:`record`) from its ``run_start`` to its ``run_end`` event, in start
    order: {"digest", "name", "pid", "start", "end" (s since the start), "cpu" (its process's CPU s in the run),
    "ok"}. A run whose process died before its end event ends at the command's end, with no CPU (NaN)."""
    ends = {(e["pid"], e["digest"]): e for e in run["events"] if e["event"] == "run_end"}
    out = []
    for start in (e for e in run["events"] if e["event"] == "run_start"):
        end = ends.get((start["pid"], start["digest"]))
        out.append({"digest": start["digest"], "name": f"{start['digest'][:10]} {start['label']}", "pid": start["pid"],
                    "start": start["time"], "end": end["time"] if end else run["wall_s"],
                    "cpu": end["cpu_s"] if end else float("nan"), "ok": bool(end and end["ok"])})
    return sorted(out, key=lambda t: t["start"])


def summarise(run: dict, cores: int) -> str:
    procs = run["processes"]
    yard = f" ({run['wall_s'] / run['yardstick_s']:.1f} yardsticks)" if run.get("yardstick_s") else ""
    lines = [f"wall {run['wall_s']:.1f} s{yard}, exit {run['returncode']}, load {run['load'][0]} -> {run['load'][1]}, "
             f"peak RSS of the tree {run.get('peak_tree_rss', 0) / 2**20:.0f} MiB"]
    tasks = sorted([p for p in procs if p["kind"] in ("worker", "trainer", "main")], key=lambda p: p["start"])
    lines.append(f"{'start':>7} {'end':>7} {'wall':>6} {'CPU s':>6} {'MiB':>5}  task")
    for p in tasks:
        lines.append(f"{p['start']:7.1f} {p['end']:7.1f} {p['end'] - p['start']:6.1f} {p['cpu']:6.1f} "
                     f"{p.get('peak_rss', 0) / 2**20:5.0f}  {p['kind']} {p['name']}")
    runs = trainings(run)
    if runs:
        lines.append("training runs (from the trainer's run events):")
        for t in runs:
            lines.append(f"{t['start']:7.1f} {t['end']:7.1f} {t['end'] - t['start']:6.1f} {t['cpu']:6.1f}  {t['name']}"
                         + ("" if t["ok"] else "  (failed)"))
    by_kind: dict[str, float] = {}
    for p in procs:
        if p["kind"] != "tool":
            by_kind[p["kind"]] = by_kind.get(p["kind"], 0.0) + p["cpu"]
    lines.append("CPU s by phase: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(by_kind.items()))
                 + f"; total {sum(by_kind.values()):.1f}")
    idle, previous = 0.0, None
    for t, n, _ in run["active"]:
        if previous is not None:
            idle += max(0, cores - previous[1]) * (t - previous[0])
        previous = (t, n)
    trainer = [p for p in procs if p["kind"] == "trainer"]
    workers = [p for p in procs if p["kind"] == "worker"]
    lines.append(f"core-seconds with no task of this tree (< {cores} tasks running): {idle:.1f}")
    if trainer:
        lines.append(f"trainer {trainer[0]['start']:.1f}-{trainer[0]['end']:.1f} s; wall after it ended "
                     f"{run['wall_s'] - trainer[0]['end']:.1f} s")
    if workers:
        last = max(workers, key=lambda p: p["end"])
        first = min(workers, key=lambda p: p["start"])
        lines.append(f"first render {first['name']} at {first['start']:.1f} s; last to end {last['name']} "
                     f"({last['start']:.1f}-{last['end']:.1f} s)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the whole timeline here")
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("render_args", nargs="+", help="arguments of render.py (after --)")
    args = parser.parse_args(argv)
    from benchmarks.yardstick import measure

    yard = measure()  # the machine index, in the same run as the timeline
    print(yard, flush=True)
    run = record(args.render_args, args.interval)
    run["yardstick_s"] = yard.seconds
    if args.json:
        args.json.write_text(json.dumps(run, indent=1))
    print(summarise(run, args.cores))
    return 0 if run["returncode"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
