"""The benchmark machinery (benchmarks/measure.py) on fake costs, and a smoke run of benchmarks/run_all.py.

No test here asserts a time: speed lives in the benchmark scripts. These check that rounds interleave with a
rotating order, that ratios are paired per round, that the adaptive rule stops when the interquartile range is
clear of the target and goes on to the cap when it is not, and that run_all's table says pass exactly when the
median meets the target.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.measure import COLUMNS, Figure, Target, compare, format_table, quartiles, repeat

ROOT = Path(__file__).resolve().parent.parent


def test_rounds_rotate_who_goes_first_and_ratios_pair_within_a_round():
    calls = []
    # Costs drift from round to round (load coming and going); B's k-th run costs twice A's k-th.
    counts = {"a": itertools.count(1), "b": itertools.count(1)}

    def variant(name, factor):
        def run():
            calls.append(name)
            return factor * next(counts[name])
        return run

    figs = compare({"a": variant("a", 1), "b": variant("b", 2)}, baseline="a", min_rounds=4, max_rounds=4, warmup=1)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]  # ABBAAB...: the warm-up round first
    assert figs["a"].repeats == figs["b"].repeats == 4  # the warm-up round is discarded
    assert figs["b"].samples == [2.0] * 4 and figs["a"].samples == [2.0, 3.0, 4.0, 5.0]


def test_adaptive_rule_stops_once_the_spread_is_clear_of_the_target():
    figs = compare({"bare": lambda: 1.0, "x": lambda: 1.5}, "bare", {"x": Target("<=", 1.05)},
                   min_rounds=5, max_rounds=50, warmup=1)
    assert figs["x"].repeats == 5 and figs["x"].median == pytest.approx(1.5)
    assert figs["x"].passed is False and figs["x"].decided


def test_adaptive_rule_runs_to_the_cap_while_the_spread_straddles_the_target():
    ratios = itertools.cycle([0.9, 1.2, 1.0, 1.1])  # the interquartile range always contains 1.05
    figs = compare({"bare": lambda: 1.0, "x": lambda: next(ratios)}, "bare", {"x": Target("<=", 1.05)},
                   min_rounds=3, max_rounds=9, warmup=0)
    assert figs["x"].repeats == 9 and not figs["x"].decided
    assert "undecided" in figs["x"].verdict


def test_a_variant_may_report_several_series_from_one_run():
    figs = compare({"bare": lambda: 2.0, "rec": lambda: {"rec": 2.2, "rec+test": 3.0}}, "bare",
                   {"rec": Target("<=", 1.05)}, min_rounds=2, max_rounds=2, warmup=0)
    assert figs["rec"].median == pytest.approx(1.1) and figs["rec+test"].median == pytest.approx(1.5)


def test_quartiles_and_repeat():
    assert quartiles([5.0]) == (5.0, 5.0, 5.0)
    assert quartiles([1, 2, 3, 4, 5]) == (2, 3, 4)
    values = iter([3.0, 1.0, 2.0, 10.0])
    fig = repeat(lambda: next(values), Target(">=", 0.5), min_repeats=3, max_repeats=4)
    assert fig.samples == [3.0, 1.0, 2.0] and fig.passed  # clear of the target after 3
    with pytest.raises(ValueError):
        compare({"a": lambda: 1.0}, "b")
    with pytest.raises(ValueError):
        Target("<", 1)


@pytest.mark.parametrize("op,bound,samples,expected", [
    ("<=", 1.05, [1.0, 1.01, 1.02], "pass"), ("<=", 1.05, [1.2, 1.3, 1.1], "FAIL"),
    (">=", 3.0, [3.5, 2.0, 3.1], "pass (undecided)"), (">=", 1.5, [0.9], "FAIL")])
def test_verdict_follows_the_median(op, bound, samples, expected):
    fig = Figure(samples, Target(op, bound), "x", [1.0] * len(samples))
    assert fig.verdict == expected
    table = format_table([("m", fig), ("skipped one", "skipped: pass --include-hq")])
    header, rule, row, skipped = table.splitlines()
    assert [c.strip() for c in header.split(" | ")] == list(COLUMNS)
    assert [c.strip() for c in row.split(" | ")][5] == expected
    assert "skipped: pass --include-hq" in skipped


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.split(" | ")]


@pytest.mark.slow  # trains or spawns (~1 s); the default run keeps the harness's pure checks, CI runs this
def test_run_all_quick_smoke(tmp_path, capsys):
    """run_all --quick --only recorder-mlp prints the table's columns and rows, and each pass/fail agrees with
    its median and target (and with the JSON it writes). Run in this process (its ``main``, as ``python -m``
    calls it): the command line is argparse's, what is tested is the table."""
    from benchmarks import run_all

    out = tmp_path / "figures.json"
    assert run_all.main(["--quick", "--only", "recorder-mlp", "--json", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "yardstick: not measured (--quick)"  # the machine index comes first (measured without --quick)
    start = next(i for i, line in enumerate(lines) if line.startswith("metric"))
    assert _cells(lines[start]) == list(COLUMNS)
    rows = [_cells(line) for line in lines[start + 2:start + 6]]
    assert [r[0] for r in rows] == ["recorder / bare, mlp", "plain totals, mlp", "+ held-out test error, mlp",
                                    "TensorBoard histograms / bare, mlp"]
    figures = json.loads(out.read_text())
    assert [f["metric"].strip() for f in figures] == [r[0] for r in rows]
    judged = rows[0]
    assert judged[1] == "<= 1.05" and judged[4] == "2"
    median = float(judged[2])
    assert judged[5].startswith("pass" if median <= 1.05 else "FAIL")
    assert figures[0]["passed"] == (figures[0]["median"] <= 1.05)
    assert all(f["median"] > 0 and f["q1"] <= f["median"] <= f["q3"] for f in figures)


def test_the_vendored_yardstick_is_the_shared_one():
    """benchmarks/yardstick_vendored.py (run where ../shared/tools is absent) must not drift from the shared file."""
    from benchmarks.yardstick import SHARED, VENDORED, source

    if not SHARED.is_file():
        assert source() == VENDORED
        pytest.skip(f"no shared yardstick at {SHARED} (a clone outside the shared workplace)")
    assert source() == SHARED
    assert VENDORED.read_bytes() == SHARED.read_bytes(), \
        f"copy the shared yardstick again: cp {SHARED} {VENDORED}"


def test_yardstick_line_and_the_table_in_yardsticks():
    """The yardstick's line is parsed, and a table given it opens with that line and gives every figure in
    seconds (only those) also in yardsticks: median / yardstick."""
    from benchmarks.yardstick import in_yardsticks, parse

    yard = parse("loading...\nyardstick: train 0.50 s, render 1.00 s, sum 1.50 s\n", "test")
    assert (yard.train, yard.render, yard.seconds) == (0.5, 1.0, 1.5)
    assert in_yardsticks(3.0, yard) == "3.00 s (2.0 yardsticks)" and in_yardsticks(3.0, None) == "3.00 s"
    with pytest.raises(ValueError, match="no yardstick line"):
        parse("yardstick: train 0.5 s")
    rows = [("wall", Figure([30.0, 33.0, 36.0], Target("<=", 40), "s")), ("ratio", Figure([1.0], None, "x", [0.5])),
            ("step", Figure([3.0], None, "ms"))]
    first, header, _, wall, ratio, step = format_table(rows, yard).splitlines()
    assert first == str(yard) and first.startswith("yardstick: train 0.50 s, render 1.00 s, sum 1.50 s")
    assert _cells(header) == [*COLUMNS, "yardsticks"]
    assert _cells(wall)[-1] == "22" and _cells(step)[-1] == "0.002"  # 33 s / 1.5 s, 3 ms / 1.5 s
    assert _cells(ratio.rstrip(" |"))[-1] == "0.5-0.5"  # the load column ends it: a ratio has no yardsticks


def test_each_long_run_is_divided_by_the_yardsticks_around_it(monkeypatch):
    """run_all.bracketed: a yardstick just before and one just after the timed run, in that order around it,
    and their mean (not the table's first yardstick) is the run's own; without one (--quick) none is taken."""
    import benchmarks.yardstick as yardstick
    from benchmarks.run_all import bracketed

    events = []
    readings = iter([yardstick.Yardstick(0.2, 0.4, 0.6, "t"), yardstick.Yardstick(0.4, 0.6, 1.0, "t")])

    def fake_measure():
        events.append("yardstick")
        return next(readings)

    monkeypatch.setattr(yardstick, "measure", fake_measure)
    result, own = bracketed(lambda: events.append("run") or 16.0, True)
    assert events == ["yardstick", "run", "yardstick"] and result == 16.0
    assert (own.train, own.render, own.seconds) == pytest.approx((0.3, 0.5, 0.8))
    assert own.of(16.0) == pytest.approx(20.0)
    assert bracketed(lambda: 3, False) == (3, None) and events.count("yardstick") == 2


@pytest.mark.slow
def test_the_yardstick_runs_here():
    from benchmarks.yardstick import measure

    yard = measure()
    assert yard.train > 0 and yard.render > 0
    assert yard.seconds == pytest.approx(yard.train + yard.render, abs=0.011)  # the script rounds to 0.01 s


def test_run_all_rejects_an_unknown_metric():
    done = subprocess.run([sys.executable, "-m", "benchmarks.run_all", "--only", "nonsense"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "unknown metric 'nonsense'" in done.stderr


def test_the_record_cycle_estimate_ignores_one_slow_cycle_and_counts_the_last():
    """CycleClock: the median full cycle times the full cycles, plus the last cycle as it was; one cycle slowed
    from outside does not move it, a cost in every cycle does."""
    from benchmarks.bench_recorder import CycleClock

    def estimate(cycles):
        clock = CycleClock(10)
        clock.marks = [0.0]
        for c in cycles:
            clock.marks.append(clock.marks[-1] + c)
        return clock.estimate(), clock.total()

    even, total = estimate([1.0] * 19 + [1.5])
    assert even == pytest.approx(20.5) and total == pytest.approx(20.5)
    slowed, total = estimate([1.0] * 9 + [9.0] + [1.0] * 9 + [1.5])
    assert slowed == pytest.approx(20.5) and total == pytest.approx(28.5)
    assert estimate([1.1] * 19 + [1.5])[0] == pytest.approx(19 * 1.1 + 1.5)


@pytest.mark.slow  # trains or spawns (~1 s); the default run keeps the harness's pure checks, CI runs this
@pytest.mark.parametrize("variant", ["bare", "recorder"])
def test_instruction_counts_cover_the_training_steps_and_leave_out_the_test_passes(variant, monkeypatch):
    """bench_instructions switches callgrind on for the training steps only: on once before the first step, off
    after the last (before the trace's after-training measurements), and off around each held-out test pass of
    the recorded loop; every step runs while it is on."""
    from benchmarks import bench_instructions
    from simulation.kinds.mlp import MLPTask

    events, state = [], {"on": False}

    def instrument(on):
        assert on != state["on"], f"switched {'on' if on else 'off'} twice: {events}"
        state["on"] = on
        events.append("on" if on else "off")

    steps_seen = []
    original_batch, original_eval = MLPTask.batch, MLPTask.test_error

    def batch(self, step):
        steps_seen.append((step, state["on"]))
        return original_batch(self, step)

    def test_error(self):
        events.append(f"test:{'on' if state['on'] else 'off'}")
        return original_eval(self)

    monkeypatch.setattr(bench_instructions, "_instrument", instrument)
    monkeypatch.setattr(MLPTask, "batch", batch)
    monkeypatch.setattr(MLPTask, "test_error", test_error)
    bench_instructions.child(variant, "mlp", 12)  # records at steps 0 and 10 and the last, 11
    assert [s for s, _ in steps_seen] == list(range(12)) and all(on for _, on in steps_seen)
    if variant == "bare":
        assert events == ["on", "off"]
    else:
        assert events == ["on"] + ["off", "test:off", "on"] * 3 + ["off"]


def test_instruction_count_is_read_from_callgrinds_summary():
    from benchmarks.bench_instructions import _COLLECTED

    stderr = "==123== Events    : Ir\n==123== Collected : 1,234,567,890\n==123==\n==123== I   refs:  1,234,567,890\n"
    assert _COLLECTED.findall(stderr) == ["1,234,567,890"]


@pytest.mark.slow  # trains or spawns (~1 s); the default run keeps the harness's pure checks, CI runs this
def test_process_tree_sees_a_grandchild_and_sums_its_rss_as_proc_does(tmp_path):
    """benchmarks.process_tree on a child that starts a grandchild holding ~150 MiB: the walk finds both, the summed
    RSS equals /proc's VmRSS of the two (read without psutil) within what they touch between the reads, and a
    finished tree is empty with 0 bytes. ``python -m benchmarks.tree_rss`` reports that peak too."""
    from benchmarks.process_tree import processes, tree_rss

    ready = tmp_path / "ready"
    hold = ("import pathlib, sys, time; b = bytearray(150 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
            f"pathlib.Path({str(ready)!r}).write_text('1'); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c",
                              f"import subprocess, sys; subprocess.run([sys.executable, '-c', {hold!r}])"])
    try:
        for _ in range(200):
            if ready.exists():
                break
            time.sleep(0.05)
        tree = processes(child.pid)
        assert [p.pid for p in tree][0] == child.pid and len(tree) == 2

        def vm_rss(pid: int) -> int:
            line = next(t for t in Path(f"/proc/{pid}/status").read_text().splitlines() if t.startswith("VmRSS:"))
            return int(line.split()[1]) * 1024

        by_proc = sum(vm_rss(p.pid) for p in tree)
        measured = tree_rss(child.pid)
        assert measured >= 150 * 2**20
        assert abs(measured - by_proc) < 8 * 2**20
    finally:
        for p in reversed(processes(child.pid)):
            p.kill()
        child.wait()
    assert processes(child.pid) == [] and tree_rss(child.pid) == 0
    done = subprocess.run([sys.executable, "-m", "benchmarks.tree_rss", "--", sys.executable, "-c",
                           "b = bytearray(120 * 2**20); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(0.5)"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["peak_tree_rss"] >= 120 * 2**20
