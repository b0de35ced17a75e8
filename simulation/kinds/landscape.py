"""The loss on a filter-normalised random 2-D slice through a trained conv net (Li et al. 2018).

Example::

    python -m simulation.kinds.landscape --set arch=plain --set depth=56

A conv net of He et al. 2015 §4.2 (:mod:`simulation.kinds.conv`: ReLU, BatchNorm, option-A shortcuts; ``plain``
is Li et al.'s "noshort" twin) is trained on digits with SGD. Around the trained weights theta two random
Gaussian directions delta and eta are drawn and *filter-normalised* as in Li et al. 2018, §4 (their
``net_plotter.normalize_directions_for_weights`` with ``norm='filter'``, ``ignore='biasbn'``): every filter of
a direction (one output channel of a conv kernel, one row of the Linear head) is rescaled to the norm of
the same filter of theta, and the directions of one-dimensional parameters (BatchNorm weights and biases,
the head's bias) are zeroed. The loss L(theta + alpha delta + beta eta) is then evaluated on a
``grid`` x ``grid`` lattice of (alpha, beta) in [-span, span]^2, on a fixed batch of training examples, with
the network in eval mode (BatchNorm's running statistics, as their ``evaluation.eval_loss``), through
:func:`torch.func.functional_call` so the module's own weights are never touched.
"""

from __future__ import annotations

import logging
import platform
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from ..config import ConfigError, LandscapeConfig, config_from_argv, conv_depth_error
from .conv import build_conv_net
from ..data import load_dataset
from ..summary import slice_figures
from ..loop import minibatch_step, one_thread
from ..trace import Trace

__all__ = ["run", "filter_normalize", "random_direction", "slice_loss", "DIRECTION_SEED_OFFSET"]

log = logging.getLogger(__name__)

DIRECTION_SEED_OFFSET = 3  # the directions' generator: seed + 3 (batches use seed + 1, the input sweep seed + 2)


