"""Memory guard: estimate what a run needs before it starts, refuse one that would not fit (torch-free).

Example::

    python -m simulation '{"depth": 1000, "width": 4096}'

One estimator per run kind (:func:`mlp_memory`, :func:`conv_memory`, :func:`transformer_memory`,
:func:`identity_fit_memory`, :func:`highway_memory`; :mod:`simulation.runs` picks one per config: ``simulation.runs.estimate``) counts
float32 tensors: the parameters; their gradients; the optimiser's state (SGD momentum: 1 copy, Adam: 2) plus one
more copy for the transient of a step (the foreach update, or the recorder stacking every weight gradient of one
shape); and the activations kept for backward, for the largest batch that goes through the network with autograd on
(the training batch, or the 256-point input sweep of the MLP), including the dL/dh the recorder keeps per block on
a recorded step. It leaves out the interpreter and torch themselves (a few hundred MB, present before any run).
``benchmarks/bench_simulation.py`` and ``tests/test_memory.py`` compare it with the measured peak (within a factor
of 2).

The budget (:func:`budget_bytes`) is half of the memory available now (``MemAvailable`` in /proc/meminfo), or
``$RESIDUAL_MEMORY_BUDGET``: a fraction of the available memory (``0.8``) or a size (``6G``, ``500M``,
``123456789``). :func:`check_budget` (``simulation.runs.check_memory`` for a config) raises
:class:`~simulation.config.ConfigError` with one line that gives the estimate when a run would exceed it.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

from .config import ConfigError, HighwayConfig, IdentityFitConfig, RunConfig, TransformerConfig, UserModelConfig

__all__ = ["MemoryEstimate", "mlp_memory", "conv_memory", "transformer_memory", "identity_fit_memory", "probe_in_subprocess", "highway_memory", "budget_bytes",
           "check_budget", "measure_peak", "available_bytes", "DATA_SHAPES", "BUDGET_ENV", "DEFAULT_FRACTION"]

BUDGET_ENV = "RESIDUAL_MEMORY_BUDGET"
DEFAULT_FRACTION = 0.5
FLOAT = 4  # bytes of a float32
TEST_SEQUENCES = 512  # the Transformer's held-out set (TransformerTask.test_set; a test keeps the two equal)
SWEEP_POINTS = 256  # the MLP's input sweep (simulation.kinds.mlp.SWEEP_POINTS; a test keeps the two equal)
# (features, classes) of each data set (simulation.data; a test keeps them equal).
DATA_SHAPES = {"digits": (64, 10), "bands": (1, 2)}


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a run needs, by part; :attr:`total` is their sum. ``activations=None``: not measured (a user's model
    whose parameters alone are over the budget is refused before it is built); :attr:`total` is then a floor."""

    parameters: int
    gradients: int
    optimizer: int  # optimiser state plus one transient copy of the parameters
    activations: int | None  # kept for backward, largest batch

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer + (self.activations or 0)

    def describe(self) -> str:
        if self.activations is None:
            return (f"at least {_size(self.total)} (parameters {_size(self.parameters)}, gradients "
                    f"{_size(self.gradients)}, optimiser {_size(self.optimizer)}; activations not measured)")
        return (f"about {_size(self.total)} (parameters {_size(self.parameters)}, gradients {_size(self.gradients)}, "
                f"optimiser {_size(self.optimizer)}, activations {_size(self.activations)})")


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.3g} {unit}"
        n /= 1000
    raise AssertionError


def mlp_memory(config: RunConfig) -> MemoryEstimate:
    n_in, n_out = DATA_SHAPES[config.dataset]
    bn = config.norm == "batchnorm"
    widths = config.block_widths()
    params = n_in * widths[0][0] + widths[0][0] + widths[-1][1] * n_out + n_out
    # Per example: the block tensors kept for backward (3 without BatchNorm, 5 with it, one more for the
    # residual sum) and the dL/dh the recorder holds.
    per_unit = (3 + 2 * bn) + (config.arch == "residual") + 1
    activations = n_in
    for w_in, w_out in widths:
        params += w_in * w_out + w_out + w_out * w_out + w_out + (4 * w_out if bn else 0)
        if config.arch == "residual" and w_in != w_out and config.shortcut == "projection":
            params += w_in * w_out + (2 * w_out if bn else 0)
        if config.gate != "none":  # W_g, b_g; the gate and its two products are kept for backward
            params += w_in * w_out + w_out
            activations += 3 * w_out
        activations += per_unit * w_out
    state = 2 if config.optimizer == "adam" else 1 if config.momentum else 0
    batch = max(config.batch_size, SWEEP_POINTS)
    return MemoryEstimate(params * FLOAT, params * FLOAT, (state + 1) * params * FLOAT, batch * activations * FLOAT)


