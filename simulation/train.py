"""Train one plain or residual network on real data and record what happened inside it.

Example::

    python -m simulation.train --set arch=residual --set depth=20

``run(config) -> Trace`` has no globals and no side effects beyond torch's thread count, which it
restores. The same config gives a bit-identical trace on CPU (one thread, seeded everything).
"""

from __future__ import annotations

import logging
import math
import platform
import sys
import time

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from .config import ConfigError, RunConfig, config_from_sets
from .data import BANDS_RANGE, Dataset, load_dataset
from .models import MLP, build_model
from .record import COUNT_KEYS, STAT_KEYS, Recorder
from .summary import autocorrelation, path_length_fraction
from .trace import Trace

__all__ = ["run", "record_steps", "input_gradient", "lesion_test_errors", "make_optimizer", "SWEEP_POINTS",
           "AUTOCORR_LAGS"]

log = logging.getLogger(__name__)

SWEEP_POINTS = 256  # inputs of the gradient sweep (Balduzzi et al. 2017 use 256 points on [-2, 2])
AUTOCORR_LAGS = 64  # lags 0..63 of the sweep gradient's autocorrelation


def record_steps(config: RunConfig) -> list[int]:
    """Steps at which statistics are recorded: 0, every ``record_every``, and the last step."""
    steps = list(range(0, config.steps, config.record_every))
    if steps[-1] != config.steps - 1:
        steps.append(config.steps - 1)
    return steps


def _error(logits: torch.Tensor, y: torch.Tensor) -> float:
    return float((logits.argmax(1) != y).float().mean())


def sweep_direction(n_in: int, seed: int) -> torch.Tensor:
    """Unit vector u [n_in] of the input sweep: exactly 1 for a scalar input, else seeded Gaussian."""
    if n_in == 1:
        return torch.ones(1)
    u = torch.randn(n_in, generator=torch.Generator().manual_seed(seed + 2))
    return u / u.norm()


@torch.inference_mode()
def _eval_error(model: MLP, x: torch.Tensor, y: torch.Tensor, skip: int | None = None) -> float:
    """Error of ``model`` as it is (call in eval mode for test figures) on ``x``, ``y``."""
    return _error(model(x, skip=skip), y)


def input_gradient(model: MLP, t: torch.Tensor, direction: torch.Tensor) -> np.ndarray:
    """dy/dt at every point of ``t`` [P], where the input is x = t u (``direction`` u [n_in]) and
    y = z_1 - z_0 is the difference of the first two logits: for a scalar input this is the gradient
    of the output with respect to the input that Balduzzi et al. 2017 (Fig. 1) sweep over [-2, 2].

    The P points go through the network as one batch in train mode, as in the paper: BatchNorm
    normalises with the statistics of the sweep (so the value at t_i is d(sum_j y_j)/dt_i), and its
    running statistics are restored afterwards. float64 [P]."""
    was_training = model.training
    saved = {name: buffer.clone() for name, buffer in model.named_buffers()}
    model.train()
    try:
        t = t.detach().clone().requires_grad_(True)
        logits = model(t[:, None] * direction[None, :])
        (grad,) = torch.autograd.grad((logits[:, 1] - logits[:, 0]).sum(), t)
    finally:
        with torch.no_grad():
            for name, buffer in model.named_buffers():
                buffer.copy_(saved[name])
        model.train(was_training)
    return grad.detach().double().numpy()


def lesion_test_errors(model: MLP, data: Dataset) -> np.ndarray:
    """Test error with each single block deleted at test time (Veit et al. 2016, Fig. 3): float32
    [depth]; NaN for a plain block that changes the width (it cannot be deleted). The intact prefix
    h_0..h_l is computed once, so the cost is depth * (depth + 1) / 2 block passes, not depth**2."""
    was_training = model.training
    model.eval()
    out = np.full(len(model.blocks), np.nan, dtype=np.float32)
    try:
        with torch.inference_mode():
            h = model.stem(data.x_test)  # the input of block ``index``
            for index, block in enumerate(model.blocks):
                residual = hasattr(block, "shortcut")  # an MLP or conv residual block
                if residual or (block.width_in == block.width_out and getattr(block, "stride", 1) == 1):
                    g = block.shortcut(h) if residual else h  # block deleted
                    for later in model.blocks[index + 1:]:
                        g = later(g)
                    out[index] = _error(model.head(g), data.y_test)
                h = block(h)
    finally:
        model.train(was_training)
    return out


