"""A user's own nn.Module as a run: load its factory, find its residual additions, train it and its plain twin.

Example::

    python render.py train --model torchvision.models:resnet18 --set model.num_classes=10 --set data=digits-image32
    python -m simulation.kinds.user_model '{"spec": "examples/my_resnet.py:build", "data": "digits-image32", "steps": 20}'

A run is one :class:`~simulation.config.UserModelConfig`: the factory (``path/to/file.py:factory`` or
``package.module:factory``) is called with the config's keyword arguments after ``torch.manual_seed(seed)``, so
the residual model and its twin (``arch="plain"``) start from the same weights. One probe forward on two
training examples (:func:`simulation.core.residual_adds.find_residual_adds`) checks the output size against the data
and finds every residual addition h = shortcut(x) + F(x), named by the user's module paths; the twin is the same
model with each of them replaced by F(x) alone (:class:`simulation.core.residual_adds.Interceptor`). Both train in
the one training loop (:func:`simulation.loop.train`) with the same data, batches and optimiser, recorded by
:class:`UserRecorder` with the statistics of :class:`simulation.core.record.Recorder`.

Errors in the user's code (a factory or forward that raises, a file that does not parse) end in one line that
names the user's file and line (:class:`UserModelError`, a ConfigError), never our traceback.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import math
import os
import sys
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..atomic_io import input_file
from ..config import NO_MODEL, ConfigError, UserModelConfig, parse_spec
from ..data import Dataset
from ..loop import Divergence, StepResult, Task, train
from ..memory import FLOAT, MemoryEstimate, budget_bytes
from ..core.record import (COUNT_KEYS, STAT_KEYS, HookPoint, HookRecorder, Recorder, output_and_branch_stats,
                     reduce_by_shape, row_norm, tensor_norm)
from ..core.residual_adds import Discovery, Interceptor, NoResidualError, ResidualAdd, find_residual_adds, leaves
from ..torchvision_ops import allow_torchvision_without_ops
from ..trace import Trace
from ..config import a_type

__all__ = ["UserModelError", "allow_torchvision_without_ops", "user_error", "load_factory", "build_model", "is_tokens",
           "load_user_data", "probe", "UserRecorder", "UserTask", "run", "estimate_memory", "IMAGE_SIZE",
           "TEST_SEQUENCES", "EVAL_BATCH"]

TEST_SEQUENCES = 512  # token tasks: held-out sequences (as the Transformer runs)
EVAL_BATCH = 256  # examples per forward when measuring the test error (no gradients kept)
IMAGE_SIZE = 32  # digits-image32: the 8x8 digits upsampled (bilinear) for ImageNet-style stems
PROBE_EXAMPLES = 2  # BatchNorm needs more than one value per channel in training mode
ROOT = Path(__file__).resolve().parent.parent


class UserModelError(ConfigError):
    """The user's model cannot be loaded, built or run; the message is one line naming their file and line."""


# -- loading the factory ------------------------------------------------------------------------------

def _user_roots(spec: str) -> list[Path]:
    """Files or folders whose frames are the user's code in a traceback."""
    kind, where, _ = parse_spec(spec)
    if kind == "file":
        return [Path(where).resolve()]
    found = importlib.util.find_spec(where.split(".")[0])
    if found is None or found.origin is None:
        return []
    origin = Path(found.origin).resolve()
    return [origin.parent if found.submodule_search_locations else origin]


# What the user's code may raise and we report in one line: any Exception, and SystemExit (a factory that is
# sys.exit, a module that calls it), which would otherwise end the command silently. Never KeyboardInterrupt.
USER_CODE_ERRORS = (Exception, SystemExit)


def user_error(exc: BaseException, spec: str, doing: str) -> UserModelError:
    """One line for an exception raised by the user's code: their deepest frame's file and line, the
    exception, and what we were doing (``building the model``, ``the forward pass``)."""
    roots = _user_roots(spec)
    where = None
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{exc.filename}, line {exc.lineno}"
    else:
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            path = Path(frame.filename).resolve()
            if any(path == root or root in path.parents for root in roots):
                where = f"{frame.filename}, line {frame.lineno}"
                break
    text = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)  # str() repeats file and line
    message = text.strip().splitlines()[0] if text.strip() else ""
    what = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return UserModelError(f"{where or spec}: {what} ({doing})")


