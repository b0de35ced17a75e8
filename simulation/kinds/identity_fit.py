"""Fit the identity map with one plain block and one residual block: is "keep as is" easy?

Example::

    python -m simulation.kinds.identity_fit --set arch=residual

The study note's question: a residual block keeps its input by learning F(x) = 0, a plain block must
learn H(x) = x with its layers (He et al. 2015, §3.1: "if an identity mapping were optimal, it would be
easier to push the residual to zero than to fit an identity mapping by a stack of nonlinear layers").
Both blocks are the lecture's own (:class:`~simulation.models.PlainBlock`, :class:`ResidualBlock`:
Linear -> activation -> Linear, width = the 64 digits features), built from the same seed so that they
start from the same weights, and trained with the same optimiser on the whole training split, full
batch, to minimise the relative squared error ||h - x||^2 / ||x||^2 (0: h = x exactly; 1: h = 0).
"""

from __future__ import annotations

import logging
import platform
import sys
import time

import numpy as np
import torch

from ..config import IdentityFitConfig, config_from_argv
from ..data import load_dataset
from ..models import PlainBlock, ResidualBlock
from ..summary import first_step_below
from ..loop import one_thread
from ..trace import Trace

__all__ = ["run", "relative_error", "build_block"]

log = logging.getLogger(__name__)


def relative_error(h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Mean over examples of ||h - x||^2 over mean of ||x||^2: a scalar; h, x [N, features]."""
    return (h - x).pow(2).sum(1).mean() / x.pow(2).sum(1).mean()


def build_block(config: IdentityFitConfig, width: int) -> PlainBlock | ResidualBlock:
    """The block of ``config.arch``, [B, width] -> [B, width], initialised from ``config.seed``: a plain
    and a residual block of one seed hold the same weights (the residual block's identity shortcut has none)."""
    torch.manual_seed(config.seed)
    block = {"plain": PlainBlock, "residual": ResidualBlock}[config.arch]
    return block(width, width, config.activation, "none")


def run(config: IdentityFitConfig, progress: bool | None = None) -> Trace:
    """Train one block to output its input and return its Trace (``progress`` is accepted for the cache's
    trainer interface; full-batch steps are quick).

    Arrays (``steps`` optimiser steps, T records):

    - ``loss_curve`` float32 [steps]: relative squared error on the training features before each update;
    - ``step`` int64 [T], ``test_loss`` float32 [T]: the same error on the held-out features;
    - ``tolerance_step`` int64 []: first step whose ``loss_curve`` is below ``config.tolerance``, -1 if none;
    - ``branch_ratio`` float32 [T]: ||F(x)|| / ||x|| (mean over training examples) of the block's F.
    """
    with one_thread():  # bit-identical results do not depend on the machine's core count
        return _run(config)


def _run(config: IdentityFitConfig) -> Trace:
    started = time.perf_counter()
    data = load_dataset("digits", seed=config.seed)
    x, x_test = data.x_train, data.x_test
    block = build_block(config, data.n_features)
    params = list(block.parameters())
    if config.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=config.lr, momentum=config.momentum)
    else:
        opt = torch.optim.Adam(params, lr=config.lr)
    wanted = set(range(0, config.steps, config.record_every)) | {config.steps - 1}
    loss_curve = np.full(config.steps, np.nan, dtype=np.float32)
    steps, test_loss, branch_ratio = [], [], []
    x_norm = float(x.norm(dim=1).mean())
    for step in range(config.steps):
        opt.zero_grad(set_to_none=True)
        loss = relative_error(block(x), x)
        loss.backward()
        loss_curve[step] = loss.item()
        if step in wanted:
            with torch.no_grad():
                steps.append(step)
                test_loss.append(float(relative_error(block(x_test), x_test)))
                branch_ratio.append(float(block.branch(x).norm(dim=1).mean()) / x_norm)
        opt.step()
    arrays = {
        "loss_curve": loss_curve,
        "step": np.asarray(steps, dtype=np.int64),
        "test_loss": np.asarray(test_loss, dtype=np.float32),
        "branch_ratio": np.asarray(branch_ratio, dtype=np.float32),
        "tolerance_step": np.int64(first_step_below(loss_curve, config.tolerance)),
    }
    meta = {
        "config": config.to_dict(),
        "digest": config.digest(),
        "seed": config.seed,
        "versions": {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version()},
        "layers": ["block.0"],
        "blocks": 1,
        "block_widths": [[data.n_features, data.n_features]],
        "diverged": not bool(np.isfinite(loss_curve).all()),
    }
    log.info("trained identity fit %s %s in %.1f s", config.arch, config.digest(), time.perf_counter() - started)
    return Trace(meta=meta, arrays=arrays)


def main(argv: list[str] | None = None) -> int:
    """``python -m simulation.kinds.identity_fit --set key=value ...``: train one block, print when it fit."""
    config = config_from_argv(IdentityFitConfig, argv, __doc__.splitlines()[0])
    if config is None:
        return 2
    trace = run(config)
    print(f"{config.arch}: relative error {trace['loss_curve'][0]:.4g} -> {trace['loss_curve'][-1]:.4g}; "
          f"below {config.tolerance:g} from step {int(trace['tolerance_step'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
