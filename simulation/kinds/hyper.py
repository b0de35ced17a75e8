"""Hyper-connections: n parallel residual streams with learned mixing, free (HC) or doubly stochastic (mHC).

Example::

    python -m simulation.kinds.hyper --set mixing=mhc

Zhu et al. 2025 (Hyper-Connections) widen the residual stream h [B, w] to n streams H [B, n, w]; block l reads
the mix x = H_pre H (a weighted sum of the streams), and writes H <- H_res H + H_post^T F(x), where H_res [n, n]
mixes the streams ("width connections") and H_pre [1, n], H_post [1, n] lead into and out of F ("depth
connections"). Across L blocks the streams are multiplied by the composite H_res^L ... H_res^1, which in HC is
unconstrained: DeepSeek 2025 (mHC) observed its gain (largest absolute row or column sum) grow to thousands in
a 27B model, losing the identity mapping's stability, and project every H_res onto the doubly stochastic
matrices with Sinkhorn-Knopp, whose products stay doubly stochastic: every row and column sums to 1.

Here the mappings are static (learned parameters, HC's static variant; both papers add input-dependent terms):
HC as initialised by Zhu et al. (H_res = I, H_pre one-hot on stream l mod n, H_post = 1); mHC with
H_pre = sigmoid, H_post = 2 sigmoid and H_res = Sinkhorn-Knopp(exp(logits)) started near the identity. The
network: digits -> Linear to w, copied to n streams, L blocks (F = Linear -> ReLU -> Linear), the streams summed,
Linear head; Adam, the mixing parameters at their own learning rate.
"""

from __future__ import annotations

import logging
import platform
import sys
import time

import numpy as np
import torch
from torch import nn

from ..config import HyperConfig, config_from_argv
from ..data import load_dataset
from ..loop import minibatch_step, one_thread
from ..trace import Trace

__all__ = ["run", "sinkhorn", "HyperBlock", "HyperNet", "composite_gains", "MHC_DIAGONAL"]

log = logging.getLogger(__name__)

MHC_DIAGONAL = 4.0  # mHC's H_res logits start at 4 on the diagonal, 0 off it: Sinkhorn gives ~0.87 on the diagonal


def sinkhorn(logits: torch.Tensor, iters: int) -> torch.Tensor:
    """The Sinkhorn-Knopp iteration on exp(``logits``) [n, n]: ``iters`` rounds of dividing every row by its sum,
    then every column by its sum (Sinkhorn & Knopp 1967; DeepSeek 2025, mHC). Differentiable. After the last
    round the columns sum to 1 exactly and the rows to within the iteration's error (shrinking geometrically)."""
    m = torch.exp(logits - logits.max())
    for _ in range(iters):
        m = m / m.sum(dim=1, keepdim=True)
        m = m / m.sum(dim=0, keepdim=True)
    return m


class HyperBlock(nn.Module):
    """One block: x = H_pre H, H <- H_res H + H_post^T F(x). H [B, n, w]."""

    def __init__(self, index: int, streams: int, width: int, mixing: str, sinkhorn_iters: int) -> None:
        super().__init__()
        self.mixing, self.iters = mixing, sinkhorn_iters
        self.branch = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
        one_hot = torch.zeros(streams)
        one_hot[index % streams] = 1.0
        if mixing == "hc":  # Zhu et al. 2025, §2: A_r = I, A_m = e_(l mod n), B = 1
            self.res = nn.Parameter(torch.eye(streams))
            self.pre = nn.Parameter(one_hot)
            self.post = nn.Parameter(torch.ones(streams))
        else:  # mHC: logits, mapped by sinkhorn / sigmoid / 2 sigmoid
            self.res = nn.Parameter(MHC_DIAGONAL * torch.eye(streams))
            self.pre = nn.Parameter(torch.full((streams,), -float(np.log(max(streams - 1, 1)))))  # sigmoid = 1/n
            self.post = nn.Parameter(torch.zeros(streams))  # 2 sigmoid(0) = 1

    def res_matrix(self) -> torch.Tensor:
        """H_res [n, n] as used in the forward pass."""
        return self.res if self.mixing == "hc" else sinkhorn(self.res, self.iters)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        pre = self.pre if self.mixing == "hc" else torch.sigmoid(self.pre)
        post = self.post if self.mixing == "hc" else 2 * torch.sigmoid(self.post)
        x = torch.einsum("n,bnw->bw", pre, h)
        return torch.einsum("mn,bnw->bmw", self.res_matrix(), h) + post[None, :, None] * self.branch(x)[:, None, :]


class HyperNet(nn.Module):
    """digits [B, 64] -> Linear -> n copies -> blocks -> sum of the streams -> Linear head: logits [B, 10]."""

    def __init__(self, config: HyperConfig, n_in: int, n_out: int) -> None:
        super().__init__()
        self.streams = config.streams
        self.stem = nn.Linear(n_in, config.width)
        self.blocks = nn.ModuleList(HyperBlock(i, config.streams, config.width, config.mixing, config.sinkhorn_iters)
                                    for i in range(config.depth))
        self.head = nn.Linear(config.width, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)[:, None, :].expand(-1, self.streams, -1)
        for block in self.blocks:
            h = block(h)
        return self.head(h.sum(1))