@functools.lru_cache(maxsize=32)
def load_factory(spec: str, source: str = "") -> Callable[..., Any]:
    """The callable named by ``spec`` (``path/to/file.py:factory`` or ``package.module:factory``).

    A file is loaded as a fresh module (its folder first on ``sys.path`` while it loads, so that it can import
    its neighbours; no bytecode is written beside it); ``source`` (the config's fingerprint of the code) only keys
    the cache, so an edited file is loaded again. Raises :class:`UserModelError` (one line) for a missing file or
    module, code that raises or does not parse, or a missing or non-callable factory."""
    kind, where, name = parse_spec(spec)
    allow_torchvision_without_ops()
    try:
        if kind == "file":
            path = input_file(where, "model file", UserModelError)
            module_name = f"_residual_user_{abs(hash(str(path.resolve())))}"
            found = importlib.util.spec_from_file_location(module_name, path)
            if found is None or found.loader is None:
                raise UserModelError(f"model file {where} cannot be loaded as Python")
            module = importlib.util.module_from_spec(found)
            sys.path.insert(0, str(path.resolve().parent))
            # the user's folder is left as it was: no __pycache__ beside their file (or the neighbours it imports)
            writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
            try:
                sys.modules[module_name] = module
                found.loader.exec_module(module)
            finally:
                sys.dont_write_bytecode = writes_bytecode
                sys.path.remove(str(path.resolve().parent))
        else:
            try:
                module = importlib.import_module(where)
            except ModuleNotFoundError as exc:
                if exc.name and where.startswith(exc.name):
                    raise UserModelError(f"no module named {exc.name!r} (model {spec})") from None
                raise
    except UserModelError:
        raise
    except USER_CODE_ERRORS as exc:  # the user's module raised while it was imported
        raise user_error(exc, spec, f"importing {where}") from None
    factory = getattr(module, name, None)
    if factory is None:
        raise UserModelError(f"{where} has no {name!r} (model {spec})")
    if not callable(factory):
        raise UserModelError(f"{where}:{name} is {a_type(factory)}, not a function or class (model {spec})")
    return factory


def build_model(config: UserModelConfig) -> nn.Module:
    """``factory(**args)`` of ``config``; the caller seeds torch. Raises UserModelError (one line)."""
    factory = load_factory(config.spec, config.source)
    try:
        model = factory(**config.factory_args())
    except USER_CODE_ERRORS as exc:
        raise user_error(exc, config.spec, f"building the model with {config.args}") from None
    if not isinstance(model, nn.Module):
        raise UserModelError(f"{config.spec} returned {a_type(model)}, not a torch.nn.Module")
    return model


# -- data ---------------------------------------------------------------------------------------------

def is_tokens(data: Dataset) -> bool:
    """Whether ``data`` holds token targets [N, T] (a language model's), not class labels [N]."""
    return data.y_train.ndim == 2


def _split(x: np.ndarray, y: np.ndarray, seed: int, test_fraction: float = 0.2) -> tuple[np.ndarray, ...]:
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = max(int(round(len(x) * test_fraction)), 1)
    return x[order[n_test:]], y[order[n_test:]], x[order[:n_test]], y[order[:n_test]]


