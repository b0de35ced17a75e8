"""What a new user gets wrong with ``watch`` in their own loop, said in one line where it happens (a user's report,
issue 35): a loop that never calls ``rec.step`` (nothing was written: a warning at close, not silence), ``rec.step``
after ``optimizer.zero_grad()`` (every weight gradient gone: a warning, once), and a model with no residual
addition (the hint names ``watch``'s own keyword, not the command line's ``--set model.blocks``). Each with its twin:
the loop as docs/how-to/watch.md writes it warns nothing.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

from simulation.core.watch import WatchError, watch


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.f = nn.Linear(6, 6)

    def forward(self, x):
        return x + self.f(x)


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(Block(), Block(), nn.Linear(6, 2))


def _loop(path, order: str, steps: int = 2) -> None:
    model = _net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    with watch(model, path, every=1) as rec:
        for _ in range(steps):
            nn.functional.cross_entropy(model(x), y).backward()
            if order == "docs":
                rec.step(opt)
            opt.step()
            opt.zero_grad()
            if order == "after_zero_grad":
                rec.step(opt)


def test_the_documented_loop_warns_nothing(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _loop(tmp_path / "run.npz", "docs")
    assert (tmp_path / "run.npz").exists()


def test_a_loop_that_never_calls_rec_step_is_told_at_close(tmp_path):
    with pytest.warns(UserWarning, match=r"recorded nothing: rec.step\(optimizer\) was never called"):
        _loop(tmp_path / "run.npz", "never")
    assert not (tmp_path / "run.npz").exists()


def test_rec_step_after_zero_grad_is_told_once(tmp_path):
    with pytest.warns(UserWarning, match=r"found no gradient in any parameter") as said:
        _loop(tmp_path / "run.npz", "after_zero_grad", steps=3)
    assert sum("found no gradient" in str(w.message) for w in said) == 1


def test_a_loop_that_calls_another_module_than_the_watched_one_is_told_at_the_first_step(tmp_path):
    """watch(outer) while the loop calls outer.body(x): outer's forward never runs, so no block is found. That was
    silent (no record, no file, no warning); now the first rec.step says so, once (the documented loop above, which
    calls the watched module, warns nothing)."""
    outer = nn.Module()
    outer.body = _net()
    opt = torch.optim.SGD(outer.parameters(), lr=0.1)
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    with pytest.warns(UserWarning, match=r"forward has not run in training since watch began") as said:
        with watch(outer, tmp_path / "run.npz", every=1) as rec:
            for _ in range(3):
                nn.functional.cross_entropy(outer.body(x), y).backward()
                rec.step(opt)
                opt.step()
                opt.zero_grad()
    assert sum("forward has not run" in str(w.message) for w in said) == 1
    assert not (tmp_path / "run.npz").exists()


def test_a_model_without_residual_additions_is_told_watchs_own_keyword(tmp_path):
    model = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 2))
    with pytest.raises(WatchError) as caught:
        watch(model, tmp_path / "run.npz", example_input=torch.randn(4, 6))
    message = str(caught.value)
    assert "blocks='layer*.*'" in message and "watch(" in message and "--set" not in message
    assert "\n" not in message


def test_a_second_backward_through_a_recorded_forward_is_told_once(tmp_path):
    """torch.autograd.grad beside .backward() on a recorded step (as an independent check in the user's own loop
    would do) doubles what reaches ∂L/∂h: the norm read sqrt(2) times autograd's (seen on an H100). Said once."""
    model = _net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    with pytest.warns(UserWarning, match="a second backward through the same forward") as said:
        with watch(model, tmp_path / "run.npz", every=1) as rec:
            for _ in range(2):
                loss = nn.functional.cross_entropy(model(x), y)
                torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)
                loss.backward()
                rec.step(opt)
                opt.step()
                opt.zero_grad()
    assert sum("second backward" in str(w.message) for w in said) == 1


class Detour(nn.Module):
    """Two residual blocks and a head; with ``detour`` set, the forward skips the blocks (another path than the one
    watch saw at the first training forward)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks, self.head, self.detour = nn.Sequential(Block(), Block()), nn.Linear(6, 2), False

    def forward(self, x):
        return self.head(x if self.detour else self.blocks(x))


@pytest.mark.parametrize("detour", [True, False], ids=["detour", "twin"])
def test_a_record_that_sees_no_block_says_so(tmp_path, detour):
    """A recorded step whose training forward passed none of the blocks found at the first forward (the plain twin
    of a BatchNorm model called first in eval mode did this silently: every block NaN) warns once; its twin, the same
    loop on the blocks' path, warns nothing and records every block."""
    from simulation.trace import Trace

    model = Detour()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with watch(model, tmp_path / "a.npz", every=1) as rec:
            for step in range(3):
                model.detour = detour and step > 0
                nn.functional.cross_entropy(model(x), y).backward()
                rec.step(opt)
                opt.step()
                opt.zero_grad()
    unseen = [w for w in caught if "none of the 2 residual additions" in str(w.message)]
    grads = Trace.load(tmp_path / "a.npz")["out_grad_norm"]
    if detour:
        assert len(unseen) == 1 and "step 1's" in str(unseen[0].message) and np.isnan(grads[1:]).all()
    else:
        assert not caught and np.isfinite(grads).all()
