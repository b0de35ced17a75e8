"""Write the tiny committed traces the frame and scene tests read (real training, a few KB each).

Example::

    python tests/data/make_traces.py                    # every experiment
    python tests/data/make_traces.py residual_response  # one
    python tests/data/make_traces.py --seeds            # only the extra seeds of TINY_SEEDS
    python tests/data/make_traces.py --user-like        # tests/data/model/<case>/: user-model-like traces

Each experiment's runs are trained with :data:`TINY` overrides (few steps, shallow nets) and saved as
``tests/data/<experiment>/<run>.npz`` (seed 0); the experiments of :data:`TINY_SEEDS` also get
``tests/data/<experiment>/seed<k>/<run>.npz`` for their extra seeds (scenes that draw the seed spread). After regenerating, regenerate the frame control data too:
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
from simulation.experiments import EXPERIMENTS, get_experiment  # noqa: E402
from cli.params import build_runs  # noqa: E402  parses string values as --set does
from simulation.runkeys import RunKey  # noqa: E402

__all__ = ["DATA_DIR", "TINY", "TINY_SEEDS", "tiny_overrides", "tiny_trace_files", "tiny_seed_trace_files",
           "tiny_trace_files_with_seeds", "write_tiny_traces", "USER_LIKE", "user_like_names", "user_like_trace_files",
           "write_user_like_traces"]

DATA_DIR = Path(__file__).resolve().parent

# Small enough to train in seconds, large enough that every scene has something to draw. Keys an
# experiment does not accept are dropped, so one default serves experiments added later.
DEFAULT_TINY = {"steps": 20, "depth": 4, "width": 16, "record_every": 10}
TINY: dict[str, dict] = {
    "vanishing": {"depths": "4,8", "activations": "sigmoid"},
    "degradation": {"depths": "3,6", "steps": 30},
    "shattered": {"depths": "2,6"},
    "exploding": {"gains": "1,3"},
    "depth_sweep": {"mlp_depths": "2,4,8", "conv_depths": "8,14"},
    "does_it_copy": {"steps": 40},
    "identity_fit": {"steps": 200, "lr": 0.01},
    "logit_lens": {"steps": 80},  # enough that the tiny GPT starts to reverse: the lens has an answer to find
    "shortcut_scale": {"depth": 6},
    "norm_free": {"depth": 8, "steps": 30},
    # conv nets of 8 and 14 layers, width 4, a 9 x 9 slice on 64 examples: ~2 s a run
    "loss_landscape": {"depths": "8,14", "width": 4, "steps": 30, "grid": 9, "eval_examples": 64},
    "hyper_connections": {"depth": 6, "width": 8, "steps": 40},
}

# Extra seeds (besides the base seed 0) of the experiments whose scenes draw the spread across seeds.
TINY_SEEDS: dict[str, tuple[int, ...]] = {"chain_rule": (1, 2), "degradation": (1, 2), "depth_sweep": (1, 2),
                                          "does_it_copy": (1, 2), "conveyor_belt": (1,), "residual_response": (1, 2),
                                          "paths": (1, 2), "shattered": (1, 2), "layernorm": (1, 2),
                                          "shortcut_scale": (1, 2), "norm_free": (1, 2),
                                          "rank_collapse": (1,), "loss_landscape": (1, 2),
                                          "hyper_connections": (1, 2), "logit_lens": (1,)}


def tiny_overrides(experiment: str) -> dict:
    """The :data:`TINY` overrides that ``experiment`` accepts (as strings, like ``--set``)."""
    known = get_experiment(experiment).params()
    wanted = {**DEFAULT_TINY, **TINY.get(experiment, {})}
    return {key: str(value) for key, value in wanted.items() if key in known}


def tiny_trace_files(experiment: str, folder: Path = DATA_DIR, seed: int | None = None) -> dict[RunKey, str] | None:
    """``{RunKey: path}`` of the tiny traces of ``experiment`` under ``folder`` (of ``seed``'s
    sub-folder when given; else the base seed, 0); None if any is missing."""
    runs = build_runs(experiment, _with_seed(tiny_overrides(experiment), seed))
    where = folder / experiment if seed is None else folder / experiment / f"seed{seed}"
    files = {key: where / f"{key.name}.npz" for key in runs}
    if not all(path.is_file() for path in files.values()):
        return None
    return {key: str(path) for key, path in files.items()}


def tiny_seed_trace_files(experiment: str, folder: Path = DATA_DIR) -> dict[int, dict[RunKey, str]]:
    """``{seed: {RunKey: path}}`` of the extra tiny seeds of ``experiment`` (:data:`TINY_SEEDS`) that
    are all on disk; empty for an experiment without extra seeds."""
    found = {seed: tiny_trace_files(experiment, folder, seed) for seed in TINY_SEEDS.get(experiment, ())}
    return {seed: files for seed, files in found.items() if files is not None}


def tiny_trace_files_with_seeds(experiment: str, folder: Path = DATA_DIR) -> dict[RunKey, str] | None:
    """``{RunKey: path}`` of the base seed's files and the extra seeds', in the order of the seeds (as
    ``build_runs`` with ``seeds`` keys them); None if the base seed's files are missing."""
    files = tiny_trace_files(experiment, folder)
    if files is None:
        return None
    for extra in tiny_seed_trace_files(experiment, folder).values():
        files.update(extra)
    return files