def load_user_data(config: UserModelConfig) -> Dataset:
    """The data of ``config.data`` as a :class:`~simulation.data.Dataset`: ``x_*`` float32 [N, ...] (images,
    features) or int64 [N, L] (tokens); ``y_*`` int64 [N] class labels, or int64 [N, T] target tokens of the last T
    positions (:func:`is_tokens`); ``n_classes``: the outputs the model needs (per example, or per token).

    - ``digits``: sklearn's 8x8 digits as 64 standardised features (:func:`simulation.data.load_dataset`);
      ``digits-image``: the same as [N, 1, 8, 8]; ``digits-image32``: upsampled bilinearly to 32x32 and repeated
      to 3 channels, [N, 3, 32, 32], for ImageNet-style nets (torchvision's ResNets); 10 classes.
    - ``copy``, ``reverse``, ``sort``: the seeded token tasks of the Transformer runs
      (:func:`simulation.kinds.transformer.make_task`), for a decoder-only language model: the input is the source
      followed by BOS and the target shifted right ([N, 2 * seq_len], ids 0..vocab); the model predicts the target
      at the last seq_len positions; ``vocab + 1`` outputs per token. Training sequences are drawn fresh per step
      (``x_train`` holds one batch), the test set is 512 fixed sequences.
    - a ``.npz`` path: arrays ``x`` (numbers; integers are read as token ids) and ``y`` (int labels [N], or int
      target tokens [N, T] for the last T positions), read with ``allow_pickle=False``, split 80/20 by ``seed``.

    Raises ConfigError (one line) for a data file that cannot be read or has the wrong arrays.
    """
    name = config.data
    if name in ("digits", "digits-image", "digits-image32"):
        from ..data import load_dataset

        d = load_dataset("digits", config.seed)
        x_train, x_test = d.x_train, d.x_test
        if name != "digits":
            x_train, x_test = x_train.view(-1, 1, 8, 8), x_test.view(-1, 1, 8, 8)
        if name == "digits-image32":
            x_train, x_test = (F.interpolate(t, size=IMAGE_SIZE, mode="bilinear", align_corners=False)
                               .expand(-1, 3, -1, -1).contiguous() for t in (x_train, x_test))
        return Dataset(name, x_train, d.y_train, x_test, d.y_test, d.n_classes)
    if name in ("copy", "reverse", "sort"):
        test = _token_batch(config, TEST_SEQUENCES, torch.Generator().manual_seed(10_000 + config.seed))
        train_x = _token_batch(config, config.batch_size, torch.Generator().manual_seed(config.seed + 1))
        return Dataset(name, train_x[0], train_x[1], test[0], test[1], config.vocab + 1)
    return _load_npz(name, config.seed)


