"""The machine index: run the project's yardstick and express absolute times in yardsticks (time / yardstick).

Example::

    python -m benchmarks.yardstick            # prints: yardstick: train 0.61 s, render 0.93 s, sum 1.54 s (...)

The workload lives in ``../shared/tools/yardstick.py`` (the nearest ``shared/tools`` above the checkout) (300 SGD steps of a fixed MLP on one thread + a fixed
4-second Manim scene at ``-q l``), shared by every project on this machine. When that file exists it is the one
run, unchanged; elsewhere (a fresh clone) the copy ``benchmarks/yardstick_vendored.py`` is run instead, and
``tests/test_benchmarks.py`` checks that the copy equals the shared file wherever the shared file exists.
It runs in a process of its own (one thread, its own Manim config), so nothing of the caller leaks into it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SHARED", "VENDORED", "Yardstick", "source", "measure", "parse", "in_yardsticks"]

HERE = Path(__file__).resolve().parent
# ../shared/tools beside the checkout (or beside a folder holding it: a worktree under ../wt/NAME)
SHARED = next((p / "shared" / "tools" / "yardstick.py" for p in HERE.parent.parents
               if (p / "shared" / "tools" / "yardstick.py").is_file()), HERE.parent.parent / "shared" / "tools" / "yardstick.py")
VENDORED = HERE / "yardstick_vendored.py"
_LINE = re.compile(r"yardstick: train (?P<train>[\d.]+) s, render (?P<render>[\d.]+) s, sum (?P<sum>[\d.]+) s")


@dataclass(frozen=True)
class Yardstick:
    """One measurement: seconds of the training part, of the render part, and their sum (the yardstick)."""

    train: float
    render: float
    seconds: float  # train + render: one yardstick, in seconds
    source: str  # the file that was run

    def __str__(self) -> str:
        return (f"yardstick: train {self.train:.2f} s, render {self.render:.2f} s, sum {self.seconds:.2f} s "
                f"({self.source})")

    def of(self, seconds: float) -> float:
        """``seconds`` in yardsticks."""
        return seconds / self.seconds

    @classmethod
    def between(cls, before: "Yardstick", after: "Yardstick") -> "Yardstick":
        """The mean of a yardstick taken just before a timed run and one just after it: the machine's speed
        drifts by ~15 % within minutes here, so a long run is divided by the yardstick of its own minutes."""
        return cls((before.train + after.train) / 2, (before.render + after.render) / 2,
                   (before.seconds + after.seconds) / 2, before.source)


def source() -> Path:
    """The yardstick file to run: the shared one when present, else the vendored copy."""
    return SHARED if SHARED.is_file() else VENDORED


def parse(text: str, origin: str = "") -> Yardstick:
    """The yardstick line in ``text`` (the script's output); ValueError if there is none."""
    match = _LINE.search(text)
    if match is None:
        raise ValueError(f"no yardstick line in the output of {origin or 'the yardstick'}: {text.strip()[-300:]!r}")
    return Yardstick(float(match["train"]), float(match["render"]), float(match["sum"]), origin)


def measure(python: str = sys.executable) -> Yardstick:
    """Run the yardstick (~10-20 s) in a fresh process; RuntimeError with its last lines if it fails."""
    script = source()
    done = subprocess.run([python, str(script)], capture_output=True, text=True, cwd=HERE.parent)
    if done.returncode:
        raise RuntimeError(f"{script} failed ({done.returncode}): {done.stderr.strip()[-1000:]}")
    return parse(done.stdout, str(script))


def in_yardsticks(seconds: float, yard: Yardstick | None) -> str:
    """``"12.30 s (8.0 yardsticks)"``; just the seconds without a yardstick."""
    if yard is None:
        return f"{seconds:.2f} s"
    return f"{seconds:.2f} s ({yard.of(seconds):.1f} yardsticks)"


if __name__ == "__main__":
    print(measure())
