"""ModelGradientPlusOne's "backward factor per block" says "(geometric mean of ‖∂L/∂x‖ / ‖∂L/∂y‖)": for a user's
network it must be that number, computed by ``torch.autograd.grad`` at each block's input x and its addition y.

A new user's ResNet (examples/my_resnet.py) showed "residual × 1.23" where each block's own ‖∂L/∂x‖ / ‖∂L/∂y‖ has the
geometric mean 1.66: the scene took the lecture's ratio of consecutive blocks' ‖∂L/∂h‖, which equals the label only
where each block's output is the next block's input (the lecture's MLPs), not across a ReLU after the addition. The
net here has that ReLU; the twin check shows the consecutive-blocks ratio misses the reference by far more than the
tolerance, so the comparison can fail.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from residual_lecture import plain_twin, watch
from simulation.trace import Trace

from scenes.chain_rule import running_product
from scenes.sigmoid import geometric_mean_factor
from scenes.user_model import ModelGradientPlusOne

RTOL = 1e-5  # float32 norms of float32 gradients, against float64 sums of the same gradients


class Block(nn.Module):
    """y = x + F(x), then a ReLU before the next block (as a ResNet's BasicBlock)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.f = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width))
        self.y = None

    def forward(self, x):
        y = x + self.f(x)
        self.y = y  # the addition's output, for the reference below (the twin's is F(x) alone)
        return torch.relu(y)


def _net() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(5, 8), *[Block(8) for _ in range(4)], nn.Linear(8, 3))


def _reference(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Geometric mean over the blocks of ‖∂L/∂x‖ / ‖∂L/∂y‖ by autograd, at the given weights (no .grad is
    touched: ``autograd.grad`` returns the gradients)."""
    inputs = {}
    blocks = [m for m in model if isinstance(m, Block)]
    hooks = [b.register_forward_pre_hook(lambda m, a: inputs.__setitem__(m, a[0])) for b in blocks]
    loss = nn.functional.cross_entropy(model(x), y)
    for h in hooks:
        h.remove()
    grads = torch.autograd.grad(loss, [inputs[b] for b in blocks] + [b.y for b in blocks])
    gx, gy = grads[:len(blocks)], grads[len(blocks):]
    ratios = [float(a.double().norm() / b.double().norm()) for a, b in zip(gx, gy)]
    for b in blocks:
        b.y = None
    return float(np.exp(np.mean(np.log(ratios))))


def _watched_step(model: nn.Module, path, x, y) -> Trace:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, path, every=1, example_input=x) as rec:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        rec.step(opt, loss=loss)
        opt.step()
    return Trace.load(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plus-one")
    torch.manual_seed(4)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    model = _net()
    twin = plain_twin(model, example_input=x)
    expected = {"residual": _reference(model, x, y), "plain": _reference(twin, x, y)}
    traces = {"residual": _watched_step(model, folder / "residual.npz", x, y),
              "plain": _watched_step(twin, folder / "plain.npz", x, y)}
    return traces, expected


def test_the_factor_is_each_blocks_dl_dx_over_dl_dy_by_autograd(runs):
    traces, expected = runs
    factors, line = ModelGradientPlusOne.backward_factors(object.__new__(ModelGradientPlusOne), traces)
    assert line == "factor_sub"
    for name in ("residual", "plain"):
        assert factors[name] == pytest.approx(expected[name], rel=RTOL)


def test_the_consecutive_blocks_ratio_misses_it_so_the_check_can_fail(runs):
    """The tamper twin: the lecture's ratio of consecutive ‖∂L/∂h‖ on the same traces, off by more than 100× RTOL."""
    traces, expected = runs
    for name in ("residual", "plain"):
        chain = geometric_mean_factor(running_product(traces[name]["out_grad_norm"][0])[1])
        assert abs(chain / expected[name] - 1) > 100 * RTOL


def test_a_trace_without_in_grad_norm_gets_the_consecutive_ratio_and_says_so(runs):
    traces, _ = runs
    cut = {name: Trace(t.meta, {k: v for k, v in t.arrays.items() if k != "in_grad_norm"})
           for name, t in traces.items()}
    factors, line = ModelGradientPlusOne.backward_factors(object.__new__(ModelGradientPlusOne), cut)
    assert line == "factor_sub_chain"
    for name, t in cut.items():
        assert factors[name] == geometric_mean_factor(running_product(t["out_grad_norm"][0])[1])