def highway_memory(config: HighwayConfig) -> MemoryEstimate:
    """simulation.kinds.highway's nets: blocks of one w x w Linear (H), and for highway blocks a second one (the gate T).
    Per example and block kept for backward: H's pre-activation and output and the recorder's dL/dh; the residual
    sum; for a highway block the gate's pre-activation, T, T H, 1 - T, (1 - T) x and the sum."""
    n_in, n_out = DATA_SHAPES["digits"]
    w, highway = config.width, config.arch == "highway"
    params = n_in * w + w + w * n_out + n_out + config.depth * (1 + highway) * (w * w + w)
    per_block = 3 + (config.arch == "residual") + 6 * highway
    state = 2 if config.optimizer == "adam" else 1 if config.momentum else 0
    batch = max(config.batch_size, SWEEP_POINTS)
    activations = n_in + config.depth * per_block * w
    return MemoryEstimate(params * FLOAT, params * FLOAT, (state + 1) * params * FLOAT, batch * activations * FLOAT)


def conv_memory(config: RunConfig) -> MemoryEstimate:
    """He et al. 2015 §4.2 nets (simulation.kinds.conv): 3x3 convs on 8x8, 4x4, 2x2 maps of w, 2w, 4w channels."""
    n_in, n_out = DATA_SHAPES[config.dataset]
    bn = config.norm == "batchnorm"
    side = int(round(n_in ** 0.5))  # 8x8 digits
    w = config.width
    params = 9 * w + 2 * w + 4 * w * n_out + n_out
    activations = n_in + 3 * w * side * side  # the image, the stem's conv, BN and activation
    # Per block and example: two convs, two BNs, the sum and two activations (7 maps), and the recorder's dL/dh.
    per_map = (5 + 2 * bn) + 1
    for w_in, w_out in config.block_widths():
        params += 9 * w_in * w_out + 9 * w_out * w_out + 4 * w_out
        if config.arch == "residual" and w_in != w_out and config.shortcut == "projection":
            params += w_in * w_out + 2 * w_out
        maps = side // (2 if w_out > w else 1) // (2 if w_out > 2 * w else 1)
        activations += per_map * w_out * maps * maps
    state = 2 if config.optimizer == "adam" else 1 if config.momentum else 0
    batch = max(config.batch_size, SWEEP_POINTS)
    return MemoryEstimate(params * FLOAT, params * FLOAT, (state + 1) * params * FLOAT, batch * activations * FLOAT)


def transformer_memory(config: TransformerConfig) -> MemoryEstimate:
    w, f, v, t, h = config.width, config.ffn_width, config.vocab + 1, config.seq_len, config.heads
    t *= 2 if config.arch == "decoder_only" else 1  # a GPT reads source and target: 2T tokens
    attn, ffn, ln = 4 * w * w + 4 * w, 2 * w * f + w + f, 2 * w
    n_dec = config.depth if config.arch == "encoder_decoder" else 0
    params = v * w + w * v + v + config.depth * (attn + ffn + 2 * ln) + n_dec * (2 * attn + ffn + 3 * ln) + 2 * ln
    # Per sequence: an attention sublayer keeps ~8 [T, w] tensors and 3 [heads, T, T] (scores, mask, softmax);
    # an FFN 2 [T, ffn_width] and 3 [T, w]; every sublayer's Add & Norm 3 [T, w].
    attn_act, ffn_act = 8 * t * w + 3 * h * t * t + 3 * t * w, 2 * t * f + 6 * t * w
    per_sequence = config.depth * (attn_act + ffn_act) + n_dec * (2 * attn_act + ffn_act) + 2 * t * v
    # The held-out test pass (TransformerTask: TEST_SEQUENCES at once, no grad) holds one sublayer's tensors at a
    # time: scores and softmax [heads, T, T], the FFN's [T, ffn_width], a few [T, w] and the logits [T, vocab].
    # Measured RSS adds it to the training peak (freed training tensors stay in the allocator's heap).
    held_out = TEST_SEQUENCES * (3 * h * t * t + 2 * t * f + 4 * t * w + 2 * t * v)
    return MemoryEstimate(params * FLOAT, params * FLOAT, 3 * params * FLOAT,
                          (config.batch_size * per_sequence + held_out) * FLOAT)


