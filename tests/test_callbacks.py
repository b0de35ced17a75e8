"""The trainer callbacks over watch: residual_lecture.lightning.WatchCallback and residual_lecture.huggingface.WatchCallback.

Each is driven by the real package (a Lightning ``Trainer.fit()``, a transformers ``Trainer.train()``) on a tiny
residual MLP on CPU, with gradient accumulation of 2. The micro-batches the trainer fed are captured by a forward
pre-hook and replayed here by hand from the same initial weights (plain SGD, as the trainer ran it): at every
recorded step the trace's ‖∂L/∂h‖ per block (the square root of the micro-batches' summed squares of
autograd's ∂(loss / 2)/∂h) and the norm of the accumulated gradient of every parameter must match within 1e-5
(relative; float32 norms). The twin of each: a replay that forgets to divide the loss by the accumulation is told
apart.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from simulation.core.watch import WatchError
from simulation.trace import Trace

ACCUMULATION, STEPS, EVERY, LR = 2, 6, 2, 0.1


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.f = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width))

    def forward(self, x):
        return x + self.f(x)  # the residual addition watch finds


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.stem, self.head = nn.Linear(8, 16), nn.Linear(16, 3)
        self.blocks = nn.Sequential(*[Block(16) for _ in range(3)])

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def _data(n: int = STEPS * ACCUMULATION * 4):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def replay(net: Net, micro_batches: list, divide: bool = True) -> dict[int, tuple[np.ndarray, float]]:
    """SGD by hand over ``micro_batches`` (``ACCUMULATION`` per step): at each step k a multiple of ``EVERY``,
    (‖∂L/∂h_l‖ per block, ‖∂L/∂θ‖ over every parameter) of the accumulated step, from autograd."""
    net = copy.deepcopy(net)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    out = {}
    for k in range(STEPS):
        squares = np.zeros(len(net.blocks))
        for x, y in micro_batches[k * ACCUMULATION:(k + 1) * ACCUMULATION]:
            h, outputs = net.stem(x), []
            for block in net.blocks:
                h = block(h)
                outputs.append(h)
            loss = nn.functional.cross_entropy(net.head(h), y) / (ACCUMULATION if divide else 1)
            grads = torch.autograd.grad(loss, outputs, retain_graph=True)
            squares += [float(g.double().pow(2).sum()) for g in grads]
            loss.backward()
        if k % EVERY == 0:
            total = float(torch.sqrt(sum(p.grad.double().pow(2).sum() for p in net.parameters())))
            out[k] = (np.sqrt(squares), total)
        opt.step()
        opt.zero_grad()
    return out


def assert_matches(trace: Trace, expected: dict[int, tuple[np.ndarray, float]], prefix: str = "") -> None:
    steps = list(trace["step"])
    assert steps == sorted(expected)
    for i, k in enumerate(steps):
        np.testing.assert_allclose(trace["out_grad_norm"][i], expected[k][0], rtol=1e-5, err_msg=f"step {k}")
        assert trace["total_grad_norm"][i] == pytest.approx(expected[k][1], rel=1e-5), k
    assert trace.meta.layers == [f"{prefix}blocks.{l}" for l in range(3)]
    assert trace.meta.watch["complete"] and trace.meta.watch["accumulation"] == ACCUMULATION


def assert_twin_differs(trace: Trace, net: Net, micro_batches: list, prefix: str = "") -> None:
    """The check can fail: the same replay without the division by the accumulation is refused."""
    with pytest.raises(AssertionError):
        assert_matches(trace, replay(net, micro_batches, divide=False), prefix)


def capture(model: nn.Module, into: list):
    """A forward pre-hook keeping each training micro-batch (x, y) the trainer feeds ``model``."""
    def keep(module, args, kwargs):
        if module.training and torch.is_grad_enabled():
            x = args[0] if args else kwargs["x"]
            into.append(x.detach().clone())
    return model.register_forward_pre_hook(keep, with_kwargs=True)


def with_labels(seen: list, xs: torch.Tensor, ys: torch.Tensor) -> list:
    """(x, y) of each captured micro-batch: its labels looked up by its examples."""
    labels = {tuple(x): y for x, y in zip(xs.tolist(), ys)}
    return [(x, torch.stack([labels[tuple(row)] for row in x.tolist()])) for x in seen]


@pytest.mark.xdist_group("torch-probes")  # the worker that holds the probe server (tests/forked.py)
def test_importing_residual_lecture_needs_neither_trainer_package():
    """The callbacks import lightning / transformers in their own modules only (a fresh interpreter: a child of one
    that imported only torch, tests/forked.py)."""
    from forked import run_forked

    code = ("import sys, residual_lecture; residual_lecture.watch; "
            "print(sorted(m for m in ('lightning', 'transformers', 'pytorch_lightning') if m in sys.modules))")
    done = run_forked(code)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-1000:]


@pytest.mark.slow  # imports lightning (~5 CPU s) and fits six steps
def test_lightning_callback_records_what_autograd_computes(tmp_path):
    import lightning.pytorch as pl

    from residual_lecture.lightning import WatchCallback

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Net()

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=LR)

    module = Module()
    initial = copy.deepcopy(module.net)
    xs, ys = _data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, ys), batch_size=4, shuffle=False)
    seen: list = []
    handle = capture(module.net, seen)
    callback = WatchCallback(tmp_path / "run.npz", every=EVERY)
    pl.Trainer(max_steps=STEPS, accumulate_grad_batches=ACCUMULATION, callbacks=[callback], accelerator="cpu",
               logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
               num_sanity_val_steps=0).fit(module, loader)
    handle.remove()
    seen = [x for x in seen if len(x) == 4]  # the probe forward of watch's discovery runs on two examples
    micro = with_labels(seen, xs, ys)
    assert len(micro) == STEPS * ACCUMULATION
    trace = Trace.load(tmp_path / "run.npz")
    assert_matches(trace, replay(initial, micro), prefix="net.")
    with torch.no_grad():
        losses = [float(nn.functional.cross_entropy(initial(x), y)) for x, y in micro[:ACCUMULATION]]
    assert trace["loss"][0] == pytest.approx(np.mean(losses), rel=1e-5)  # the step's mean over its micro-batches
    assert callback.names == trace.meta.layers and callback.rec is None  # closed at the end of fit
    assert_twin_differs(trace, initial, micro, prefix="net.")

    # A training_step that calls self.net(x) rather than self(x) (as a new user's did): the LightningModule's own
    # forward never runs, no block is found, and a fit used to end with nothing written and nothing said. Now the
    # first optimiser step stops it with the keyword to give (the fit above, through self(x), is the twin).
    class Direct(Module):
        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

    with warnings.catch_warnings(record=True) as said, \
            pytest.raises(WatchError, match=r"training_step.*WatchCallback\(path, module='net'\) \(its submodules: net\)$"):
        warnings.simplefilter("always")
        pl.Trainer(max_steps=1, callbacks=[WatchCallback(tmp_path / "direct.npz", every=EVERY)], accelerator="cpu",
                   logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   num_sanity_val_steps=0).fit(Direct(), loader)
    assert not (tmp_path / "direct.npz").exists()
    assert not [w for w in said if "recorded nothing" in str(w.message)]  # the error alone says what went wrong


def _train_with_hf(model, tmp_path, every: int, max_steps: int, **extra):
    """Train ``model`` with transformers' Trainer (SGD, batches of 4, ACCUMULATION micro-batches a step, CPU) and
    ``residual_lecture.huggingface.WatchCallback`` writing ``tmp_path/run.npz``; ``extra``: more TrainingArguments.
    -> (the model's initial copy, the micro-batches it saw with their labels, the callback)."""
    from transformers import Trainer, TrainingArguments

    from residual_lecture.huggingface import WatchCallback

    initial = copy.deepcopy(model)
    xs, ys = _data()
    dataset = [{"x": x, "labels": y} for x, y in zip(xs, ys)]
    seen: list = []
    handle = capture(model, seen)
    callback = WatchCallback(tmp_path / "run.npz", every=every)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, max_steps=max_steps,
                             gradient_accumulation_steps=ACCUMULATION, learning_rate=LR, optim="sgd",
                             report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True,
                             dataloader_num_workers=0, disable_tqdm=True, seed=0, **extra)
    Trainer(model=model, args=args, train_dataset=dataset, callbacks=[callback]).train()
    handle.remove()
    return initial, with_labels([x for x in seen if len(x) == 4], xs, ys), callback