def _token_batch(config: UserModelConfig, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` sequences of the token task: (tokens [n, 2T] = source, BOS, target[:-1]; target [n, T])."""
    from .transformer import make_task

    src, tgt_in, tgt = make_task(config.data, config.vocab, config.seq_len, n, generator)
    return torch.cat([src, tgt_in], 1), tgt


def _load_npz(path: str, seed: int) -> Dataset:
    file = input_file(path, "data file", ConfigError)
    if not zipfile.is_zipfile(file):  # np.load would take any other bytes for a pickle (refused) or an .npy array
        raise ConfigError(f"data file {path} is not an .npz archive (np.savez(FILE, x=..., y=...) writes one)")
    try:
        with np.load(file, allow_pickle=False) as data:
            if "x" not in data.files or "y" not in data.files:
                raise ConfigError(f"data file {path} must hold arrays 'x' and 'y'; it has {', '.join(data.files) or 'none'}")
            x, y = data["x"], data["y"]
    except ConfigError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        raise ConfigError(f"data file {path} cannot be read as .npz ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    if x.dtype.kind not in "biuf" or y.dtype.kind not in "biu":
        raise ConfigError(f"data file {path}: x must hold numbers and y integer labels; got {x.dtype} and {y.dtype}")
    if len(x) != len(y) or len(x) < 2 or y.ndim not in (1, 2) or x.ndim < 2:
        raise ConfigError(f"data file {path}: x [N, ...] and y [N] (or [N, T]) with N >= 2 rows each; got "
                          f"{list(x.shape)} and {list(y.shape)}")
    if y.min() < 0:
        raise ConfigError(f"data file {path}: labels in y must be >= 0; got {int(y.min())}")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise ConfigError(f"data file {path}: x holds NaN or inf")
    x = x.astype(np.int64) if x.dtype.kind in "biu" else x.astype(np.float32)
    x_train, y_train, x_test, y_test = _split(x, y.astype(np.int64), seed)
    return Dataset(Path(path).name, *(torch.from_numpy(np.ascontiguousarray(a)) for a in
                                       (x_train, y_train, x_test, y_test)), int(y.max()) + 1)


# -- the model's output, loss and error ----------------------------------------------------------------

def logits_of(output: Any) -> torch.Tensor:
    """The logits in a model's output: the tensor itself, ``.logits`` (Hugging Face) or the first tensor."""
    if isinstance(output, torch.Tensor):
        return output
    logits = getattr(output, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    first = next(leaves(output), None)
    if first is None:
        raise UserModelError(f"the model's output is {a_type(output)} with no tensor in it")
    return first


def loss_and_error(logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy (nats, mean per example or per token) and the fraction wrong, for labels [B] and logits
    [B, C], or target tokens [B, T] and logits [B, L, V] (the last T positions are scored)."""
    if y.ndim == 2:
        logits = logits[:, -y.shape[1]:]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    else:
        loss = F.cross_entropy(logits, y)
    return loss, (logits.detach().argmax(-1) != y).float().mean()


def check_output(output: Any, data: Dataset, config: UserModelConfig) -> None:
    """One clear line when the model's output cannot be scored on ``data`` (shape, size, non-finite)."""
    logits = logits_of(output)
    n = PROBE_EXAMPLES
    if is_tokens(data):
        length = data.x_train.shape[1]
        if logits.ndim != 3 or logits.shape[0] != n or logits.shape[1] < data.y_train.shape[1] \
                or logits.shape[2] < data.n_classes:
            raise UserModelError(
                f"{config.spec} outputs shape {list(logits.shape)} for {n} sequences of {length} tokens; data "
                f"{config.data} needs [{n}, {length}, >= {data.n_classes}] (a logit per token for ids 0..{data.n_classes - 1})")
    elif list(logits.shape) != [n, data.n_classes]:
        raise UserModelError(
            f"{config.spec} outputs shape {list(logits.shape)} for {n} examples of data {config.data} "
            f"(input {list(data.x_train.shape[1:])}); it needs [{n}, {data.n_classes}]: one logit per class "
            f"(e.g. --set model.num_classes={data.n_classes})")
    if not logits.dtype.is_floating_point:
        raise UserModelError(f"{config.spec} outputs {logits.dtype} values; it needs floating-point logits")
    bad = int(torch.logical_not(torch.isfinite(logits)).sum())
    if bad:
        raise UserModelError(f"{config.spec} outputs {bad} non-finite value(s) (NaN or inf) at initialisation "
                             f"on data {config.data}")


def check_backward(output: Any, y: torch.Tensor, model: nn.Module, config: UserModelConfig) -> None:
    """One clear line when the loss on ``output`` (labels ``y``) cannot be differentiated: an output cut off from
    the parameters (``.detach()``, ``torch.no_grad()`` in forward), or a backward of the user's own (an
    ``autograd.Function``, a tensor hook) that raises. Leaves every parameter's ``.grad`` None."""
    logits = logits_of(output)
    if not logits.requires_grad:
        raise UserModelError(f"{config.spec}: its output has no gradient (.detach() or torch.no_grad() in forward?); "
                             "training needs d(loss)/d(parameters)")
    try:
        loss_and_error(logits, y)[0].backward()
    except USER_CODE_ERRORS as exc:
        raise user_error(exc, config.spec, "the backward pass") from None
    finally:
        for parameter in model.parameters():
            parameter.grad = None


# -- the probe ----------------------------------------------------------------------------------------

@dataclass
class Probe:
    """What :func:`probe` found: the residual additions, the parameter count and the bytes one example's
    forward makes (for the memory guard)."""

    discovery: Discovery
    parameters: int
    activation_bytes_per_example: int


def probe(model: nn.Module, data: Dataset, config: UserModelConfig) -> Probe:
    """One forward and backward on :data:`PROBE_EXAMPLES` training examples in training mode: checks the output
    against the data and finds the residual additions. Leaves the model's parameters, buffers (BatchNorm statistics) and
    torch's RNG as they were. Raises UserModelError (one line) for a forward or backward that raises, an output that
    does not fit the data or has no gradient, or a model with no residual addition."""
    x = data.x_train[:PROBE_EXAMPLES]
    saved = [b.detach().clone() for b in model.buffers()]
    try:
        with torch.random.fork_rng(devices=[]):
            model.train()
            try:
                discovery = find_residual_adds(model, (x,), blocks=config.blocks)
            except NoResidualError as exc:
                raise UserModelError(f"{config.spec}: {exc}") from None
            except UserModelError:
                raise
            except USER_CODE_ERRORS as exc:
                hint = (f" on token ids 0..{data.n_classes - 1}, shape {list(x.shape)}" if is_tokens(data) else
                        f" on input {list(x.shape)}; other data: --set data=digits|digits-image|digits-image32")
                raise user_error(exc, config.spec, f"the forward pass{hint}") from None
        check_output(discovery.output, data, config)
        check_backward(discovery.output, data.y_train[:PROBE_EXAMPLES], model, config)
    finally:
        with torch.no_grad():
            for buffer, value in zip(model.buffers(), saved):
                buffer.copy_(value)
    discovery.output = None
    return Probe(discovery, sum(p.numel() for p in model.parameters()),
                 math.ceil(discovery.activation_bytes / PROBE_EXAMPLES))


@functools.lru_cache(maxsize=16)
def meta_parameter_count(config: UserModelConfig) -> int | None:
    """The parameters of ``config``'s model built on torch's meta device (shapes without storage: a model of
    90 GB costs nothing), or None where its factory cannot build there (it reads values, loads a file, returns
    no Module...): the caller builds it for real, which reports any error. Leaves torch's RNG as it was."""
    factory = load_factory(config.spec, config.source)
    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            model = factory(**config.factory_args())
        return sum(p.numel() for p in model.parameters()) if isinstance(model, nn.Module) else None
    except USER_CODE_ERRORS:
        return None


@functools.lru_cache(maxsize=16)
def _probe_config(config: UserModelConfig) -> Probe:
    torch.manual_seed(config.seed)
    data = load_user_data(config)
    return probe(build_model(config), data, config)


def estimate_memory(config: UserModelConfig) -> MemoryEstimate:
    """What training ``config`` needs (see :mod:`simulation.memory`): parameters, gradients, the optimiser's
    state (Adam 2 copies, SGD with momentum 1) plus one transient copy, and the activations of a training batch
    as the probe measured them per example (every tensor the forward made, views excluded), plus the recorder's
    dL/dh per block. Builds and probes the model (once per config in this process), unless its parameters
    alone, counted on torch's meta device, are over :func:`simulation.memory.budget_bytes`: then the estimate
    without activations (a floor), which the caller's budget check refuses, and nothing was allocated."""
    if not config.spec:
        raise ConfigError(NO_MODEL)
    state = 2 if config.optimizer == "adam" else 1 if config.momentum else 0
    count = meta_parameter_count(config)
    if count is not None and (state + 3) * count * FLOAT > budget_bytes()[0]:  # refused before it is built
        return MemoryEstimate(count * FLOAT, count * FLOAT, (state + 1) * count * FLOAT, None)
    found = _probe_config(config)
    params = found.parameters * FLOAT
    per_example = found.activation_bytes_per_example
    block_bytes = sum(math.prod(a.shape[1:]) for a in found.discovery.adds) * FLOAT
    batch = max(config.batch_size, 1)
    return MemoryEstimate(params, params, (state + 1) * params, batch * (per_example + block_bytes))


# -- recording ----------------------------------------------------------------------------------------

class UserRecorder(HookRecorder):
    """The statistics of :class:`simulation.core.record.Recorder` at each residual addition of a user's model.

    Per block (one residual addition h = shortcut(x) + F(x), named by the user's module path), read by the
    :class:`~simulation.core.residual_adds.Interceptor` at the addition itself: ``act_mean``, ``act_std``, ``act_norm``
    of h; ``input_norm`` of x; ``branch_norm``, ``branch_std`` of F(x); ``shortcut_norm`` (||x|| for an identity,
    ||W_s x|| for a projection, 0 in the plain twin); ``out_grad_norm`` = ||dL/dh|| and ``in_grad_norm`` =
    ||dL/dx|| over the batch (``tensor.register_hook``; no full backward hooks); ``grad_norm`` = ||dL/dW|| over the
    block's weight matrices (the parameters of >= 2 dimensions that its branch and shortcut use; a module used
    by two blocks counts in both, with its summed gradient); the non-finite counts. Norms of activations are the
    mean over the first (batch) dimension of each example's L2 norm. The tensors are copied at the addition (so
    that an in-place ``+=`` or a later ``ReLU(inplace=True)`` cannot change them; x is not copied again when it
    is the previous block's h, unchanged) and reduced in :meth:`collect`, those of one shape stacked, in the
    tensors' precision and again in float64 where float32 would underflow or overflow, as the MLP recorder does.

    Hooks are lazy as in every recorder here: :meth:`arm` installs the interceptor, :meth:`collect` removes it;
    for the plain twin the interceptor (which removes the shortcuts) stays installed from ``__enter__`` to
    ``__exit__`` and arming only turns recording on.
    """

    DTYPES = {**Recorder.DTYPES, "in_grad_norm": np.float64}

    def __init__(self, model: nn.Module, adds: list[ResidualAdd], interceptor: Interceptor) -> None:
        self.adds, self.interceptor = adds, interceptor
        params = dict(model.named_parameters(remove_duplicate=True))
        self.weights = [[params[name] for name in add.weights] for add in adds]
        self._all_weights = list(dict.fromkeys(p for weights in self.weights for p in weights))
        self.identity = [add.shortcut == "identity" for add in adds]
        self._recording = False
        super().__init__(model)

    def hook_points(self) -> list[HookPoint]:
        return [HookPoint(add.name, self.model, "block", index) for index, add in enumerate(self.adds)]

    def __enter__(self) -> "UserRecorder":
        super().__enter__()
        if self.interceptor.plain:
            self.interceptor.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            super().__exit__(*exc)
        finally:
            if self.interceptor.plain:
                self.interceptor.release()

    def _add_hooks(self) -> None:
        self.interceptor.on_operands, self.interceptor.on_output = self._on_operands, self._on_output
        self.interceptor.acquire()
        self._recording = True
        self.handles.append(self.interceptor)

    def _remove_hooks(self) -> None:
        if self._recording:
            self._recording = False
            self.interceptor.on_operands = self.interceptor.on_output = None
            self.interceptor.release()
        self.handles.clear()

    def _clear(self) -> None:
        # The armed step's tensors (copies taken at the addition, see the class docstring), by block index.
        self._inputs: dict[int, torch.Tensor] = {}
        self._branches: dict[int, torch.Tensor] = {}
        self._shortcuts: dict[int, torch.Tensor] = {}
        self._outputs: dict[int, torch.Tensor] = {}
        self._out_grads: dict[int, torch.Tensor] = {}
        self._in_grads: dict[int, torch.Tensor] = {}
        self._last: tuple[torch.Tensor, int, int] | None = None  # the latest h: (tensor, version, block)

    # at the addition: copies, so that an in-place += or a later ReLU(inplace=True) cannot change them
    def _on_operands(self, index: int, x: torch.Tensor | None, branch: torch.Tensor,
                     shortcut: torch.Tensor | None) -> None:
        with torch.no_grad():
            if x is not None:
                last = self._last
                if last is not None and last[0] is x and last[1] == x._version:
                    self._inputs[index] = self._outputs[last[2]]  # x is the previous block's h, unchanged
                else:
                    self._inputs[index] = x.detach().clone()
            self._branches[index] = branch.detach().clone()
            if shortcut is not None and not self.identity[index]:
                self._shortcuts[index] = shortcut.detach().clone()
        if x is not None and x.requires_grad:
            x.register_hook(functools.partial(self._on_grad, self._in_grads, index))

    def _on_output(self, index: int, h: torch.Tensor) -> None:
        with torch.no_grad():
            self._outputs[index] = h.detach().clone()
        self._last = (h, h._version, index)
        if h.requires_grad:
            h.register_hook(functools.partial(self._on_grad, self._out_grads, index))

    def _on_grad(self, store: dict[int, torch.Tensor], index: int, grad: torch.Tensor) -> None:
        store[index] = grad.detach()

    def _statistics(self) -> dict[str, np.ndarray]:
        n = len(self.adds)
        row = {key: np.zeros(n) if key in (*COUNT_KEYS, "shortcut_norm") else np.full(n, np.nan)
               for key in (*STAT_KEYS, "in_grad_norm")}
        output_and_branch_stats(row, self._outputs, self._branches)
        norms = reduce_by_shape({**{("x", i): t for i, t in self._inputs.items()},
                                 **{("s", i): t for i, t in self._shortcuts.items()}}, row_norm)
        for (kind, i), (norm,) in norms.items():
            row["input_norm" if kind == "x" else "shortcut_norm"][i] = norm
        if not self.interceptor.plain:
            for i in self._inputs:
                if self.identity[i]:
                    row["shortcut_norm"][i] = row["input_norm"][i]
        for key, grads in (("out_grad_norm", self._out_grads), ("in_grad_norm", self._in_grads)):
            for i, (norm,) in reduce_by_shape(grads, tensor_norm).items():
                row[key][i] = norm
                if key == "out_grad_norm" and not math.isfinite(norm):
                    row["nonfinite_grad"][i] += int(torch.logical_not(torch.isfinite(grads[i])).sum())
        self._weight_stats(row)
        row["nonfinite"] = row["nonfinite_act"] + row["nonfinite_grad"]
        return row

    def _weight_stats(self, row: dict[str, np.ndarray]) -> None:
        """``grad_norm`` per block: every weight gradient's norm in one ``_foreach_norm``, again in float64
        where float32 squares would underflow or overflow (a norm outside [1e-15, 1e15], 0 or non-finite)."""
        grads = {p: p.grad.detach() for p in self._all_weights if p.grad is not None}
        if not grads:
            return
        tensors = list(grads.values())
        values = torch.stack(torch._foreach_norm(tensors))
        low, high = torch.aminmax(values.abs())
        if not (low.item() > 1e-15 and high.item() < 1e15):
            values = torch.stack([torch.linalg.vector_norm(t, dtype=torch.float64) for t in tensors])
        norm_of = dict(zip(grads, values.tolist()))
        for i, weights in enumerate(self.weights):
            present = [norm_of[p] for p in weights if p in norm_of]
            if not present:
                continue
            row["grad_norm"][i] = math.sqrt(math.fsum(v * v for v in present))
            if not math.isfinite(row["grad_norm"][i]):
                row["nonfinite_grad"][i] += sum(int(torch.logical_not(torch.isfinite(grads[p])).sum())
                                                for p in weights if p in grads)


# -- the task -----------------------------------------------------------------------------------------

class UserTask(Task[UserModelConfig]):
    """A user's model (or its plain twin) in :func:`simulation.loop.train`: the factory's model (seeded, so
    both arches start from the same weights), the probe, Adam or SGD on every parameter, batches drawn with a
    generator seeded by ``seed + 1`` (the same for both arches), the test error on the held-out split."""

    memory = staticmethod(estimate_memory)

    def __init__(self, config: UserModelConfig) -> None:
        super().__init__(config)
        if not config.spec:
            raise ConfigError(NO_MODEL)
        self.label = f"{config.spec} {config.arch}"
        self.model = build_model(config)
        self.data = load_user_data(config)
        found = probe(self.model, self.data, config)
        self.adds = found.discovery.adds
        self.interceptor = Interceptor(self.model, self.adds, plain=config.arch == "plain")
        if config.optimizer == "adam":
            self.opt = torch.optim.Adam(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        else:
            self.opt = torch.optim.SGD(self.model.parameters(), lr=config.lr, momentum=config.momentum,
                                       weight_decay=config.weight_decay)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.batches = torch.Generator().manual_seed(config.seed + 1)
        self._curves = {key: np.full(config.steps, np.nan, dtype=np.float64 if key == "grad_norm_curve" else np.float32)
                        for key in ("loss_curve", "error_curve", "grad_norm_curve")}
        self.model.train()

    def recorder(self) -> UserRecorder:
        return UserRecorder(self.model, self.adds, self.interceptor)

    def curves(self) -> dict[str, np.ndarray]:
        return self._curves

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.data.name in ("copy", "reverse", "sort"):
            return _token_batch(self.config, self.config.batch_size, self.batches)
        idx = torch.randint(len(self.data.x_train), (self.config.batch_size,), generator=self.batches)
        return self.data.x_train[idx], self.data.y_train[idx]

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return logits_of(self.model(x))
        except UserModelError:
            raise
        except USER_CODE_ERRORS as exc:  # the user's forward raised
            raise user_error(exc, self.config.spec, "the forward pass") from None

    def step(self, step: int, batch: tuple[torch.Tensor, torch.Tensor]) -> StepResult:
        x, y = batch
        self.opt.zero_grad(set_to_none=True)
        loss, error = loss_and_error(self._forward(x), y)
        try:
            loss.backward()
        except USER_CODE_ERRORS as exc:  # the user's backward (autograd.Function, hook) raised after the probe's
            raise user_error(exc, self.config.spec, "the backward pass") from None
        grads = [p.grad for p in self.params if p.grad is not None]
        total = float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))) if grads else 0.0
        loss_value, error_value = loss.item(), error.item()
        self._curves["loss_curve"][step] = loss_value
        self._curves["error_curve"][step] = error_value
        self._curves["grad_norm_curve"][step] = total
        return StepResult(loss_value, error_value, math.isfinite(loss_value) and math.isfinite(total))

    def test_error(self) -> float:
        self.model.eval()
        wrong = 0.0
        try:
            with torch.no_grad():
                for start in range(0, len(self.data.x_test), EVAL_BATCH):
                    x, y = self.data.x_test[start:start + EVAL_BATCH], self.data.y_test[start:start + EVAL_BATCH]
                    wrong += float(loss_and_error(self._forward(x), y)[1]) * len(x)
        finally:
            self.model.train()
        return wrong / len(self.data.x_test)

    def update(self, step: int) -> None:
        self.opt.step()

    def where_diverged(self, step: int, row: dict[str, np.ndarray]) -> Divergence:
        from .mlp import diverged_where

        return Divergence(step, *diverged_where(row))

    def final_arrays(self, diverged: Divergence | None) -> dict[str, np.ndarray]:
        if diverged is not None:
            return {"final_test_error": np.float32(np.nan)}
        self.interceptor.acquire()  # the twin's shortcuts stay removed (the recorder has let go of it)
        try:
            return {"final_test_error": np.float32(self.test_error())}
        finally:
            self.interceptor.release()

    def meta(self, recorder: UserRecorder) -> dict[str, object]:
        return {"blocks": len(self.adds), "shortcuts": [add.shortcut for add in self.adds]}


def run(config: UserModelConfig, progress: bool | None = None) -> Trace:
    """Train ``config`` (:class:`UserTask` in :func:`simulation.loop.train`) and return its Trace.

    Arrays (T records, ``steps`` optimiser steps, B blocks = the residual additions in forward order):
    ``step`` int64 [T]; ``loss``, ``error``, ``test_error`` float32 [T]; ``loss_curve``, ``error_curve`` float32
    [steps], ``grad_norm_curve`` float64 [steps]; per block [T, B]: ``act_mean``, ``act_std``, ``act_norm``,
    ``input_norm``, ``branch_norm``, ``branch_std``, ``shortcut_norm`` (float32), ``grad_norm``,
    ``out_grad_norm``, ``in_grad_norm`` (float64), ``nonfinite``, ``nonfinite_act``, ``nonfinite_grad``
    (int64), as :class:`UserRecorder` says; ``final_test_error`` float32 []. The MLP runs' lesion and input-sweep
    arrays are absent. ``meta.layers``: the blocks' names (the user's module paths), ``meta.blocks``: B,
    ``meta.shortcuts``: identity | functional | projection per block (of the residual model, also in the twin).
    """
    return train(UserTask, config, progress)


def main(argv: list[str] | None = None) -> int:
    """``python -m simulation.kinds.user_model CONFIG_JSON``: train one run and print its summary as JSON;
    ``--estimate CONFIG_JSON``: print the memory estimate's parts as JSON (used by the torch-free memory guard).
    A bad model or parameter prints one line and returns 1."""
    from ..summary import summarize

    argv = sys.argv[1:] if argv is None else argv
    estimate_only = argv[:1] == ["--estimate"]
    try:
        config = UserModelConfig.from_dict({"kind": "user_model", **json.loads(argv[estimate_only])})
        if estimate_only:
            e = estimate_memory(config)
            print(json.dumps({"parameters": e.parameters, "gradients": e.gradients, "optimizer": e.optimizer,
                              "activations": e.activations}))
            return 0
        trace = run(config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summarize(trace).to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
