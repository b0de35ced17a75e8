"""Write the tiny committed traces the frame and scene tests read (real training, a few KB each).

Example::

    python tests/data/make_traces.py                    # every experiment
    python tests/data/make_traces.py residual_response  # one

Each experiment's runs are trained with :data:`TINY` overrides (few steps, shallow nets) and saved as
``tests/data/<experiment>/<run>.npz``. After regenerating, regenerate the frame control data too:
``pytest tests/test_frames.py --set_test``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from simulation.cache import get_traces  # noqa: E402
from simulation.experiments import EXPERIMENTS, build_runs, get_experiment  # noqa: E402

__all__ = ["DATA_DIR", "TINY", "tiny_overrides", "tiny_trace_files", "write_tiny_traces"]

DATA_DIR = Path(__file__).resolve().parent

# Small enough to train in seconds, large enough that every scene has something to draw. Keys an
# experiment does not accept are dropped, so one default serves experiments added later.
DEFAULT_TINY = {"steps": 20, "depth": 4, "width": 16, "record_every": 10}
TINY: dict[str, dict] = {
    "vanishing": {"depths": "4,8", "activations": "sigmoid"},
    "degradation": {"depths": "3,6", "steps": 30},
    "shattered": {"depths": "2,6"},
    "exploding": {"gains": "1,3"},
    "does_it_copy": {"seeds": 3, "steps": 40},
    "identity_fit": {"steps": 200, "lr": 0.01},
    "conveyor_belt": {"seeds": 2},
}


def tiny_overrides(experiment: str) -> dict:
    """The :data:`TINY` overrides that ``experiment`` accepts (as strings, like ``--set``)."""
    known = get_experiment(experiment).params()
    wanted = {**DEFAULT_TINY, **TINY.get(experiment, {})}
    return {key: str(value) for key, value in wanted.items() if key in known}


def tiny_trace_files(experiment: str, folder: Path = DATA_DIR) -> dict[str, str] | None:
    """``{run_name: path}`` of the tiny traces of ``experiment`` under ``folder``; None if any is missing."""
    runs = build_runs(experiment, tiny_overrides(experiment))
    files = {name: folder / experiment / f"{name}.npz" for name in runs}
    if not all(path.is_file() for path in files.values()):
        return None
    return {name: str(path) for name, path in files.items()}


def write_tiny_traces(experiment: str, folder: Path = DATA_DIR) -> dict[str, str]:
    """Train the tiny runs of ``experiment`` now (through a throw-away cache, so each config goes to
    its own trainer) and save them; returns ``{run_name: path}``."""
    runs = build_runs(experiment, tiny_overrides(experiment))
    previous = os.environ.get("RESIDUAL_CACHE")
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["RESIDUAL_CACHE"] = scratch
        try:
            traces = get_traces(list(runs.values()), progress=False)
        finally:
            if previous is None:
                os.environ.pop("RESIDUAL_CACHE", None)
            else:
                os.environ["RESIDUAL_CACHE"] = previous
    out = {}
    for name, trace in zip(runs, traces):
        out[name] = str(trace.save(folder / experiment / f"{name}.npz"))
    return out


if __name__ == "__main__":
    for name in sys.argv[1:] or list(EXPERIMENTS):
        for run_name, path in write_tiny_traces(name).items():
            print(f"{name:<18} {run_name:<24} {Path(path).stat().st_size:>7} bytes  {path}")
