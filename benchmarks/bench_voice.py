"""Speech seconds synthesised per wall-clock second, for every installed voice, on the lecture's own lines.

Example::

    .venv/bin/python -m benchmarks.bench_voice              # 12 lines per voice, 3 rounds
    .venv/bin/python -m benchmarks.bench_voice --lines 30 --rounds 5

Lines are the narration strings of the lecture's scenes (every n_* string, in the voice's language),
synthesised without the line cache (the engine is called directly) after one warm-up line that loads the
model. Voices are interleaved round by round, since the machine is shared: the figures are the median
and the spread (min-max) over rounds. Nothing is written to the cache.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


from scenes import SCENES_IN_ORDER
from narration import SAMPLE_RATE, VOICES


def _cpu() -> float:
    """CPU seconds of this process (all threads) and of its finished children (espeak-ng runs)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def lecture_lines(lang: str, count: int) -> list[str]:
    """The first ``count`` narration lines of the lecture in ``lang`` whose text needs no formatting."""
    from narration.i18n import messages

    said = messages(lang)
    lines = [said[f"{scene.__name__}.{key}"] for scene in SCENES_IN_ORDER
             for key in [name.rpartition(".")[2] for name in said if name.startswith(f"{scene.__name__}.")]
             if key.startswith("n_") and "{" not in said[f"{scene.__name__}.{key}"]]
    return lines[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from benchmarks.yardstick import measure

    yard = measure()  # the machine index, in the same run as the figures below
    print(yard, flush=True)
    engines = {name: e for name, e in VOICES.items() if not e.missing()}
    for name in set(VOICES) - set(engines):
        print(f"{name}: not installed ({', '.join(VOICES[name].missing())}); skipped")
    lines = {name: lecture_lines(e.lang, args.lines) for name, e in engines.items()}
    for name, engine in engines.items():
        engine.synthesize(lines[name][0])  # load the model outside the timing
    ratios: dict[str, list[float]] = {name: [] for name in engines}
    per_cpu: dict[str, list[float]] = {name: [] for name in engines}
    speech: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, engine in engines.items():
            start, cpu, seconds = time.perf_counter(), _cpu(), 0.0
            for line in lines[name]:
                seconds += len(engine.synthesize(line)) / SAMPLE_RATE
            ratios[name].append(seconds / (time.perf_counter() - start))
            per_cpu[name].append(seconds / max(1e-9, _cpu() - cpu))
            speech[name] = seconds
    print(f"{'voice':<12} {'lines':>5} {'speech s':>9} {'speech s / wall s':>24} {'speech s / CPU s':>11}")
    for name, values in ratios.items():
        print(f"{name:<12} {len(lines[name]):>5} {speech[name]:>9.1f} {statistics.median(values):>10.1f} "
              f"(min-max {min(values):.1f}-{max(values):.1f}) {statistics.median(per_cpu[name]):>8.1f}")
    print(f"median over {args.rounds} interleaved rounds; CPU s: this process (all threads) and espeak-ng's")


if __name__ == "__main__":
    main()
