"""Train one plain or residual network on real data and record what happened inside it.

Example::

    python -m simulation.kinds.mlp --set arch=residual --set depth=20

``run(config) -> Trace`` is :func:`simulation.loop.train` with :class:`MLPTask`: no globals, no side effects
beyond torch's thread count, which it restores. The same config gives a bit-identical trace on CPU.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys

import numpy as np
import torch
from torch import nn

from ..config import RunConfig, differ_only_in_seed
from ..data import BANDS_RANGE, Dataset, load_dataset
from ..loop import Divergence, RunLog, StepResult, Task, check_fits, one_thread, record_steps, train
from ..loop import main as loop_main
from ..memory import conv_memory, mlp_memory
from ..models import MLP, build_model
from ..core.record import Recorder
from .stacked import column_grads, gradient_rows, stack_models, stackable
from ..summary import autocorrelation, path_length_fraction
from ..trace import Trace

__all__ = ["run", "run_together", "MLPTask", "record_steps", "input_gradient", "lesion_test_errors", "make_optimizer", "SWEEP_POINTS",
           "AUTOCORR_LAGS", "diverged_where"]

SWEEP_POINTS = 256  # inputs of the gradient sweep (Balduzzi et al. 2017 use 256 points on [-2, 2])
AUTOCORR_LAGS = 64  # lags 0..63 of the sweep gradient's autocorrelation


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


@contextlib.contextmanager
def denormals_flushed():
    """Run the block with denormal floats (below ~1.2e-38 in float32) read and written as zero
    (``torch.set_flush_denormal``; the CPU's flush-to-zero and denormals-are-zero modes), off again after.

    For the steps no recorder sees: the vanishing gradients of a deep plain sigmoid net are denormal in its first
    blocks, where the CPU computes them ~4x slower (plain depth 56: 17 CPU-s for 3 seeds, 4 with this). Those values
    are ~1e-40 against weights of ~0.1, so they move no weight; a recorded step runs without it and records them
    as they are (``grad_norm`` 1e-43 stays 1e-43)."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def make_optimizer(config: RunConfig, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """SGD with momentum or Adam, with ``weight_decay``; the multi-tensor (foreach) implementation,
    which gives the same numbers as the per-tensor loop with far fewer Python calls per step."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum,
                               weight_decay=config.weight_decay, foreach=True)
    return torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay, foreach=True)