def filter_normalize(direction: dict[str, torch.Tensor], weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Li et al. 2018, §4, eq. (1): d_{i,j} <- d_{i,j} / ||d_{i,j}|| * ||theta_{i,j}|| for every filter j
    (a slice along the first axis) of every parameter i with 2 or more axes; parameters with one axis
    (BatchNorm, biases) get a zero direction. Same keys and shapes as ``direction``; new tensors.
    ||d_{i,j}|| has 1e-10 added, as in their code, so an all-zero filter stays zero."""
    out = {}
    for name, d in direction.items():
        w = weights[name]
        if d.dim() <= 1:
            out[name] = torch.zeros_like(d)
            continue
        dims = tuple(range(1, d.dim()))
        d_norm = torch.linalg.vector_norm(d, dim=dims, keepdim=True)
        w_norm = torch.linalg.vector_norm(w, dim=dims, keepdim=True)
        out[name] = d * (w_norm / (d_norm + 1e-10))
    return out


def random_direction(weights: dict[str, torch.Tensor], generator: torch.Generator) -> dict[str, torch.Tensor]:
    """A filter-normalised Gaussian direction with the shapes of ``weights`` (drawn in their order)."""
    raw = {name: torch.randn(w.shape, generator=generator, dtype=w.dtype) for name, w in weights.items()}
    return filter_normalize(raw, weights)


@torch.no_grad()
def slice_loss(model: nn.Module, weights: dict[str, torch.Tensor], delta: dict[str, torch.Tensor],
               eta: dict[str, torch.Tensor], coords: np.ndarray, x: torch.Tensor,
               y: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Cross-entropy (nats) and error (fraction wrong) of ``model`` with parameters theta + a delta + b eta at
    every (a, b) of ``coords`` [G] x ``coords`` [G], on ``x`` [N, 64], ``y`` [N]: float32 [G, G] each,
    row i = alpha ``coords[i]``, column j = beta ``coords[j]``. Buffers (BatchNorm statistics) stay the
    model's own; the model is put in eval mode and left as it was."""
    was_training = model.training
    model.eval()
    grid = len(coords)
    loss, error = np.empty((grid, grid), np.float32), np.empty((grid, grid), np.float32)
    try:
        for i, a in enumerate(coords):
            for j, b in enumerate(coords):
                params = {k: w + float(a) * delta[k] + float(b) * eta[k] for k, w in weights.items()}
                logits = functional_call(model, params, (x,))
                loss[i, j] = nn.functional.cross_entropy(logits, y).item()
                error[i, j] = (logits.argmax(1) != y).float().mean().item()
    finally:
        model.train(was_training)
    return loss, error


def run(config: LandscapeConfig, progress: bool | None = None) -> Trace:
    """Train the net, take the slice and return its Trace (``progress`` is accepted for the cache's trainer
    interface).

    Arrays (G = ``config.grid``):

    - ``step`` int64 [1]: the updates done before the slice was taken (one record: the slice);
    - ``loss_curve`` float32 [steps]: training cross-entropy of each step's batch, before its update;
    - ``final_test_error`` float32 []: error on the held-out split after training (eval mode);
    - ``coords`` float32 [G]: alpha (rows) and beta (columns) of the slice, evenly spaced in [-span, span];
    - ``loss_grid``, ``error_grid`` float32 [G, G]: loss and error on the ``eval_examples`` fixed training
      examples at theta + alpha delta + beta eta (Li et al. 2018, Fig. 5);
    - ``direction_norm`` float32 [2]: ||delta|| / ||theta|| and ||eta|| / ||theta|| over the filtered parameters.

    The non-convexity figures (:func:`simulation.summary.slice_figures`) are
    computed from ``loss_grid`` wherever they are needed.
    """
    with one_thread():  # bit-identical results do not depend on the machine's core count
        return _run(config)


def _run(config: LandscapeConfig) -> Trace:
    if conv_depth_error(config.depth):
        raise ConfigError(conv_depth_error(config.depth))
    started = time.perf_counter()
    data = load_dataset("digits", seed=config.seed)
    torch.manual_seed(config.seed)
    model = build_conv_net(config.arch, config.depth, config.width, data.n_classes, "relu", "batchnorm", "zero_pad")
    opt = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=0.9, weight_decay=config.weight_decay,
                          foreach=True)
    batches = torch.Generator().manual_seed(config.seed + 1)
    loss_curve = np.full(config.steps, np.nan, dtype=np.float32)
    model.train()
    updates = 0
    for step in range(config.steps):
        loss_curve[step] = minibatch_step(model, opt, data.x_train, data.y_train, config.batch_size, batches)
        if not np.isfinite(loss_curve[step]):
            break
        updates += 1
    trained = time.perf_counter()
    model.eval()
    with torch.no_grad():
        test_error = float((model(data.x_test).argmax(1) != data.y_test).float().mean())
    weights = {k: v.detach().clone() for k, v in model.named_parameters()}
    generator = torch.Generator().manual_seed(config.seed + DIRECTION_SEED_OFFSET)
    delta = random_direction(weights, generator)
    eta = random_direction(weights, generator)
    coords = np.linspace(-config.span, config.span, config.grid)
    n = min(config.eval_examples, len(data.x_train))
    loss_grid, error_grid = slice_loss(model, weights, delta, eta, coords, data.x_train[:n], data.y_train[:n])
    filtered = [k for k, w in weights.items() if w.dim() > 1]
    theta_norm = torch.sqrt(sum(weights[k].pow(2).sum() for k in filtered))
    direction_norm = [float(torch.sqrt(sum(d[k].pow(2).sum() for k in filtered)) / theta_norm) for d in (delta, eta)]
    arrays = {
        "step": np.array([updates], dtype=np.int64),
        "loss_curve": loss_curve,
        "final_test_error": np.float32(test_error),
        "coords": coords.astype(np.float32),
        "loss_grid": loss_grid,
        "error_grid": error_grid,
        "direction_norm": np.asarray(direction_norm, dtype=np.float32),
    }
    meta = {
        "config": config.to_dict(),
        "digest": config.digest(),
        "seed": config.seed,
        "versions": {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version()},
        "layers": [f"block.{i}" for i in range(len(model.blocks))],
        "blocks": len(model.blocks),
        "block_widths": [[b.width_in, b.width_out] for b in model.blocks],
        "diverged": not bool(np.isfinite(loss_curve).all()),
    }
    log.info("landscape %s d=%d %s: trained in %.1f s, slice in %.1f s", config.arch, config.depth,
             config.digest(), trained - started, time.perf_counter() - trained)
    return Trace(meta=meta, arrays=arrays)


def main(argv: list[str] | None = None) -> int:
    """``python -m simulation.kinds.landscape --set key=value ...``: train, slice, print the non-convexity figures."""
    config = config_from_argv(LandscapeConfig, argv, __doc__.splitlines()[0], lambda c: conv_depth_error(c.depth))
    if config is None:
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    started = time.perf_counter()
    trace = run(config)
    figures = slice_figures(trace)
    print(f"{config.arch} d={config.depth}: test error {float(trace['final_test_error']):.3f}; loss at the centre "
          f"{float(trace['loss_grid'][config.grid // 2, config.grid // 2]):.4g}; non-convex "
          f"{figures['nonconvex_fraction']:.3f} of the grid, mean ratio {figures['mean_curvature_ratio']:.3f}, "
          f"{int(figures['local_minima'])} local minima; {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