def make_optimizer(config: RunConfig, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """SGD with momentum or Adam, with ``weight_decay``; the multi-tensor (foreach) implementation,
    which gives the same numbers as the per-tensor loop with far fewer Python calls per step."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum,
                               weight_decay=config.weight_decay, foreach=True)
    return torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay, foreach=True)


def run(config: RunConfig, progress: bool | None = None) -> Trace:
    """Train ``config`` and return its :class:`Trace` (see its docstring for the keys and shapes).

    Statistics are recorded *before* the optimiser update of each recorded step, so step 0 shows the
    network at initialisation. Every step checks that the loss and the gradient are finite; at the
    first step where one is not, the step is recorded (run once more with the recorder on if it was
    not a recorded step) to find the block where the value first became non-finite, training stops
    and the trace keeps what it recorded (``meta["diverged"]``, ``meta["diverged_step"]``,
    ``meta["diverged_layer"]``, ``meta["diverged_pass"]``).
    ``progress=None`` shows a tqdm bar only on a terminal.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-identical results do not depend on the machine's core count
    try:
        return _run(config, progress)
    finally:
        torch.set_num_threads(threads)


def _flat_gradients(params: list[nn.Parameter]) -> torch.Tensor:
    """One zeroed buffer holding every parameter's ``.grad`` as a view, so that zeroing the gradients
    and taking their total norm are one operation each (backward accumulates into the views)."""
    flat = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype)
    offset = 0
    for p in params:
        p.grad = flat[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    return flat


def _total_grad_norm(flat: torch.Tensor) -> float:
    """L2 norm of all gradients; recomputed in float64 when float32 overflows, so that inf means a
    non-finite gradient and not a large one."""
    total = float(torch.linalg.vector_norm(flat))
    if not math.isfinite(total):
        total = float(torch.linalg.vector_norm(flat, dtype=torch.float64))
    return total


def _set_training(modules: list[nn.Module], training: bool) -> None:
    """``model.train(training)`` for a precomputed module list. ``object.__setattr__`` stores the flag
    exactly where nn.Module.__setattr__ would, without its per-call checks (together ~4 ms a call)."""
    for module in modules:
        object.__setattr__(module, "training", training)


def _diverged_where(row: dict[str, np.ndarray]) -> tuple[int, str]:
    """The block where a value first became non-finite, and in which pass: the first block (in forward
    order) with a non-finite output, else the last block with a non-finite gradient (the first that
    backpropagation reaches), else -1 (the stem, the head or the loss)."""
    act = np.flatnonzero(row["nonfinite_act"] > 0)
    if len(act):
        return int(act[0]), "forward"
    grad = np.flatnonzero(row["nonfinite_grad"] > 0)
    if len(grad):
        return int(grad[-1]), "backward"
    return -1, "stem_or_head"


def _build(config: RunConfig, data: Dataset) -> nn.Module:
    """The model ``config.model`` names: an MLP (simulation.models) or a conv net (simulation.conv)."""
    if config.model == "conv":
        from .conv import build_conv_net

        return build_conv_net(config.arch, config.depth, config.width, data.n_classes, config.activation,
                              config.norm, config.shortcut, config.init_gain)
    return build_model(config.arch, data.n_features, config.width, config.depth, data.n_classes,
                       config.activation, config.norm, config.init_gain, config.stages, config.shortcut)


def _run(config: RunConfig, progress: bool | None) -> Trace:
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    data = load_dataset(config.dataset, seed=config.seed)
    model = _build(config, data)
    params = list(model.parameters())
    grads = _flat_gradients(params)
    opt = make_optimizer(config, params)
    loss_fn = nn.CrossEntropyLoss()
    batches = torch.Generator().manual_seed(config.seed + 1)
    wanted = set(record_steps(config))

    sweep = torch.linspace(*BANDS_RANGE, SWEEP_POINTS)
    direction = sweep_direction(data.n_features, config.seed)
    input_grads = np.full((2, SWEEP_POINTS), np.nan)
    input_grads[0] = input_gradient(model, sweep, direction)  # at initialisation

    rows: list[dict[str, np.ndarray]] = []
    steps, losses, errors, test_errors = [], [], [], []
    loss_curve = np.full(config.steps, np.nan, dtype=np.float32)
    error_curve = np.full(config.steps, np.nan, dtype=np.float32)
    grad_norm_curve = np.full(config.steps, np.nan)
    diverged: dict[str, object] | None = None

    modules = list(model.modules())
    model.train()
    with Recorder(model) as rec:
        bar = tqdm(range(config.steps), desc=f"{config.arch} d={config.depth}", leave=False,
                   disable=(None if progress is None else not progress), file=sys.stderr)
        for step in bar:
            idx = torch.randint(len(data.x_train), (config.batch_size,), generator=batches)
            x, y = data.x_train[idx], data.y_train[idx]
            grads.zero_()
            record = step in wanted
            if record:
                rec.arm()
            logits = model(x)
            loss = loss_fn(logits, y)
            loss.backward()
            loss_curve[step] = loss.item()
            error_curve[step] = _error(logits.detach(), y)
            grad_norm_curve[step] = _total_grad_norm(grads)
            if not (math.isfinite(loss_curve[step]) and math.isfinite(grad_norm_curve[step])):
                if not record:  # same weights, same batch: run the step again with the recorder on
                    grads.zero_()
                    rec.arm()
                    logits = model(x)
                    loss = loss_fn(logits, y)
                    loss.backward()
                row = rec.collect()
                layer, where = _diverged_where(row)
                diverged = {"step": step, "layer": layer, "pass": where}
                rows.append(row)
                steps.append(step)
                losses.append(loss.item())
                errors.append(_error(logits.detach(), y))
                test_errors.append(float("nan"))
                log.warning("run %s diverged at step %d, block %d (%s pass)", config.digest(), step, layer, where)
                break
            if record:
                rows.append(rec.collect())
                steps.append(step)
                losses.append(loss_curve[step])
                errors.append(error_curve[step])
                _set_training(modules, False)
                test_errors.append(_eval_error(model, data.x_test, data.y_test))
                _set_training(modules, True)
            opt.step()
        bar.close()

    arrays: dict[str, np.ndarray] = {
        "step": np.asarray(steps, dtype=np.int64),
        "loss": np.asarray(losses, dtype=np.float32),
        "error": np.asarray(errors, dtype=np.float32),
        "test_error": np.asarray(test_errors, dtype=np.float32),
        "loss_curve": loss_curve,
        "error_curve": error_curve,
        "grad_norm_curve": grad_norm_curve,
    }
    for key in STAT_KEYS:
        stacked = np.stack([row[key] for row in rows])
        arrays[key] = stacked.astype(np.int64 if key in COUNT_KEYS else np.float32)
    # float32 would flush gradient norms below ~1e-38 to 0; keep those two in float64.
    arrays["grad_norm"] = np.stack([row["grad_norm"] for row in rows])
    arrays["out_grad_norm"] = np.stack([row["out_grad_norm"] for row in rows])

    # After training: the intact network's test error, single-block lesions, the input sweep.
    if diverged is None:
        arrays["final_test_error"] = np.float32(_eval_error(model.eval(), data.x_test, data.y_test))
        arrays["lesion_test_error"] = lesion_test_errors(model, data)
        input_grads[1] = input_gradient(model, sweep, direction)
    else:
        arrays["final_test_error"] = np.float32(np.nan)
        arrays["lesion_test_error"] = np.full(len(model.blocks), np.nan, dtype=np.float32)
    arrays["input_sweep"] = sweep.numpy().astype(np.float32)
    arrays["input_grad"] = input_grads
    arrays["input_grad_autocorr"] = np.stack([autocorrelation(g, AUTOCORR_LAGS) for g in input_grads])
    if config.arch == "residual":
        arrays["path_length_fraction"] = path_length_fraction(len(model.blocks))

    meta = {
        "config": config.to_dict(),
        "digest": config.digest(),
        "seed": config.seed,
        "versions": {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version()},
        "block_widths": [list(w) for w in config.block_widths()],
        "blocks": len(model.blocks),
        "diverged": diverged is not None,
        "diverged_step": None if diverged is None else diverged["step"],
        "diverged_layer": None if diverged is None else diverged["layer"],
        "diverged_pass": None if diverged is None else diverged["pass"],
    }
    log.info("trained %s %s in %.1f s", config.arch, config.digest(), time.perf_counter() - started)
    return Trace(meta=meta, arrays=arrays)


def main(argv: list[str] | None = None) -> None:
    """``python -m simulation.train [--set key=value ...]``: train one run and print its summary."""
    import argparse
    import json

    from .summary import summarize

    parser = argparse.ArgumentParser(prog="python -m simulation.train", description=main.__doc__)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        config = config_from_sets(RunConfig, args.sets)
    except ConfigError as exc:
        sys.exit(f"error: {exc}")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(json.dumps(summarize(run(config)), indent=2))


if __name__ == "__main__":
    main()
