"""What several test files share: the command-line runner, the claims' seeds, the Transformer's reference pieces.

Example::

    from support import invoke, holds_on_most_seeds

Not a test module (no ``test_`` prefix): test files import from here, never from each other. The shared
fixtures (``isolated_cache``, ``one_thread``) are in conftest.py.
"""

from __future__ import annotations

import os
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable

from click.testing import CliRunner
from filelock import FileLock, Timeout

from render import cli
from simulation.cache import get_traces
from cli.params import build_runs  # parses string values as --set does
from simulation.runkeys import RunKey
from simulation.trace import Trace

__all__ = ["FULL_LANGS", "ROOT", "CLI_TINY", "invoke", "files_under", "cli_env", "tiny_frames", "write_clip", "wait_for", "SEEDS",
           "NEEDED", "trained_at_seed", "holds_on_most_seeds", "cached_traces", "shared_traces", "SHARED_CACHE_ENV",
           "at_seed", "forward_keeping_layers", "cross_entropy", "TRANSFORMER_TINY", "tiny_transformer",
           "recorded_transformer_row", "examples",
           "assert_same_trace", "together_as_alone", "assert_diverged_between_records",
           "seeds_diverging_between_records"]

# -- the command line -----------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
FULL_LANGS = ("en", "zh")  # every scene test runs in these; Spanish and the pseudo-locale: tests/test_i18n.py
CLI_TINY = ["--set", "steps=20", "--set", "depth=3"]  # tiny training runs: well under a second each


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []


def cli_env(cache: Path) -> dict:
    return {**os.environ, "RESIDUAL_CACHE": str(cache), "PYTHONPATH": str(ROOT / "tests")}


def tiny_frames(n: int = 6) -> list:
    """``n`` distinct RGB frames, uint8 [48, 64, 3]: a gradient that moves a little each frame."""
    import numpy as np

    x = np.arange(64)[None, :, None]
    return [np.broadcast_to((x * 4 + 10 * i) % 256, (48, 64, 3)).astype(np.uint8) for i in range(n)]


def write_clip(path: Path, frames: list, fps: int = 15) -> Path:
    """An mp4 of ``frames`` (RGB uint8 [48, 64, 3]) written with PyAV: intra-only MPEG-4, so that changing one
    frame's pixels changes that decoded frame alone; no scene is rendered."""
    import av

    with av.open(str(path), mode="w") as out:
        stream = out.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.gop_size = 1  # every frame a key frame
        stream.codec_context.qmax = 2
        for pixels in frames:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")))
        out.mux(stream.encode(None))
    return path