class MLPTask(Task[RunConfig]):
    """The MLP's parts of a run (:func:`simulation.loop.train` does the rest): digits or bands data,
    :func:`~simulation.models.build_model`, SGD/Adam, cross-entropy, the :class:`~simulation.core.record.Recorder`.

    A conv ResNet reuses it by overriding :meth:`build_model` (and :meth:`load_data`): its blocks have the
    same ``branch`` / ``shortcut`` shape, so the recorder, the lesion test and the input sweep apply as they are.
    So does another kind of run (:mod:`simulation.kinds.highway`); its config then needs the fields read here: ``arch``,
    ``depth``, ``steps``, ``batch_size``, ``record_every``, ``seed``, ``optimizer``, ``lr``, ``momentum``,
    ``weight_decay``, ``lesion``, ``input_sweep``, ``dataset`` (a ClassVar will do) and ``block_widths()``.
    """

    memory = staticmethod(mlp_memory)

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.label = f"{config.arch} d={config.depth}"
        self.data = self.load_data()
        self.model = self.build_model()
        self.params = list(self.model.parameters())
        self.grads = _flat_gradients(self.params)
        self.opt = make_optimizer(config, self.params)
        self.loss_fn = nn.CrossEntropyLoss()
        self.batches = torch.Generator().manual_seed(config.seed + 1)
        if config.input_sweep:
            self.sweep = torch.linspace(*BANDS_RANGE, SWEEP_POINTS)
            self.direction = sweep_direction(self.data.n_features, config.seed)
            self.input_grads = np.full((2, SWEEP_POINTS), np.nan)
        self.modules = list(self.model.modules())
        self._curves = {"loss_curve": np.full(config.steps, np.nan, dtype=np.float32),
                        "error_curve": np.full(config.steps, np.nan, dtype=np.float32),
                        "grad_norm_curve": np.full(config.steps, np.nan)}

    def load_data(self) -> Dataset:
        return load_dataset(self.config.dataset, seed=self.config.seed)

    def build_model(self) -> MLP:
        c, d = self.config, self.data
        return build_model(c.arch, d.n_features, c.width, c.depth, d.n_classes, c.activation, c.norm, c.init_gain,
                           c.stages, c.shortcut, c.shortcut_scale, c.gate, c.gate_bias, c.residual_init)

    def recorder(self) -> Recorder:
        return Recorder(self.model)

    def curves(self) -> dict[str, np.ndarray]:
        return self._curves

    def before_training(self, recorder: Recorder) -> None:
        if self.config.input_sweep:
            self.input_grads[0] = input_gradient(self.model, self.sweep, self.direction)  # at initialisation
        self.model.train()

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(len(self.data.x_train), (self.config.batch_size,), generator=self.batches)
        return self.data.x_train[idx], self.data.y_train[idx]

    def step(self, step: int, batch: tuple[torch.Tensor, torch.Tensor]) -> StepResult:
        x, y = batch
        self.grads.zero_()
        logits = self.model(x)
        loss = self.loss_fn(logits, y)
        loss.backward()
        return self.step_result(step, logits, loss, y)

    def step_result(self, step: int, logits: torch.Tensor, loss: torch.Tensor, y: torch.Tensor) -> StepResult:
        """After the backward pass of step ``step`` (logits [B, classes], the loss, labels y [B]): the per-step
        curves, and whether the loss and the gradients are finite."""
        loss_value, error = loss.item(), _error(logits.detach(), y)
        self._curves["loss_curve"][step] = loss_value
        self._curves["error_curve"][step] = error
        self._curves["grad_norm_curve"][step] = grad_norm = _total_grad_norm(self.grads)
        return StepResult(loss_value, error, math.isfinite(loss_value) and math.isfinite(grad_norm))

    def unrecorded(self) -> contextlib.AbstractContextManager:
        return denormals_flushed()

    def test_error(self) -> float:
        _set_training(self.modules, False)
        error = _eval_error(self.model, self.data.x_test, self.data.y_test)
        _set_training(self.modules, True)
        return error

    def update(self, step: int) -> None:
        self.opt.step()

    def where_diverged(self, step: int, row: dict[str, np.ndarray]) -> Divergence:
        return Divergence(step, *diverged_where(row))

    def final_arrays(self, diverged: Divergence | None) -> dict[str, np.ndarray]:
        """After training: the intact network's test error; with ``config.lesion`` the single-block lesions, with
        ``config.input_sweep`` the input sweep (each absent otherwise: no reader of the run needs it)."""
        c, arrays = self.config, {}
        if diverged is None:
            arrays["final_test_error"] = np.float32(_eval_error(self.model.eval(), self.data.x_test, self.data.y_test))
            if c.lesion:
                arrays["lesion_test_error"] = lesion_test_errors(self.model, self.data)
            if c.input_sweep:
                self.input_grads[1] = input_gradient(self.model, self.sweep, self.direction)
        else:
            arrays["final_test_error"] = np.float32(np.nan)
            if c.lesion:
                arrays["lesion_test_error"] = np.full(len(self.model.blocks), np.nan, dtype=np.float32)
        if c.input_sweep:
            arrays["input_sweep"] = self.sweep.numpy().astype(np.float32)
            arrays["input_grad"] = self.input_grads
            arrays["input_grad_autocorr"] = np.stack([autocorrelation(g, AUTOCORR_LAGS) for g in self.input_grads])
        if self.config.arch == "residual":
            arrays["path_length_fraction"] = path_length_fraction(len(self.model.blocks))
        return arrays

    def meta(self, recorder: Recorder) -> dict[str, object]:
        return {"block_widths": [list(w) for w in self.config.block_widths()], "blocks": len(self.model.blocks)}


class ConvTask(MLPTask):
    """He et al. 2015 §4.2's conv nets (:mod:`simulation.kinds.conv`) on digits seen as 1x8x8 images (the net
    views its flat input as an image); data, optimiser, recorder, lesions and input sweep as for the MLP."""

    memory = staticmethod(conv_memory)

    def build_model(self) -> nn.Module:
        from .conv import build_conv_net

        c, d = self.config, self.data
        return build_conv_net(c.arch, c.depth, c.width, d.n_classes, c.activation, c.norm, c.shortcut, c.init_gain)


def run(config: RunConfig, progress: bool | None = None) -> Trace:
    """Train ``config`` and return its :class:`Trace` (see its docstring for the keys and shapes); see
    :func:`simulation.loop.train` for the record schedule, divergence handling and the memory guard.
    ``config.model == "conv"`` trains a conv net (:class:`ConvTask`), else an MLP."""
    return train(ConvTask if config.model == "conv" else MLPTask, config, progress)