def composite_gains(matrices: np.ndarray) -> dict[str, np.ndarray]:
    """The composite residual mapping after each block, P_l = H_res^l ... H_res^1 (``matrices`` [L, n, n],
    H_res^1 first), and its gains, float64 [L] each: ``row_gain`` max_i sum_j |P_ij| (the forward signal's
    largest amplification: mHC's "Amax gain", forward), ``col_gain`` max_j sum_i |P_ij| (the backward
    gradient's), ``sigma`` the largest singular value. A doubly stochastic P has all three equal to 1."""
    m = np.asarray(matrices, np.float64)
    product = np.eye(m.shape[1])
    out = {"row_gain": [], "col_gain": [], "sigma": []}
    for h in m:
        product = h @ product
        out["row_gain"].append(np.abs(product).sum(1).max())
        out["col_gain"].append(np.abs(product).sum(0).max())
        out["sigma"].append(np.linalg.norm(product, 2))
    return {k: np.asarray(v) for k, v in out.items()}


def run(config: HyperConfig, progress: bool | None = None) -> Trace:
    """Train and return the Trace (``progress`` is accepted for the cache's trainer interface).

    Arrays (T records at step 0, every ``record_every`` steps and the last; L = ``depth``, n = ``streams``):

    - ``step`` int64 [T]; ``loss_curve`` float32 [steps]: training cross-entropy of each step's batch;
    - ``test_error`` float32 [T], ``final_test_error`` float32 []: error on the held-out split;
    - ``res_matrices`` float64 [T, L, n, n]: every block's H_res as used in the forward pass;
    - ``composite_row_gain``, ``composite_col_gain``, ``composite_sigma`` float64 [T, L]: the gains of
      H_res^l ... H_res^1 after each block l (:func:`composite_gains`; DeepSeek 2025, mHC).
    """
    with one_thread():  # bit-identical results do not depend on the machine's core count
        return _run(config)


def _run(config: HyperConfig) -> Trace:
    started = time.perf_counter()
    data = load_dataset("digits", seed=config.seed)
    torch.manual_seed(config.seed)
    model = HyperNet(config, data.n_features, data.n_classes)
    mixing = [p for b in model.blocks for p in (b.res, b.pre, b.post)]
    ids = {id(p) for p in mixing}
    opt = torch.optim.Adam([{"params": [p for p in model.parameters() if id(p) not in ids]},
                            {"params": mixing, "lr": config.mixing_lr}], lr=config.lr)
    batches = torch.Generator().manual_seed(config.seed + 1)
    wanted = sorted(set(range(0, config.steps, config.record_every)) | {config.steps})
    loss_curve = np.full(config.steps, np.nan, dtype=np.float32)
    steps, errors, matrices = [], [], []

    def record(step: int) -> None:
        model.eval()
        with torch.no_grad():
            steps.append(step)
            errors.append(float((model(data.x_test).argmax(1) != data.y_test).float().mean()))
            matrices.append(np.stack([b.res_matrix().double().numpy() for b in model.blocks]))
        model.train()

    for step in range(config.steps):
        if step in wanted:
            record(step)
        loss_curve[step] = minibatch_step(model, opt, data.x_train, data.y_train, config.batch_size, batches)
        if not np.isfinite(loss_curve[step]):
            break
    else:
        record(config.steps)
    gains = [composite_gains(m) for m in matrices]
    arrays = {
        "step": np.asarray(steps, dtype=np.int64),
        "loss_curve": loss_curve,
        "test_error": np.asarray(errors, dtype=np.float32),
        "final_test_error": np.float32(errors[-1]),
        "res_matrices": np.stack(matrices),
        **{f"composite_{k}": np.stack([g[k] for g in gains]) for k in ("row_gain", "col_gain", "sigma")},
    }
    meta = {
        "config": config.to_dict(),
        "digest": config.digest(),
        "seed": config.seed,
        "versions": {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version()},
        "layers": [f"block.{i}" for i in range(config.depth)],
        "blocks": config.depth,
        "block_widths": [[config.width, config.width]] * config.depth,
        "diverged": not bool(np.isfinite(loss_curve).all()),
    }
    log.info("hyper-connections %s %s in %.1f s", config.mixing, config.digest(), time.perf_counter() - started)
    return Trace(meta=meta, arrays=arrays)


def main(argv: list[str] | None = None) -> int:
    """``python -m simulation.kinds.hyper --set key=value ...``: train, print the composite mapping's gains."""
    config = config_from_argv(HyperConfig, argv, __doc__.splitlines()[0])
    if config is None:
        return 2
    started = time.perf_counter()
    trace = run(config)
    print(f"{config.mixing}: test error {float(trace['final_test_error']):.3f}; composite of {config.depth} blocks: "
          f"row gain {trace['composite_row_gain'][0, -1]:.4g} -> {trace['composite_row_gain'][-1, -1]:.4g}, "
          f"col gain -> {trace['composite_col_gain'][-1, -1]:.4g}, sigma -> {trace['composite_sigma'][-1, -1]:.4g}; "
          f"{time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