def _with_seed(overrides: dict, seed: int | None) -> dict:
    return overrides if seed is None else {**overrides, "seed": str(seed)}


def _train_in_scratch(configs: list) -> list:
    """Train ``configs`` now through a throw-away cache (each config to its own trainer); their traces."""
    previous = os.environ.get("RESIDUAL_CACHE")
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["RESIDUAL_CACHE"] = scratch
        try:
            return get_traces(configs, progress=False)
        finally:
            if previous is None:
                os.environ.pop("RESIDUAL_CACHE", None)
            else:
                os.environ["RESIDUAL_CACHE"] = previous


def write_tiny_traces(experiment: str, folder: Path = DATA_DIR, seed: int | None = None) -> dict[str, str]:
    """Train the tiny runs of ``experiment`` (with ``seed`` when given) now, through a throw-away cache so
    each config goes to its own trainer, and save them; returns ``{RunKey: path}``."""
    runs = build_runs(experiment, _with_seed(tiny_overrides(experiment), seed))
    traces = _train_in_scratch(list(runs.values()))
    where = folder / experiment if seed is None else folder / experiment / f"seed{seed}"
    return {key: str(trace.save(where / f"{key.name}.npz")) for key, trace in zip(runs, traces)}


# User-like traces for the scenes of a user's model (scenes/user_model.py): a real plain and residual ReLU +
# BatchNorm MLP of the same block count, trained a few steps, whose ``meta.layers`` are replaced by the module paths
# of a well-known residual net with that many residual additions, without the arrays a user model's trace may lack.
def user_like_names(case: str) -> list[str]:
    """The module paths of case ``gpt2_24`` (GPT-2, 12 layers: ``transformer.h.{i}.attn`` / ``.mlp``) or
    ``resnet152_50`` (``layer{s}.{i}`` over stages of 3, 8, 36, 3 bottleneck blocks)."""
    if case == "gpt2_24":
        return [f"transformer.h.{i}.{part}" for i in range(12) for part in ("attn", "mlp")]
    if case == "resnet152_50":
        return [f"layer{s}.{i}" for s, n in zip((1, 2, 3, 4), (3, 8, 36, 3)) for i in range(n)]
    raise KeyError(f"no user-like case {case!r}; cases: {', '.join(USER_LIKE)}")


USER_LIKE = ("gpt2_24", "resnet152_50")
_USER_LIKE_RUNS = {"width": 16, "steps": 40, "record_every": 10}  # residual_response's ReLU + BN MLPs, tiny
_ABSENT_IN_USER_TRACES = ("lesion_test_error", "input_sweep", "input_grad", "input_grad_autocorr",
                          "path_length_fraction")


def user_like_trace_files(case: str, folder: Path = DATA_DIR) -> dict[str, str] | None:
    """``{"plain": path, "residual": path}`` of user-like case ``case``; None if missing."""
    files = {name: folder / "model" / case / f"{name}.npz" for name in ("plain", "residual")}
    return {k: str(v) for k, v in files.items()} if all(p.is_file() for p in files.values()) else None


def tiled_traces(names: list[str], folder: Path, base: str = "resnet152_50") -> dict[str, str]:
    """Trace files of len(``names``) blocks named ``names``: a committed user-like run's per-block arrays
    tiled (layout tests only; the numbers are real, their order along the blocks is not)."""
    import numpy as np

    from simulation.trace import Trace

    files = {}
    for run, path in user_like_trace_files(base).items():
        trace = Trace.load(path)
        blocks = trace.meta.blocks
        pick = np.arange(len(names)) % blocks
        arrays = {k: (v[..., pick] if v.ndim == 2 and v.shape[-1] == blocks else v) for k, v in trace.arrays.items()}
        meta = {**trace.meta.to_dict(), "layers": list(names), "blocks": len(names)}
        files[run] = str(Trace(meta=meta, arrays=arrays).save(folder / f"{run}.npz"))
    return files


def write_user_like_traces(case: str, folder: Path = DATA_DIR) -> dict[str, str]:
    """Train and save the runs of user-like ``case`` (see :func:`user_like_names`)."""
    from simulation.trace import Trace

    names = user_like_names(case)
    overrides = {**{k: str(v) for k, v in _USER_LIKE_RUNS.items()}, "depth": str(len(names))}
    runs = build_runs("residual_response", overrides)
    traces = _train_in_scratch(list(runs.values()))
    out = {}
    for key, trace in zip(runs, traces):
        meta = {**trace.meta.to_dict(), "layers": names, "blocks": len(names)}
        arrays = {k: v for k, v in trace.arrays.items() if k not in _ABSENT_IN_USER_TRACES}
        out[key.name] = str(Trace(meta=meta, arrays=arrays).save(folder / "model" / case / f"{key.name}.npz"))
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--user-like":
        for case in args[1:] or USER_LIKE:
            for run_name, path in write_user_like_traces(case).items():
                print(f"{case:<18} {run_name:<24} {Path(path).stat().st_size:>7} bytes  {path}")
        sys.exit(0)
    only_seeds = "--seeds" in args
    names = [a for a in args if a != "--seeds"] or list(EXPERIMENTS)
    for name in names:
        jobs = [] if only_seeds else [None]
        jobs += list(TINY_SEEDS.get(name, ()))
        for seed in jobs:
            for key, path in write_tiny_traces(name, seed=seed).items():
                print(f"{name:<18} {key.name:<24} {Path(path).stat().st_size:>7} bytes  {path}")