def run_together(configs: list[RunConfig], progress: bool | None = None) -> list[Trace]:
    """Train ``configs``, MLP runs that differ only in their seed, as one stacked model (:mod:`simulation.kinds.stacked`)
    and return their traces in order: each the trace :func:`run` gives for its config alone, bit for bit, with
    ``meta.trained_with_seeds`` listing the seeds trained together. Recorded steps, held-out passes and the
    arrays after training run each seed's own model (its parameters are rows of the stacked ones); only the
    steps between records run stacked. A run that diverges stops there as it would alone; the others go on.
    Models :func:`~simulation.kinds.stacked.stackable` refuses train one after the other. Raises ConfigError before
    any work when a run would not fit in memory, ValueError for configs that differ in more than the seed."""
    configs = list(configs)
    if not differ_only_in_seed(configs) or configs[0].model != "mlp":
        raise ValueError("run_together trains MLP runs that differ only in their seed")
    for config in configs:
        check_fits(MLPTask, config)
    with one_thread(), column_grads():
        return _run_together(configs, progress)


def _run_together(configs: list[RunConfig], progress: bool | None) -> list[Trace]:
    tasks = []
    for config in configs:  # each seed's model, data and batches exactly as run() builds them
        torch.manual_seed(config.seed)
        tasks.append(MLPTask(config))
    if len(tasks) == 1 or not stackable(tasks[0].model, configs[0].batch_size):
        return [run(config, progress) for config in configs]
    runs = [RunLog(task) for task in tasks]
    template, stacked, flat = stack_models([task.model for task in tasks])
    # One gradient buffer [S, parameters] (stacked.gradient_rows): row s is seed s's flat buffer (its model's .grad
    # views, its total norm), each stacked parameter's .grad a view of its columns, in the columns' order of flat.
    grads = gradient_rows(stacked, [task.params for task in tasks], dtype=tasks[0].grads.dtype)
    for row, task in enumerate(tasks):
        task.grads = grads[row]
    # The optimiser updates every parameter of every seed as one tensor [S, parameters] (flat's storage, its
    # gradient the buffer above): the per-parameter arithmetic, without a Python pass over ~450 tensors per step.
    flat_parameter = nn.Parameter(flat)
    flat_parameter.grad = grads
    opt = make_optimizer(configs[0], [flat_parameter])
    seeds = [c.seed for c in configs]
    active = list(range(len(tasks)))
    with contextlib.ExitStack() as stack:
        recs = [stack.enter_context(task.recorder()) for task in tasks]
        for task, rec in zip(tasks, recs):
            task.before_training(rec)
        for step in range(configs[0].steps):
            batches = {row: tasks[row].batch(step) for row in active}
            record = runs[0].records_step(step)  # one schedule: the configs differ only in the seed
            if record:  # alone, recorder armed, as run() records it
                results = {}
                for row in active:
                    recs[row].arm()
                    results[row] = tasks[row].step(step, batches[row])
            else:
                with tasks[0].unrecorded():  # as train() runs a step the recorder does not see
                    results = _stacked_step(template, tasks, grads, active, batches, step)
                for row in active:
                    if not results[row].finite:  # same weights, same batch: again alone with the recorder on
                        recs[row].arm()
                        results[row] = tasks[row].step(step, batches[row])
            active = [row for row in active if not runs[row].after_step(step, results[row], recs[row], record)]
            if not active:
                break
            with tasks[0].unrecorded():
                opt.step()  # a run that stopped keeps its trace's numbers: nothing reads its weights after
    return [run_log.trace(rec, trained_with_seeds=seeds) for run_log, rec in zip(runs, recs)]


def _stacked_step(template: torch.nn.Module, tasks: list[MLPTask], grads: torch.Tensor, active: list[int],
                  batches: dict[int, tuple[torch.Tensor, torch.Tensor]], step: int) -> dict[int, StepResult]:
    """One forward and backward pass of every seed at once through the stacked ``template``; a seed that has
    stopped runs on another seed's batch, its loss left out."""
    fill = batches[active[0]]
    x = torch.stack([batches.get(row, fill)[0] for row in range(len(tasks))])
    y = torch.stack([batches.get(row, fill)[1] for row in range(len(tasks))])
    grads.zero_()
    logits = template(x)
    losses = {row: tasks[row].loss_fn(logits[row], y[row]) for row in active}
    torch.stack(list(losses.values())).sum().backward()  # d(sum)/d(loss_s) = 1: each seed's own gradients
    return {row: tasks[row].step_result(step, logits[row], losses[row], y[row]) for row in active}


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


def diverged_where(row: dict[str, np.ndarray]) -> tuple[int, str]:
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


main = functools.partial(loop_main, MLPTask, RunConfig, prog="python -m simulation.kinds.mlp")


if __name__ == "__main__":
    sys.exit(main())