def wait_for(predicate, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


# -- Hypothesis ----------------------------------------------------------------------------------------

def examples(n: int) -> int:
    """``n`` Hypothesis examples under the "ci" profile (.ci/run), scaled by the loaded profile's
    ``max_examples`` / 100 otherwise (conftest.py: "fast", the default run: about a third), at least 2."""
    from hypothesis import settings

    return max(2, round(n * settings.default.max_examples / 100))


# -- claims on seeds ----------------------------------------------------------------------------------

SEEDS = range(5)
NEEDED = 4
SHARED_CACHE_ENV = "RESIDUAL_TEST_CACHE"  # the claim tests' trace cache, one per test session (conftest.py) or CI run
_TRACES: dict[str, Trace] = {}  # by config digest: what this process has read from the shared cache


@contextmanager
def _cache_at(folder: str):
    """``$RESIDUAL_CACHE`` set to ``folder`` inside the block (the per-test cache of conftest's isolated_cache
    is back after it)."""
    before = os.environ.get("RESIDUAL_CACHE")
    os.environ["RESIDUAL_CACHE"] = folder
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RESIDUAL_CACHE", None)
        else:
            os.environ["RESIDUAL_CACHE"] = before


def shared_traces(configs: list, here: bool = False) -> list[Trace]:
    """Traces of ``configs`` in order, through the claim tests' shared cache ``$RESIDUAL_TEST_CACHE``: a run
    that several claim tests train (residual_response's and paths' nets, layernorm's Post-LN with warm-up and
    conveyor_belt's Post-LN, ...) is trained once per test session, whichever xdist worker asks first; CI
    (.ci/run) keeps one folder for both of its pytest runs. Trained through :func:`simulation.cache.get_traces`
    (the product's path: in this process, or a local sweep for many runs; ``here=True``: in this process) into
    that folder.

    Each run has a lock file beside its trace: the runs whose lock is free are locked and trained together; a
    run locked by the other worker (training it now) is waited for afterwards, one lock at a time (no
    deadlock), and read from the cache (trained here if that worker failed)."""
    folder = os.environ[SHARED_CACHE_ENV]
    unique = {c.digest(): c for c in configs}
    wanted = [d for d in sorted(unique) if d not in _TRACES]
    waiting, scheduler = [], "local" if here else None
    with ExitStack() as held:
        mine = []
        for digest in wanted:
            lock = FileLock(os.path.join(folder, f"{digest}.lock"))
            try:
                lock.acquire(timeout=0)
            except Timeout:
                waiting.append(digest)
                continue
            held.callback(lock.release)
            mine.append(digest)
        with _cache_at(folder):
            _TRACES.update(zip(mine, get_traces([unique[d] for d in mine], progress=False, log_hits=False,
                                                 scheduler=scheduler)))
    for digest in waiting:
        with FileLock(os.path.join(folder, f"{digest}.lock")), _cache_at(folder):
            _TRACES[digest] = get_traces([unique[digest]], progress=False, log_hits=False, scheduler=scheduler)[0]
    return [_TRACES[c.digest()] for c in configs]


def trained_at_seed(experiment: str, seed: int, **overrides: object) -> dict[str, Trace]:
    """``{name: Trace}``: the runs of ``experiment`` at ``seed`` with ``overrides``, trained once per test session
    (:func:`shared_traces`), in this process."""
    runs = build_runs(experiment, {**overrides, "seed": seed})
    return {key.name: trace for key, trace in zip(runs, shared_traces(list(runs.values()), here=True))}


def holds_on_most_seeds(check: Callable[[int], tuple[bool, str]]) -> None:
    """Run ``check(seed)`` -> (holds, figures) on every seed; fail unless it holds on NEEDED of them."""
    results = {seed: check(seed) for seed in SEEDS}
    passed = sum(holds for holds, _ in results.values())
    report = "\n".join(f"seed {seed}: {'ok  ' if ok else 'FAIL'} {figures}" for seed, (ok, figures) in results.items())
    assert passed >= NEEDED, f"claim held on {passed} of {len(results)} seeds (need {NEEDED}):\n{report}"


def cached_traces(experiment: str, **overrides: object) -> dict[RunKey, Trace]:
    """``{RunKey: Trace}``: the runs of ``experiment`` with ``overrides``, trained once per test session
    (:func:`shared_traces`)."""
    runs = build_runs(experiment, dict(overrides))
    return dict(zip(runs, shared_traces(list(runs.values()))))


def at_seed(t: dict[RunKey, Trace], name: str, seed: int) -> Trace:
    """Run ``name`` at ``seed``."""
    return t[RunKey(name, seed)]


# -- the Transformer -------------------------------------------------------------------------------

TRANSFORMER_TINY = dict(depth=2, width=16, heads=2, ffn_width=32, vocab=5, seq_len=5, batch_size=8, steps=6, record_every=2,
            init_batches=2)  # a Transformer that trains in well under a second


def forward_keeping_layers(model, src, tgt_in):
    """Seq2SeqTransformer.forward, re-written here so that every layer output is kept for autograd."""
    outputs = []
    x = model._embed(src)
    for layer in model.encoder:
        x = layer(x)
        outputs.append(x)
    memory = model.enc_ln_f(x)
    if not len(model.decoder):
        return model.head(memory), outputs
    y = model._embed(tgt_in)
    for layer in model.decoder:
        y = layer(y, memory)
        outputs.append(y)
    return model.head(model.dec_ln_f(y)), outputs


def cross_entropy(logits, tgt):
    """Token-level cross-entropy of ``logits`` [N, T, V] against ``tgt`` [N, T]."""
    from torch.nn import functional as F

    return F.cross_entropy(logits.flatten(0, 1), tgt.flatten())


def tiny_transformer(seed: int, **fields: object):
    """(config, model): ``TransformerConfig(**TRANSFORMER_TINY, **fields)`` and its model in float64, the weights
    drawn after ``torch.manual_seed(seed)``."""
    import torch

    from simulation.config import TransformerConfig
    from simulation.kinds.transformer import build_transformer

    config = TransformerConfig(**fields, **TRANSFORMER_TINY)
    torch.manual_seed(seed)
    return config, build_transformer(config).double()


def recorded_transformer_row(model, src, tgt_in, tgt) -> dict:
    """The TransformerRecorder's row (``collect``) for one armed step: ``model(src, tgt_in)``'s cross-entropy
    against ``tgt``, then backward."""
    from simulation.kinds.transformer import TransformerRecorder

    with TransformerRecorder(model) as rec:
        rec.arm()
        cross_entropy(model(src, tgt_in), tgt).backward()
        return rec.collect()


# -- seeds trained together (simulation.kinds.stacked, simulation.kinds.stacked_transformer) -------------------

def assert_same_trace(alone: Trace, together: Trace, seeds: tuple[int, ...]) -> None:
    """``together`` (trained with ``seeds`` as one stacked model) is ``alone`` (the same config trained alone):
    every array equal, dtype included (not close), the metadata equal but for ``trained_with_seeds``."""
    import numpy as np

    assert set(alone.arrays) == set(together.arrays)
    for key in alone.arrays:
        assert alone[key].dtype == together[key].dtype, key
        assert np.array_equal(alone[key], together[key], equal_nan=True), (key, alone.meta.seed)
    a, b = alone.meta.to_dict(), together.meta.to_dict()
    assert a.pop("trained_with_seeds") is None
    assert b.pop("trained_with_seeds") == list(seeds)  # the trace says how it was trained
    assert a == b


def together_as_alone(run: Callable, run_together: Callable, configs: list) -> list[Trace]:
    """``run_together(configs)`` (runs that differ only in their seed), each trace checked against ``run(config)``
    alone with :func:`assert_same_trace`; returns the traces trained together."""
    together = run_together(configs)
    for config, trace in zip(configs, together):
        assert_same_trace(run(config), trace, tuple(c.seed for c in configs))
    return together


def seeds_diverging_between_records(run: Callable, base, lrs: tuple[float, ...], seeds=range(8), size: int = 3):
    """Configs of ``base`` (``size`` seeds at the first of ``lrs`` that gives one) each trained alone by ``run``, of
    which one diverges between two records (``base.record_every``) and one trains to the end.

    Where divergence sets in is chaotic at a large learning rate: the same seed at the same ``lr`` diverges at
    step 3 on one CPU and trains on on another (AVX2 and AVX-512 kernels round differently), so the test looks
    for such a group on the machine it runs on instead of hard-coding one. Raises AssertionError when no ``lr``
    gives one (the scan's outcomes in the message). Seeds are trained in order until the group is known: the same
    group as training all of them, for less."""
    tried = {}
    for lr in lrs:
        steps = tried[lr] = {}
        for seed in seeds:  # in order, until the group is known: the first of each kind and the first others
            steps[seed] = run(base.replace(lr=lr, seed=seed)).meta.diverged_step
            between = [s for s, d in steps.items() if d is not None and d % base.record_every]
            trained = [s for s, d in steps.items() if d is None]
            if between and trained and (len(steps) >= size or len(steps) == len(seeds)):
                rest = [s for s in steps if s not in (between[0], trained[0])]
                return [base.replace(lr=lr, seed=s) for s in sorted([between[0], trained[0], *rest[:size - 2]])]
    raise AssertionError(f"no learning rate of {lrs} gives a seed that diverges between records and one that "
                         f"trains on: {tried}")


def assert_diverged_between_records(traces: list[Trace], record_every: int) -> None:
    """Of ``traces`` (seeds trained together), one diverged and one trained to the end, and a divergence fell
    between two records (a step that ran stacked, re-run alone to be recorded)."""
    steps = [t.meta.diverged_step for t in traces]
    assert any(s is not None for s in steps) and None in steps, steps
    assert any(s is not None and s % record_every for s in steps), steps