@pytest.mark.slow  # imports transformers and accelerate (~5 CPU s) and trains six steps
def test_huggingface_callback_records_what_autograd_computes(tmp_path):
    class Model(Net):  # what the Trainer calls: inputs by name, a dict with the loss
        def forward(self, x, labels=None):
            logits = super().forward(x)
            return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}

    initial, micro, callback = _train_with_hf(Model(), tmp_path, EVERY, STEPS, lr_scheduler_type="constant",
                                              warmup_steps=0, weight_decay=0.0, max_grad_norm=0.0)
    assert len(micro) == STEPS * ACCUMULATION
    trace = Trace.load(tmp_path / "run.npz")
    assert_matches(trace, replay(initial, micro))
    with torch.no_grad():
        losses = [float(initial(x, y)["loss"]) for x, y in micro[:ACCUMULATION]]
    assert trace["loss"][0] == pytest.approx(np.mean(losses), rel=1e-5)  # the step's mean over its micro-batches
    assert callback.names == trace.meta.layers and callback.rec is None
    assert_twin_differs(trace, initial, micro)


@pytest.mark.slow  # imports transformers and accelerate (~5 CPU s) and trains two steps
def test_huggingface_callback_loss_is_the_steps_when_the_model_takes_num_items_in_batch(tmp_path):
    """A model whose forward takes ``**kwargs`` (every transformers model: GPT-2, Llama ...) gets the Trainer's
    ``num_items_in_batch`` and returns each micro-batch's loss already divided by the step's item count: the step's
    loss is then the micro-batches' *sum*, not their mean (which read 1/accumulation of the Trainer's own loss)."""
    class Model(Net):  # as transformers' models compute their loss under gradient accumulation
        def forward(self, x, labels=None, num_items_in_batch=None, **kwargs):
            logits = super().forward(x)
            if num_items_in_batch is None:
                return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}
            total = nn.functional.cross_entropy(logits, labels, reduction="sum")
            return {"loss": total / num_items_in_batch, "logits": logits}

    initial, micro, _ = _train_with_hf(Model(), tmp_path, 1, 1)
    assert len(micro) == ACCUMULATION
    with torch.no_grad():  # independent: the mean cross-entropy over every example of the step
        step_loss = float(nn.functional.cross_entropy(initial.head(initial.blocks(initial.stem(
            torch.cat([x for x, _ in micro])))), torch.cat([y for _, y in micro])))
    trace = Trace.load(tmp_path / "run.npz")
    assert trace["loss"][0] == pytest.approx(step_loss, rel=1e-5)
    assert trace["loss"][0] != pytest.approx(step_loss / ACCUMULATION, rel=1e-2)  # the old mean is told apart