def identity_fit_memory(config: IdentityFitConfig) -> MemoryEstimate:
    n_in, _ = DATA_SHAPES["digits"]
    params = 2 * (n_in * n_in + n_in)  # one block Linear -> activation -> Linear, width = the features
    state = 2 if config.optimizer == "adam" else 1
    # Full batch: the whole training split and ~4 [N, width] tensors kept for backward.
    return MemoryEstimate(params * FLOAT, params * FLOAT, (state + 1) * params * FLOAT, 1797 * 5 * n_in * FLOAT)


def probe_in_subprocess(config: UserModelConfig) -> MemoryEstimate:
    """A user's model built and probed in a subprocess (``python -m simulation.kinds.user_model --estimate``), so
    that a torch-free caller (a scene, render.py) stays torch-free; the model and its plain twin have the same
    parameters and activations, so one probe serves both. Raises ConfigError (one line) when the model cannot
    be built or run. The table of kinds (``simulation.runs``) calls it for a process without torch."""
    import json

    return _probe_in_subprocess(json.dumps(config.replace(arch="residual").to_dict(), sort_keys=True))


@functools.lru_cache(maxsize=16)
def _probe_in_subprocess(config_json: str) -> MemoryEstimate:
    import json
    import subprocess
    import sys
    from pathlib import Path

    # __package__: simulation, or residual_lecture.simulation in an installed copy (residual_lecture/__init__.py)
    done = subprocess.run([sys.executable, "-m", f"{__package__}.kinds.user_model", "--estimate", config_json],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:  # no line: the user's code ended the probe itself
        why = done.stderr.strip().splitlines() or [f"the model could not be built and probed (exit status "
                                                    f"{done.returncode}, nothing printed)"]
        raise ConfigError(why[-1].removeprefix("error: "))
    return MemoryEstimate(**json.loads(lines[-1]))


def available_bytes() -> int:
    """Memory available to new work now: ``MemAvailable`` of /proc/meminfo, else physical memory."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def budget_bytes(setting: str | None = None) -> tuple[int, str]:
    """The budget in bytes and how it was set. ``setting`` (default ``$RESIDUAL_MEMORY_BUDGET``): a fraction
    in (0, 1] of the available memory, or a size such as ``6G``. Raises ConfigError for anything else."""
    setting = os.environ.get(BUDGET_ENV, "") if setting is None else setting
    text = setting.strip().upper().removesuffix("B").removesuffix("I")
    if not text:
        available = available_bytes()
        return int(DEFAULT_FRACTION * available), f"{DEFAULT_FRACTION:.0%} of {_size(available)} available"
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)", text)
    if match is None:
        raise ConfigError(f"{BUDGET_ENV} must be a fraction such as 0.8 or a size such as 6G; got {setting!r}")
    number, unit = float(match[1]), match[2]
    if not unit and "." in match[1] or not unit and number <= 1:
        if not 0 < number <= 1:
            raise ConfigError(f"{BUDGET_ENV} as a fraction must be in (0, 1]; got {setting!r}")
        available = available_bytes()
        return int(number * available), f"{number:.0%} of {_size(available)} available ({BUDGET_ENV})"
    return int(number * _UNITS[unit]), f"{BUDGET_ENV}={setting}"


def check_budget(digest: str, needed: MemoryEstimate, budget: int | None = None) -> MemoryEstimate:
    """``needed`` (the estimate of the run with this digest); raises ConfigError (one line, with the estimate)
    when it exceeds ``budget`` bytes (default :func:`budget_bytes`)."""
    limit, how = (budget, f"{_size(budget)} given") if budget is not None else budget_bytes()
    if needed.total > limit:
        raise ConfigError(f"run {digest} would need {needed.describe()}, over the memory budget of "
                          f"{_size(limit)} ({how}; set {BUDGET_ENV} to change it)")
    return needed


def _rss_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"no {field} in /proc/self/status")


def measure_peak(run, config) -> int:
    """Peak resident memory, in bytes, that ``run(config, progress=False)`` (the kind's trainer,
    :func:`simulation.runs.trainer`) adds to this process (Linux only).

    Trains a tiny run of the same kind first, so that torch's one-off allocations (kernels, thread pools)
    are not counted, then resets the peak (``/proc/self/clear_refs``) and reads ``VmHWM - VmRSS`` around
    the real run. Imports torch: call it in a subprocess (``python -m simulation --measure CONFIG``)."""
    import gc

    run(config.replace(depth=1, steps=2, record_every=1), progress=False)
    gc.collect()
    try:  # give freed heap pages back, so that an earlier run's leftovers do not hide this one's peak
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    before = _rss_kib("VmRSS")
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")  # reset VmHWM to the current RSS
    run(config, progress=False)
    return (_rss_kib("VmHWM") - before) * 1024
