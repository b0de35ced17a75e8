"""watch: record a model's residual blocks inside the user's own training loop, into a trace the scenes draw.

Example::

    from residual_lecture import watch
    with watch(model, "runs/resnet.npz", every=50) as rec:
        for x, y in loader:
            loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            rec.step(optimizer, scaler=scaler, loss=loss)   # after backward (+ unscale_ / clip), before step()
            scaler.step(optimizer); scaler.update(); optimizer.zero_grad()

A *step* is one optimiser step: :meth:`Watch.step` is called once per step, after every micro-batch's backward.
Steps 0, ``every``, 2 ``every`` ... are recorded. Hooks exist only around a recorded step: ``rec.step`` of the step
before arms them (the block interceptor of :class:`simulation.core.residual_adds.Interceptor`, one forward pre-hook on
the model) and ``rec.step`` of the recorded step removes them, so a step that is not recorded runs the model with no
hook of ours and no device synchronisation (it writes the loss and the loss scale into a small buffer on the device).
The update size of a record is its own step's: ``rec.step`` copies the blocks' weights and a global optimiser post-hook,
present only until that step's ``optimizer.step()`` has run, compares them and writes the record.

The residual additions are found as ``--model`` finds them (:func:`simulation.core.residual_adds.find_residual_adds`):
at the first training forward after ``watch`` (or at once with ``example_input=``), one extra forward of ours on the
first two examples of that batch (the whole batch if that fails), in the model's mode, with its buffers and the RNG
restored after. Statistics per block (what is read where, the reduction over micro-batches and ranks, units) are
those of :class:`simulation.kinds.user_model.UserRecorder` plus the update size and the optimiser's state; docs/how-to/watch.md
says each. All are computed on the tensors' own device (norms in ``norm_dtype``, float32 by default; sums in
float64), stacked into one tensor and copied to the host once per recorded step.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import platform
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from simulation.core.record import COUNT_KEYS
from simulation.core.residual_adds import Interceptor, NoResidualError, ResidualAdd, find_residual_adds, leaves
from simulation.trace import TraceWriter

__all__ = ["watch", "Watch", "plain_twin", "WatchError", "WATCH_SCHEMA", "PROBE_EXAMPLES", "unwrap"]

WATCH_SCHEMA = 2  # version of what a watched trace holds (meta.watch["schema"]; 2: update_ratio is the recorded
# step's own update, 1: the step before's); docs/how-to/watch.md
PROBE_EXAMPLES = 2  # examples of the first batch the probe forward runs on (BatchNorm needs 2 in training mode)
_TWIN = "_residual_lecture_twin"  # the attribute of a plain twin that holds its found additions

# Per-block sums kept on the device during a recorded step (float64), in this order.
_ACT_NORM, _ACT_SUM, _ACT_SQ, _ACT_BAD, _IN_NORM, _F_NORM, _F_SUM, _F_SQ, _S_NORM, _OUT_G, _IN_G, _G_BAD = range(12)
_SUMS = 12
# Per-block counts kept on the host: examples and entries of h, examples of x, entries and examples of F, examples
# of a projection shortcut, dL/dh and dL/dx read.
_C_H_EX, _C_H_N, _C_X_EX, _C_F_N, _C_F_EX, _C_S_EX, _C_OUT, _C_IN = range(8)
_COUNTS = 8

_CHUNK = 1024  # steps per chunk of the per-step buffers (loss, lr, scale)
PROGRESS_SECONDS = 10.0  # the trace's metadata says how many steps the loop has taken at most this often (a run
# killed between records then reads as having run at least that many; a host-side JSON write), and, in one process,
# the loss curve since the last record is written with it (one device-to-host copy of [steps, 3] per interval)

_WATCHES: "weakref.WeakKeyDictionary[nn.Module, Watch]" = weakref.WeakKeyDictionary()


class WatchError(RuntimeError):
    """A model or call that watch cannot record; the message is one line saying what to do."""


# -- the model behind its wrappers ----------------------------------------------------------------------

def unwrap(model: nn.Module) -> tuple[nn.Module, list[str]]:
    """The module whose forward holds the blocks, and the wrappers around it, outermost first:
    ``DataParallel``, ``DistributedDataParallel`` (``.module``) and ``torch.compile`` (``._orig_mod``).
    Raises :class:`WatchError` (one line) for FSDP and for DataParallel over several devices."""
    wrappers = []
    while True:
        if not isinstance(model, nn.Module):
            raise WatchError(f"watch needs a torch.nn.Module; got {type(model).__name__}")
        for m in model.modules():
            if any(c.__name__ in ("FullyShardedDataParallel", "FSDPModule") for c in type(m).__mro__):
                raise WatchError("watch does not support FSDP (parameters and gradients are sharded across ranks); "
                                 "record the run under DistributedDataParallel or on one device")
        if isinstance(model, nn.DataParallel):
            if len(model.device_ids or []) > 1:
                raise WatchError("watch does not support DataParallel over several GPUs (its replicas run in threads); "
                                 "use DistributedDataParallel, as PyTorch recommends")
            wrappers.append("DataParallel")
            model = model.module
        elif isinstance(model, nn.parallel.DistributedDataParallel):
            wrappers.append("DistributedDataParallel")
            model = model.module
        elif type(model).__name__ == "OptimizedModule" and isinstance(getattr(model, "_orig_mod", None), nn.Module):
            wrappers.append("torch.compile")
            model = model._orig_mod
        else:
            return model, wrappers


def _world(wrappers: list[str]) -> tuple[int, int]:
    """(rank, world size) of a DistributedDataParallel model's process group, else (0, 1)."""
    if "DistributedDataParallel" in wrappers and torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


# -- finding the residual additions ---------------------------------------------------------------------

def _first_examples(value: Any, size: int, n: int) -> Any:
    """``value`` (tensors in tuples, lists, mappings) with every tensor whose first dimension is ``size`` cut to
    its first ``n`` rows."""
    if isinstance(value, torch.Tensor):
        return value[:n] if value.ndim and value.shape[0] == size else value
    if isinstance(value, tuple):
        items = [_first_examples(v, size, n) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_first_examples(v, size, n) for v in value]
    if isinstance(value, Mapping):
        return {k: _first_examples(v, size, n) for k, v in value.items()}
    return value


def discover(module: nn.Module, args: tuple, kwargs: dict, blocks: str = "") -> list[ResidualAdd]:
    """The residual additions of ``module(*args, **kwargs)``, found by one probe forward on the first
    :data:`PROBE_EXAMPLES` examples of the batch (every tensor whose first dimension is the batch's), or on the
    whole batch where that fails. Leaves the module's buffers and torch's RNG as they were. Raises
    :class:`WatchError` (one line) when no addition is residual, and what the forward raises."""
    first = next(leaves((args, kwargs)), None)
    size = int(first.shape[0]) if first is not None and first.ndim else 0
    attempts = [(args, kwargs)]
    if size > PROBE_EXAMPLES:
        attempts.insert(0, (_first_examples(args, size, PROBE_EXAMPLES), _first_examples(kwargs, size, PROBE_EXAMPLES)))
    saved = [b.detach().clone() for b in module.buffers()]
    devices = sorted({p.device.index or 0 for p in module.parameters() if p.device.type == "cuda"})
    try:
        for number, (a, k) in enumerate(attempts, 1):
            try:
                with torch.random.fork_rng(devices=devices), torch.enable_grad():
                    found = find_residual_adds(module, tuple(leaves((a, k))), blocks=blocks,
                                               call=lambda m, _: m(*a, **k))
                return found.adds
            except NoResidualError as exc:
                detail = getattr(exc, "detail", str(exc))
                raise WatchError(f"watch found no residual addition in {type(module).__name__}: {detail}; name the "
                                 "blocks with a glob over module paths: watch(model, path, blocks='layer*.*')") from None
            except Exception:
                if number == len(attempts):
                    raise
    finally:
        with torch.no_grad():
            for buffer, value in zip(module.buffers(), saved):
                buffer.copy_(value)
    raise AssertionError("unreachable")


class _Interceptor(Interceptor):
    """The block interceptor, also inside a forward recomputed during backward (activation checkpointing): there
    each module's call numbers count from the start of that backward, so the recomputed blocks are found again."""

    def __init__(self, model: nn.Module, adds: list[ResidualAdd], plain: bool = False) -> None:
        super().__init__(model, adds, plain)
        self._task = None
        self._backward_numbers: dict[nn.Module, int] = {}

    def _pre(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        task = torch._C._current_graph_task_id()
        if task == -1:
            return super()._pre(module, args, kwargs)
        if task != self._task:
            self._task, self._backward_numbers = task, {}
        numbers, self.numbers = self.numbers, self._backward_numbers
        try:
            super()._pre(module, args, kwargs)
        finally:
            self.numbers = numbers


class _Found:
    """The additions of one module (found once, by the first training forward or an example input) and its
    interceptor; a plain twin keeps one for its lifetime (its interceptor stays acquired)."""

    def __init__(self, module: nn.Module, blocks: str, plain: bool) -> None:
        self.module, self.blocks, self.plain = module, blocks, plain
        self.adds: list[ResidualAdd] | None = None
        self.interceptor: _Interceptor | None = None

    finding = False  # the probe forward is running (the root pre-hooks of that nested forward stand aside)

    def find(self, args: tuple, kwargs: dict) -> None:
        self.finding = True
        try:
            self.adds = discover(self.module, args, kwargs, self.blocks)
        finally:
            self.finding = False
        self.interceptor = _Interceptor(self.module, self.adds, plain=self.plain)
        if self.plain:
            self.interceptor.acquire()

    def enter_forward(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        """Called from a root pre-hook that acquired the interceptor during this very forward: its own root
        hooks were added too late to run for it, so they are run here."""
        self.interceptor._start(module, args)
        if module in self.interceptor.owners or module in self.interceptor.watched:
            self.interceptor._pre(module, args, kwargs)


# -- the plain twin -------------------------------------------------------------------------------------

def plain_twin(model: nn.Module, example_input: Any = None, *, blocks: str = "") -> nn.Module:
    """A copy of ``model`` (``copy.deepcopy``: the same weights, buffers and structure; ``model`` is untouched)
    whose every residual addition h = shortcut(x) + F(x) returns F(x) alone, as ``--model``'s twin: train it in
    the same loop and record it with :func:`watch`.

    The additions are found as :func:`watch` finds them: at the twin's first forward (a probe forward on two of
    its examples), or at once from ``example_input`` (a tensor, or a tuple of positional arguments). The twin's
    interceptor stays installed for its lifetime. ``blocks``: a glob over module paths naming the blocks. Raises
    :class:`WatchError` for a wrapped model (make the twin of the bare module, then wrap it) and, at the first
    forward, when no addition is residual."""
    inner, wrappers = unwrap(model)
    if wrappers:
        raise WatchError(f"plain_twin needs the bare module, not {wrappers[0]}(...): make the twin first, then "
                         f"wrap it (e.g. {wrappers[0]}(plain_twin(model)))")
    if getattr(inner, _TWIN, None) is not None:
        raise WatchError("this model is a plain twin already")
    watched = _WATCHES.get(inner)
    ours = watched._handle_ids() if watched is not None else set()
    # hooks of a watch on the original are not copied onto the twin (nor, through them, the watch itself)
    memo: dict[int, Any] = {}
    for m in inner.modules():
        for hooks in (m._forward_pre_hooks, m._forward_hooks):
            memo.update({id(hook): None for hook_id, hook in hooks.items() if hook_id in ours})
    twin = copy.deepcopy(inner, memo)
    for m in twin.modules():
        for hooks in (m._forward_pre_hooks, m._forward_hooks, m._forward_pre_hooks_with_kwargs,
                      m._forward_hooks_with_kwargs, m._forward_hooks_always_called):
            for hook_id in [i for i in hooks if i in ours]:
                del hooks[hook_id]
    found = _Found(twin, blocks, plain=True)
    object.__setattr__(twin, _TWIN, found)
    if example_input is not None:
        found.find(*_as_call(example_input))
    else:
        handle = None

        def first_forward(module: nn.Module, args: tuple, kwargs: dict | None = None) -> None:
            if found.finding or found.adds is not None:
                return
            handle.remove()
            found.find(args, kwargs)
            found.enter_forward(module, args, kwargs)

        handle = twin.register_forward_pre_hook(first_forward, with_kwargs=True)
    return twin


def _as_call(example_input: Any) -> tuple[tuple, dict]:
    """(args, kwargs) of ``example_input``: a tensor, a tuple of positional arguments, or a dict of keywords."""
    if isinstance(example_input, tuple):
        return example_input, {}
    if isinstance(example_input, Mapping):
        return (), dict(example_input)
    return (example_input,), {}


# -- watch ----------------------------------------------------------------------------------------------

def watch(model: nn.Module, path: str | Path, every: int = 50, *, blocks: str = "", example_input: Any = None,
          norm_dtype: torch.dtype = torch.float32, update_ratio: bool = False) -> "Watch":
    """Record ``model``'s residual blocks at steps 0, ``every``, 2 ``every`` ... of the user's own loop into the
    trace ``path`` (``.npz``, written as it goes; :class:`Watch`). A context manager; ``rec.step(optimizer,
    scaler=None, loss=None)`` once per optimiser step. A second watch of the same model closes the first.

    ``model``: an ``nn.Module``, possibly inside ``DataParallel``, ``DistributedDataParallel`` or ``torch.compile``
    (FSDP is refused). ``blocks``: a glob over module paths naming the blocks where the automatic rule cannot see
    them (``layer*.*``). ``example_input``: find the blocks now from this input instead of the first training
    forward. ``norm_dtype``: the dtype norms are computed in (float64 for gradients below ~1e-19, whose float32
    squares flush to 0). ``update_ratio=True``: also record ||w_(k+1) - w_k|| / ||w_k|| per block (the update
    size, the "update / weight ratio" of CS231n's notes, ~1e-3 in a healthy run), which copies the blocks' weights
    at each record and compares them after that step's optimiser step (memory: one copy of them, kept from the first
    record to ``close``; time: about 0.1 of a ResNet-18 CPU step per record, benchmarks/bench_watch.py). Off by
    default: no scene draws it (``render.py inspect`` prints it), and an exact update needs that copy; off,
    ``update_ratio`` is NaN. Raises :class:`WatchError` (one line) for a model or argument it cannot record."""
    return Watch(model, path, every, blocks=blocks, example_input=example_input, norm_dtype=norm_dtype,
                 update_ratio=update_ratio)


class Watch:
    """One watched run: hooks around recorded steps, the statistics, the trace being written. See :func:`watch`.

    The trace (:class:`simulation.trace.Trace`; T records, B blocks, G parameter groups, S steps), per record:
    ``step`` int64 [T]; ``loss`` float32 [T] (as passed to :meth:`step`, mean over ranks; NaN if none);
    ``micro_batches`` int64 [T] (training forwards of the step); ``lr`` float64 [T, G]; ``scale`` float32 [T] (the
    GradScaler's, NaN without one); ``skipped`` int64 [T] (1: non-finite gradients, a scaler skips the step);
    ``total_grad_norm``, ``total_grad_norm_before_clip`` float64 [T] (every parameter's gradient); per block
    [T, B] the keys of :class:`simulation.kinds.user_model.UserRecorder` (``act_mean``, ``act_std``, ``act_norm``,
    ``input_norm``, ``branch_norm``, ``branch_std``, ``shortcut_norm``, ``grad_norm``, ``out_grad_norm``,
    ``in_grad_norm``, ``nonfinite``, ``nonfinite_act``, ``nonfinite_grad``) plus ``grad_norm_before_clip`` and
    ``update_ratio`` (||w_(k+1) - w_k|| / ||w_k|| over the block's weight matrices: the update the recorded step's
    own optimiser step makes, read in a global optimiser post-hook, or at the next ``rec.step`` / ``close`` where
    that step is skipped or not a ``torch.optim.Optimizer``'s: 0 for a step a GradScaler skipped). Per step [S]: ``loss_curve``, ``lr_curve`` (group 0), ``scale_curve``.
    ``meta.layers``: the blocks' names (the user's module paths); ``meta.watch``: see docs/how-to/watch.md.
    """

    def __init__(self, model: nn.Module, path: str | Path, every: int = 50, *, blocks: str = "",
                 example_input: Any = None, norm_dtype: torch.dtype = torch.float32, update_ratio: bool = False) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise WatchError(f"every must be a whole number of steps >= 1; got {every!r}")
        if norm_dtype not in (torch.float32, torch.float64):
            raise WatchError(f"norm_dtype must be torch.float32 or torch.float64; got {norm_dtype}")
        self.module, self.wrappers = unwrap(model)
        previous = _WATCHES.get(self.module)
        if previous is not None:
            previous._quiet = True  # replaced, not ended by its user: no warning if it recorded nothing
            previous.close()
        self.path, self.every, self.norm_dtype, self.update_ratio = Path(path), every, norm_dtype, update_ratio
        self.rank, self.world = _world(self.wrappers)
        self.step_index = 0
        self.closed = False
        self._warned_no_grad = False  # warned once that rec.step came after zero_grad (or before backward)
        self._warned_unseen = False  # warned once that a recorded step's forwards passed none of the blocks
        self._warned_no_forward = False  # warned once that rec.step came with no training forward of the module
        self._warned_twice = False  # warned once that a second backward went through a recorded forward
        self.armed = False
        self._handles: list[Any] = []  # our hooks on the model while armed
        self._discover_handle = None
        self._stance = None  # torch.compile's stance to restore after a recorded step
        self._probing = False
        self._live = False
        self._clear_step()
        self._curve_start = 0
        # loss, lr and scale of each step since the last record, in chunks of _CHUNK steps (memory grows with the
        # steps between records, never with every): on the host, and on the device where they are tensors
        self._host_chunks: list[np.ndarray] = []
        self._device_chunks: list[torch.Tensor] = []
        self._snapshot: list[torch.Tensor] | None = None  # w_k of a record waiting for its update (buffers kept)
        self._pending: _Pending | None = None  # a record taken, waiting for its step's optimiser step
        self._step_hook = None  # the global optimiser post-hook while a record waits
        self._warned_zeroed = False
        self._progress_due = time.monotonic() + PROGRESS_SECONDS  # when the metadata next says the steps taken
        self._accumulation: int | None = None  # micro-batches of the first recorded step
        self._dtype: str | None = None  # dtype of the blocks' outputs h in the first recorded step
        self._param_groups: int | None = None
        self._scaler_state: dict | None = None
        twin = getattr(self.module, _TWIN, None)
        self.found = twin if twin is not None else _Found(self.module, blocks, plain=False)
        if example_input is not None and self.found.adds is None:
            self.found.find(*_as_call(example_input))
        if self.found.adds is not None:
            self._prepare()
        self.writer = TraceWriter(self.path, self._meta()) if self.rank == 0 else None
        _WATCHES[self.module] = self
        self._arm()

    # -- context manager -----------------------------------------------------------------------------
    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: object) -> None:
        if exc and exc[0] is not None:
            self._quiet = True  # the exception says what went wrong
        self.close()

    # -- what was found --------------------------------------------------------------------------------
    @property
    def names(self) -> list[str] | None:
        """The blocks' names (the user's module paths), or None before the first training forward."""
        return None if self.found.adds is None else [a.name for a in self.found.adds]

    def _prepare(self) -> None:
        """Per-block tables, once the additions are known."""
        adds = self.found.adds
        self.blocks = len(adds)
        self.identity = [a.shortcut == "identity" for a in adds]
        params = dict(self.module.named_parameters(remove_duplicate=True))
        self.params = list(params.values())
        index = {id(p): i for i, p in enumerate(self.params)}
        weights = list(dict.fromkeys(name for a in adds for name in a.weights))
        self.weights = [params[name] for name in weights]  # the blocks' weight matrices, each once
        position = {name: i for i, name in enumerate(weights)}
        # (index in self.params, index in self.weights, block) for every weight matrix of every block
        self.weight_map = [(index[id(params[name])], position[name], b) for b, a in enumerate(adds) for name in a.weights]
        self.device = self.params[0].device if self.params else torch.device("cpu")
        self._grad_index: dict[tuple, tuple] = {}  # _grad_sums' index tensors for one set of parameters with gradients
        self._update_index = (torch.tensor([w for _, w, _ in self.weight_map], device=self.device),
                              torch.tensor([b for _, _, b in self.weight_map], device=self.device))

    # -- hooks ------------------------------------------------------------------------------------------
    def _handle_ids(self) -> set[int]:
        ids = {h.id for h in self._handles}
        if self._discover_handle is not None:
            ids.add(self._discover_handle.id)
        if self.found.interceptor is not None and not self.found.plain:
            ids |= {h.id for h in self.found.interceptor.handles}
        return ids

    def _arm(self) -> None:
        """Hooks for the next step, which is recorded: the interceptor and one root pre-hook."""
        if self.armed or self.closed:
            return
        self.armed = True
        self._clear_step()
        if "torch.compile" in self.wrappers:  # a recorded step runs eagerly; the compiled graphs never see a hook
            self._stance = torch._dynamo.eval_frame._stance
            torch.compiler.set_stance("force_eager")
        if self.found.adds is None:
            self._discover_handle = self.module.register_forward_pre_hook(self._first_forward, with_kwargs=True)
            return
        self._attach()

    def _attach(self) -> None:
        interceptor = self.found.interceptor
        interceptor.on_operands, interceptor.on_output = self._on_operands, self._on_output
        interceptor.acquire()
        self._handles.append(self.module.register_forward_pre_hook(self._on_forward))

    def _disarm(self) -> None:
        if not self.armed:
            return
        self.armed = False
        if self._stance is not None:
            stance, self._stance = self._stance, None
            torch.compiler.set_stance(stance.stance, skip_guard_eval_unsafe=stance.skip_guard_eval_unsafe,
                                      force_backend=stance.backend)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        interceptor = self.found.interceptor
        if interceptor is not None and interceptor.on_operands is not None:
            interceptor.on_operands = interceptor.on_output = None
            interceptor.release()

    def _first_forward(self, module: nn.Module, args: tuple, kwargs: dict | None = None) -> None:
        """Root pre-hook until the additions are found: the first training forward finds them (a probe forward
        of its own on two of its examples) and is then recorded like any other. Inside a probe forward (ours, or a
        plain twin's finding its additions) it stands aside. (``kwargs`` may be missing: torch calls a hook
        without them when its handle was removed during the forward that is calling it.)"""
        if (self._probing or self.found.finding or self._discover_handle is None
                or not self._is_training_forward(module)):
            return
        kwargs = kwargs or {}
        self._discover_handle.remove()
        self._discover_handle = None
        if self.found.adds is None:
            self._probing = True
            try:
                self.found.find(args, kwargs)
            finally:
                self._probing = False
        self._prepare()
        if self.writer is not None:
            self.writer.set_meta(self._meta())
        self._attach()
        if not self.found.plain:
            self.found.enter_forward(module, args, kwargs)
        self._on_forward(module, args)

    @staticmethod
    def _is_training_forward(module: nn.Module) -> bool:
        return torch.is_grad_enabled() and module.training and torch._C._current_graph_task_id() == -1

    def _on_forward(self, module: nn.Module, args: tuple) -> None:
        """Root pre-hook of a recorded step: an eval / no_grad forward records nothing."""
        self._live = self._is_training_forward(module)
        self._last = None
        if self._live:
            self._forwards += 1
            self._hooked_h.clear()
            self._hooked_x.clear()

    # -- statistics during forward and backward ------------------------------------------------------
    def _clear_step(self) -> None:
        self._parts: list[torch.Tensor] = []  # float64 sums on the device ...
        self._slots: list[int] = []  # ... and where each entry goes: block * _SUMS + statistic
        self._counts = np.zeros((0, _COUNTS))
        self._forwards = 0
        self._before: tuple[torch.Tensor, torch.Tensor] | None = None
        self._hooked_h: set[int] = set()
        self._hooked_x: set[int] = set()
        self._last: tuple | None = None  # the latest block output h: (tensor, version, its gradient targets, norms)
        self._step_dtype: str | None = None

    def _add(self, index: int, first: int, values: torch.Tensor) -> None:
        self._parts.append(values)
        base = index * _SUMS + first
        self._slots.extend(range(base, base + len(values)))

    def _count(self, index: int, which: int, n: int) -> None:
        if not len(self._counts):
            self._counts = np.zeros((self.blocks, _COUNTS))
        self._counts[index, which] += n

    def _rows(self, t: torch.Tensor) -> torch.Tensor:
        """Each example's L2 norm, float64 [batch]."""
        b = t.shape[0] if t.ndim else 1
        return torch.linalg.vector_norm(t.reshape(b, -1), dim=1, dtype=self.norm_dtype).to(torch.float64)

    def _on_operands(self, index: int, x: torch.Tensor | None, branch: torch.Tensor,
                     shortcut: torch.Tensor | None) -> None:
        recomputed = torch._C._current_graph_task_id() != -1
        if not recomputed and not self._live:
            return
        last = self._last if not recomputed else None
        # x is the previous block's h, unchanged (a chain of blocks): its norms and its gradient hook serve both
        shared = x is not None and last is not None and last[0] is x and last[1] == x._version
        if not recomputed:
            with torch.no_grad():
                if x is not None:
                    rows = last[3] if shared else self._rows(x.detach())
                    self._add(index, _IN_NORM, rows.sum().reshape(1))
                    self._count(index, _C_X_EX, len(rows))
                f = branch.detach()
                rows = self._rows(f)
                self._add(index, _F_NORM, torch.stack([rows.sum(), self._sum(f), rows.square().sum()]))
                self._count(index, _C_F_EX, len(rows))
                self._count(index, _C_F_N, f.numel())
                if shortcut is not None and not self.identity[index]:
                    rows = self._rows(shortcut.detach())
                    self._add(index, _S_NORM, rows.sum().reshape(1))
                    self._count(index, _C_S_EX, len(rows))
        # dL/dx: on the first forward's x; in a recomputed forward only where that x had no gradient (reentrant
        # checkpointing runs the first forward under no_grad), so that no gradient is counted twice
        if x is not None and x.requires_grad and (not recomputed or index not in self._hooked_x):
            if not recomputed:
                self._hooked_x.add(index)
            if shared and last[2] is not None:
                last[2].append((index, _IN_G))
            else:
                x.register_hook(functools.partial(self._on_grad, [(index, _IN_G)], [0]))

    def _on_output(self, index: int, h: torch.Tensor) -> None:
        recomputed = torch._C._current_graph_task_id() != -1
        if not recomputed and not self._live:
            return
        rows = None
        if not recomputed:
            with torch.no_grad():
                t = h.detach()
                if self._step_dtype is None:
                    self._step_dtype = str(t.dtype).removeprefix("torch.")
                rows = self._rows(t)
                self._add(index, _ACT_NORM, torch.stack([rows.sum(), self._sum(t), rows.square().sum(),
                                                         _nonfinite(t)]))
                self._count(index, _C_H_EX, len(rows))
                self._count(index, _C_H_N, t.numel())
        targets = None
        if h.requires_grad and (not recomputed or index not in self._hooked_h):
            if not recomputed:
                self._hooked_h.add(index)
            targets = [(index, _OUT_G)]
            h.register_hook(functools.partial(self._on_grad, targets, [0]))
        if not recomputed:
            self._last = (h, h._version, targets, rows)

    def _on_grad(self, targets: list[tuple[int, int]], fired: list[int], grad: torch.Tensor) -> None:
        """A gradient hook: ||grad||^2 (and its non-finite entries, for a dL/dh) to each (block, statistic).
        ``fired``: how often this tensor's hook ran; twice means a second backward through the same graph."""
        fired[0] += 1
        if fired[0] == 2 and not self._warned_twice:
            self._warned_twice = True
            warnings.warn("watch: a second backward through the same forward (torch.autograd.grad beside .backward(), "
                          "a gradient penalty, retain_graph=True) adds its gradients to this step's ||dL/dh||; take "
                          "such gradients on a step that is not recorded, or from a copy of the model", stacklevel=2)
        g = grad.detach()
        square = torch.linalg.vector_norm(g, dtype=self.norm_dtype).to(torch.float64).square().reshape(1)
        bad = None
        for index, which in targets:
            self._add(index, which, square)
            if which == _OUT_G:
                if bad is None:
                    bad = _nonfinite(g).reshape(1)
                self._add(index, _G_BAD, bad)
                self._count(index, _C_OUT, 1)
            else:
                self._count(index, _C_IN, 1)

    def _sum(self, t: torch.Tensor) -> torch.Tensor:
        """The sum of all entries, accumulated in ``norm_dtype``, as float64."""
        return t.sum(dtype=self.norm_dtype).to(torch.float64)

    # -- weights ----------------------------------------------------------------------------------------
    def _grad_sums(self, unscale: torch.Tensor | None = None) -> torch.Tensor:
        """[B + 1] float64 on the device: each block's sum of squared weight-gradient norms, then every
        parameter's; NaN where a block has no gradient."""
        present = [i for i, p in enumerate(self.params) if p.grad is not None]
        out = torch.zeros(self.blocks + 1, dtype=torch.float64, device=self.device)
        if not present:
            return out.fill_(math.nan)
        norms = torch._foreach_norm([self.params[i].grad for i in present], 2, dtype=self.norm_dtype)
        squares = _float64(norms, self.device).square()
        key = tuple(present)
        if key not in self._grad_index:  # (the same parameters have gradients every step, as a rule)
            where = {p: j for j, p in enumerate(present)}
            src = [where[p] for p, _, _ in self.weight_map if p in where]
            dst = [b for p, _, b in self.weight_map if p in where]
            self._grad_index = {key: (torch.tensor(src, device=self.device), torch.tensor(dst, device=self.device),
                                      sorted(set(range(self.blocks)) - set(dst)))}
        src, dst, missing = self._grad_index[key]
        if len(src):
            out.index_add_(0, dst, squares[src])
        if missing:
            out[missing] = math.nan
        out[-1] = squares.sum()
        return out

    def _take_snapshot(self) -> None:
        """w_k of the blocks' weights, copied (one ``_foreach_copy_``) into buffers allocated at the first record and
        kept: a fresh copy of a large model every record would page-fault its way into new memory."""
        with torch.no_grad():
            if self._snapshot is None:
                self._snapshot = [torch.empty_like(w) for w in self.weights]
            torch._foreach_copy_(self._snapshot, [w.detach() for w in self.weights])

    def _update_sums(self) -> torch.Tensor:
        """[2 B] float64: each block's ||w_(k+1) - w_k||^2 and ||w_k||^2 against the snapshot taken at the record
        (the snapshot becomes w_k - w_(k+1): it is overwritten at the next record anyway)."""
        with torch.no_grad():
            size = torch._foreach_norm(self._snapshot, 2, dtype=self.norm_dtype)
            torch._foreach_sub_(self._snapshot, [w.detach() for w in self.weights])
            diff = torch._foreach_norm(self._snapshot, 2, dtype=self.norm_dtype)
        both = _float64(diff + size, self.device).square()
        out = torch.zeros(2 * self.blocks, dtype=torch.float64, device=self.device)
        w, b = self._update_index
        out[: self.blocks].index_add_(0, b, both[w])
        out[self.blocks:].index_add_(0, b, both[len(self.weights) + w])
        return out

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """Global optimiser post-hook while a record waits for its update: once every block weight's optimiser has
        stepped, the update is measured and the record written (one host copy)."""
        pending = self._pending
        if pending is None:
            return
        held = {id(p) for group in getattr(optimizer, "param_groups", ()) for p in group["params"]}
        pending.stepped.update(i for i, w in enumerate(self.weights) if id(w) in held)
        if len(pending.stepped) == len(self.weights):
            self._finish()

    def before_clip(self) -> None:
        """Read the weight gradients before ``clip_grad_norm_`` (call it just before): the trace's
        ``grad_norm_before_clip`` and ``total_grad_norm_before_clip``; ``rec.step`` after the clip reads what the
        optimiser uses. Does nothing on a step that is not recorded."""
        if self.armed and self.found.adds is not None and not self.closed:
            self._before = (self._grad_sums(), None)

    # -- one step ---------------------------------------------------------------------------------------
    def step(self, optimizer: torch.optim.Optimizer | None = None, scaler: Any = None,
             loss: torch.Tensor | float | None = None) -> None:
        """Call once per optimiser step: after the step's last ``backward`` (and after ``scaler.unscale_`` and
        gradient clipping, if any), before ``optimizer.step()``. On a recorded step it reads the gradients,
        writes the record and removes the hooks; the step before a recorded one adds them. ``optimizer``: for the
        learning rates and the scaler's state; ``scaler``: a ``torch.amp.GradScaler`` (gradients are read
        unscaled whether or not ``unscale_`` ran; its scale is recorded); ``loss``: the step's loss (a tensor
        stays on its device until the next record)."""
        if self.closed:
            raise WatchError("rec.step() after the watch was closed")
        if self._pending is not None:  # the last record's optimiser step did not run (or ran unseen): w_(k+1) is now
            self._finish()
        k = self.step_index
        if self.found.adds is None and not self._warned_no_forward:  # (a host-side check: no device sync)
            self._warned_no_forward = True
            warnings.warn(f"rec.step() at step {k}: {type(self.module).__name__}'s forward has not run in training "
                          "since watch began, so no block is known and nothing is recorded: watch the module your "
                          "loop calls (Lightning: WatchCallback(path, module=\"net\") when training_step calls "
                          "self.net(x)); docs/how-to/watch.md", stacklevel=2)
        self._curve_point(k - self._curve_start, optimizer, scaler, loss)
        if self.armed and k % self.every == 0 and self.found.adds is not None:
            self._disarm()
            if self.params and all(p.grad is None for p in self.params) and not self._warned_no_grad:
                self._warned_no_grad = True  # (a host-side check: no device sync)
                warnings.warn(f"rec.step() at step {k} found no gradient in any parameter (.grad is None): call it "
                              "after the step's backward and before optimizer.step() / zero_grad() "
                              "(docs/how-to/watch.md); the weight-gradient norms of this record are NaN", stacklevel=2)
            self._record(k, optimizer, scaler, loss)
        self.step_index = k + 1
        if self.writer is not None and self.found.adds is not None and time.monotonic() >= self._progress_due:
            self._progress_due = time.monotonic() + PROGRESS_SECONDS
            if self.world == 1 and self._pending is None:  # ranks would each decide by their own clock: not in DDP
                self._flush_curve()
            self.writer.set_meta(self._meta())
        if self.step_index % self.every == 0:
            self._arm()

    def _curve_point(self, i: int, optimizer: Any, scaler: Any, loss: Any) -> None:
        """The loss, learning rate and loss scale of step ``curve_start + i``, without a device sync."""
        chunk, row = divmod(i, _CHUNK)
        while len(self._host_chunks) <= chunk:
            self._host_chunks.append(np.full((_CHUNK, 3), np.nan))
        if optimizer is not None and optimizer.param_groups:
            lr = optimizer.param_groups[0].get("lr")
            if isinstance(lr, (int, float)):
                self._host_chunks[chunk][row, 1] = lr
        for column, value in ((0, loss), (2, _scale_of(scaler))):
            if isinstance(value, torch.Tensor):
                while len(self._device_chunks) <= chunk:
                    self._device_chunks.append(torch.full((_CHUNK, 3), math.nan, dtype=torch.float64,
                                                          device=value.device))
                self._device_chunks[chunk][row, column].copy_(value.detach().reshape(()), non_blocking=True)
            elif isinstance(value, (int, float)):
                self._host_chunks[chunk][row, column] = value

    def _curves(self, n: int) -> tuple[np.ndarray, torch.Tensor | None]:
        """The first ``n`` steps' (loss, lr, scale) since the last record: [n, 3] on the host, [n, 3] on the device
        (None where no value was a tensor); the buffers are emptied."""
        host = np.concatenate(self._host_chunks)[:n] if self._host_chunks else np.full((n, 3), np.nan)
        if len(host) < n:
            host = np.concatenate([host, np.full((n - len(host), 3), np.nan)])
        device = None
        if self._device_chunks:
            device = torch.cat(self._device_chunks)[:n]
            if len(device) < n:
                device = torch.cat([device, torch.full((n - len(device), 3), math.nan, dtype=torch.float64,
                                                       device=device.device)])
        self._host_chunks, self._device_chunks = [], []
        return host, device

    def _record(self, k: int, optimizer: Any, scaler: Any, loss: Any) -> None:
        """Statistics of the recorded step ``k``: one float64 vector on the device, completed by its update after
        the step's optimiser step (:meth:`_finish`: all-reduced across ranks, copied to the host once)."""
        B = self.blocks
        sums = torch.zeros(B * _SUMS, dtype=torch.float64, device=self.device)
        if self._parts:
            values = (torch.cat(self._parts) if all(p.device == self.device for p in self._parts)
                      else torch.cat([p.to(self.device) for p in self._parts]))
            sums.index_add_(0, torch.tensor(self._slots, device=self.device), values)
        counts = self._counts if len(self._counts) else np.zeros((B, _COUNTS))
        host = np.concatenate([counts.ravel(), [self._forwards]])
        grads = self._grad_sums()
        before = self._before[0] if self._before is not None else torch.full_like(grads, math.nan)
        scale = _scale_of(scaler)
        unscaled = _unscaled(scaler, optimizer)
        found_inf = _found_inf(scaler, optimizer)
        extra = torch.stack([
            torch.as_tensor(scale if scale is not None else math.nan, dtype=torch.float64).to(self.device).reshape(()),
            torch.as_tensor(found_inf if found_inf is not None else math.nan, dtype=torch.float64).to(self.device).reshape(()),
        ])
        n = k - self._curve_start + 1
        host_curve, device_curve = self._curves(n)
        curve = (device_curve.reshape(-1).to(self.device) if device_curve is not None
                 else torch.full((n * 3,), math.nan, dtype=torch.float64, device=self.device))
        enabled = scaler is not None and getattr(scaler, "is_enabled", lambda: False)()
        # non-finite weight-gradient entries: counted now under a GradScaler (its skipped steps are where they occur,
        # and their records complete a step later), else after the copy, only for blocks whose norm is not finite
        eager = self._weight_nonfinite_now() if enabled else torch.full((B,), math.nan, dtype=torch.float64,
                                                                         device=self.device)
        flat = torch.cat([sums, torch.as_tensor(host, dtype=torch.float64).to(self.device), grads, before, extra,
                          curve, eager])
        pending = _Pending(
            k, flat, n, host_curve, unscaled, self._step_dtype, has_scaler=scaler is not None,
            lrs=[float(g.get("lr", math.nan)) for g in optimizer.param_groups] if optimizer is not None else None,
            scaler_state={key: getattr(scaler, f"_{key}", None) for key in
                          ("init_scale", "growth_factor", "backoff_factor", "growth_interval")} if enabled else None,
            grads=None if enabled else [(p.grad, p.grad._version) if p.grad is not None else None
                                        for p in self.params])
        self._clear_step()
        self._curve_start = k + 1
        self._pending = pending
        if self.update_ratio and self.weights:
            # the update of this very step: w_k now, w_(k+1) after its optimiser step (a post-hook) or, where that
            # step is skipped or unseen, at the next rec.step / close
            self._take_snapshot()
            self._step_hook = register_optimizer_step_post_hook(self._after_optimizer_step)
        else:
            self._finish()

    def _finish(self) -> None:
        """Complete the waiting record: its update (NaN without ``update_ratio``), all-reduced across ranks, the one
        copy to the host, the trace part."""
        pending, self._pending = self._pending, None
        if self._step_hook is not None:
            self._step_hook.remove()
            self._step_hook = None
        if self.update_ratio and self.weights:
            updates = self._update_sums()
        else:
            updates = torch.full((2 * self.blocks,), math.nan, dtype=torch.float64, device=self.device)
        flat = torch.cat([pending.flat, updates])
        if self.world > 1:
            torch.distributed.all_reduce(flat)
        row = flat.cpu().numpy()  # the one copy to the host
        self._write(pending, row)

    def _write(self, pending: "_Pending", row: np.ndarray) -> None:
        B, W = self.blocks, self.world
        k, n, host_curve, unscaled = pending.step, pending.n, pending.host_curve, pending.unscaled
        at = 0

        def take(size: int) -> np.ndarray:
            nonlocal at
            at += size
            return row[at - size:at]

        sums = take(B * _SUMS).reshape(B, _SUMS)
        counts = take(B * _COUNTS).reshape(B, _COUNTS)
        forwards = take(1)[0]
        if forwards > 0 and not counts[:, _C_H_EX].any() and not self._warned_unseen:
            self._warned_unseen = True
            warnings.warn(f"watch: step {k}'s training forwards ran through none of the {B} residual additions found at "
                          f"the first forward ({self.names[0]} ...), so this record's block statistics are NaN: the "
                          "forward takes another path than it did then (blocks=... names them by module path; "
                          "docs/how-to/watch.md)")
        grads, before = take(B + 1) / W, take(B + 1) / W  # identical on every rank (DDP averaged them)
        scale, found_inf = take(2) / W
        curve = take(n * 3).reshape(n, 3) / W
        eager = take(B) / W
        updates = take(2 * B) / W
        with np.errstate(divide="ignore", invalid="ignore"):
            s = scale if math.isfinite(scale) and scale > 0 else 1.0
            weight_unscale = 1.0 if unscaled or not math.isfinite(scale) else s * s
            grads, before = grads / weight_unscale, before / weight_unscale
            # dL/dh of the mean of the ranks' losses (what DDP's averaged gradients are the gradient of)
            act_unscale = s * s * W * W
            h_ex, h_n, x_ex, f_n, f_ex, s_ex, n_out, n_in = counts.T
            out = {
                "act_norm": sums[:, _ACT_NORM] / h_ex,
                "act_mean": sums[:, _ACT_SUM] / h_n,
                "act_std": np.sqrt(np.maximum(sums[:, _ACT_SQ] - sums[:, _ACT_SUM] ** 2 / h_n, 0) / np.maximum(h_n - 1, 1)),
                "input_norm": sums[:, _IN_NORM] / x_ex,
                "branch_norm": sums[:, _F_NORM] / f_ex,
                "branch_std": np.sqrt(np.maximum(sums[:, _F_SQ] - sums[:, _F_SUM] ** 2 / f_n, 0) / np.maximum(f_n - 1, 1)),
                "shortcut_norm": np.where(self.identity, sums[:, _IN_NORM] / x_ex, sums[:, _S_NORM] / s_ex),
                "out_grad_norm": np.where(n_out > 0, np.sqrt(sums[:, _OUT_G] / act_unscale), np.nan),
                "in_grad_norm": np.where(n_in > 0, np.sqrt(sums[:, _IN_G] / act_unscale), np.nan),
                "grad_norm": np.sqrt(grads[:B]),
                "grad_norm_before_clip": np.sqrt(before[:B]),
                "update_ratio": np.sqrt(updates[:B] / updates[B:]),
            }
            if self.found.plain:
                out["shortcut_norm"] = np.zeros(B)
            nonfinite_act = sums[:, _ACT_BAD]
            nonfinite_grad = sums[:, _G_BAD] + (eager if pending.grads is None
                                                else self._weight_nonfinite(out["grad_norm"], pending.grads))
            curve_loss, curve_lr, curve_scale = curve[:, 0], host_curve[:, 1], curve[:, 2]
            curve_loss = np.where(np.isnan(host_curve[:, 0]), curve_loss, host_curve[:, 0])
            curve_scale = np.where(np.isnan(host_curve[:, 2]), curve_scale, host_curve[:, 2])
        lrs = pending.lrs or []
        record = {key: value[None].astype(np.float64 if key.endswith("grad_norm") or key.endswith("clip")
                                          or key == "update_ratio" else np.float32)
                  for key, value in out.items()}
        record.update({
            "step": np.array([k], np.int64),
            "loss": np.array([curve_loss[-1]], np.float32),
            "micro_batches": np.array([round(forwards / W)], np.int64),
            "lr": np.array([lrs], np.float64),
            "scale": np.array([scale if pending.has_scaler else np.nan], np.float32),
            "skipped": np.array([int(pending.has_scaler and (found_inf > 0 or not math.isfinite(grads[B])))], np.int64),
            "total_grad_norm": np.array([math.sqrt(grads[B]) if grads[B] >= 0 else np.nan]),
            "total_grad_norm_before_clip": np.array([math.sqrt(before[B]) if before[B] >= 0 else np.nan]),
            "nonfinite_act": nonfinite_act[None].astype(np.int64),
            "nonfinite_grad": nonfinite_grad[None].astype(np.int64),
            "nonfinite": (nonfinite_act + nonfinite_grad)[None].astype(np.int64),
            "curve_step": np.arange(k - n + 1, k + 1, dtype=np.int64),
            "loss_curve": curve_loss.astype(np.float32),
            "lr_curve": curve_lr.astype(np.float32),
            "scale_curve": curve_scale.astype(np.float32),
        })
        if self._accumulation is None:
            self._accumulation = int(record["micro_batches"][0])
            self._dtype = pending.dtype
            self._param_groups = len(lrs) if pending.lrs is not None else None
            self._scaler_state = pending.scaler_state
            if self.writer is not None:
                self.writer.set_meta(self._meta())
        if self.writer is not None:
            self.writer.append(record)

    def _flush_curve(self) -> None:
        """The loss, learning rate and scale of the steps since the last record (or flush) as a part of their own:
        at close, and at the progress interval in one process, so that a run killed between records keeps its
        curve up to the last interval. Under DDP a collective (the mean over ranks): every rank calls it at once."""
        tail = self.step_index - self._curve_start
        if tail <= 0:
            return
        host, device = self._curves(tail)
        curve = device.reshape(-1) if device is not None else torch.full((tail * 3,), math.nan, dtype=torch.float64)
        if self.world > 1:
            curve = curve.to(self.device)
            torch.distributed.all_reduce(curve)
        curve = curve.cpu().numpy().reshape(tail, 3) / self.world
        curve = np.where(np.isnan(host), curve, host)
        if self.writer is not None:
            self.writer.append({"step": np.zeros(0, np.int64),
                                "curve_step": np.arange(self._curve_start, self.step_index, dtype=np.int64),
                                "loss_curve": curve[:, 0].astype(np.float32),
                                "lr_curve": curve[:, 1].astype(np.float32),
                                "scale_curve": curve[:, 2].astype(np.float32)})
        self._curve_start = self.step_index

    def _weight_nonfinite(self, grad_norm: np.ndarray, grads: list) -> np.ndarray:
        """Non-finite entries of each block's weight gradients; counted (a second pass) only for the blocks whose
        norm is not finite, in ``grads``: the (gradient, version) of each parameter when the record was taken (the
        tensors themselves: ``zero_grad()`` sets ``.grad`` to None, and the record may complete a step later)."""
        out = np.zeros(self.blocks)
        for b in np.flatnonzero(~np.isfinite(grad_norm)):
            for p, _, block in self.weight_map:
                if block == b and grads[p] is not None:
                    grad, version = grads[p]
                    if grad._version != version and not self._warned_zeroed:
                        self._warned_zeroed = True
                        warnings.warn("watch: a gradient was changed in place (zero_grad(set_to_none=False)) before "
                                      "the record of its step was complete (its optimiser step was skipped); that "
                                      "record's nonfinite_grad counts what is left", stacklevel=3)
                    out[b] += int(_nonfinite(grad))
        return out

    def _weight_nonfinite_now(self) -> torch.Tensor:
        """[B] float64 on the device: each block's non-finite weight-gradient entries, counted now (under a
        GradScaler, whose skipped steps are where they occur and whose record completes a step later)."""
        out = torch.zeros(self.blocks, dtype=torch.float64, device=self.device)
        for p, _, block in self.weight_map:
            grad = self.params[p].grad
            if grad is not None:
                out[block] += _nonfinite(grad).to(self.device)
        return out

    # -- metadata ---------------------------------------------------------------------------------------
    def _meta(self) -> dict[str, Any]:
        """The trace's metadata as known now (the blocks after the first training forward; dtype, accumulation,
        scaler and parameter groups after the first record)."""
        adds = self.found.adds
        arch = "plain" if self.found.plain else "residual"
        watch = {
            "schema": WATCH_SCHEMA, "complete": False, "every": self.every, "world_size": self.world,
            "accumulation": self._accumulation, "dtype": self._dtype,
            "param_dtype": str(self.params[0].dtype).removeprefix("torch.") if adds is not None and self.params else None,
            "norm_dtype": str(self.norm_dtype).removeprefix("torch."), "scaler": self._scaler_state,
            "model": type(self.module).__name__, "wrappers": self.wrappers, "arch": arch,
            "param_groups": self._param_groups, "steps_recorded": None, "update_ratio": self.update_ratio,
        }
        return {
            "config": {"kind": "watch", "arch": arch, "record_every": self.every, "steps": self.step_index,
                       "model": type(self.module).__name__},
            "versions": {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version()},
            "layers": [a.name for a in adds] if adds is not None else None,
            "blocks": len(adds) if adds is not None else None,
            "shortcuts": [a.shortcut for a in adds] if adds is not None else None,
            "watch": watch,
        }

    # -- the end ----------------------------------------------------------------------------------------
    def close(self) -> Path | None:
        """Remove every hook, write the steps since the last record, consolidate the trace into ``path`` and
        return it (None on ranks other than 0, or when nothing was recorded). Idempotent. Under
        DistributedDataParallel every rank must close (it is a collective: the with block does it)."""
        if self.closed:
            return self.path if self.writer is not None and self.path.exists() else None
        self.closed = True
        if self.step_index == 0 and not getattr(self, "_quiet", False):
            warnings.warn(f"watch({type(self.module).__name__}, {str(self.path)!r}) recorded nothing: rec.step(optimizer) "
                          "was never called (call it once per optimiser step, after backward, before "
                          "optimizer.step(); docs/how-to/watch.md)", stacklevel=2)
        try:
            self._disarm()
            if self._discover_handle is not None:
                self._discover_handle.remove()
                self._discover_handle = None
            if self._pending is not None:  # the last record's update: the weights as they are now
                self._finish()
            self._snapshot = None
            if self.found.adds is not None:
                self._flush_curve()
            if self.writer is not None:
                return self.writer.close(self._meta())
            return None
        finally:
            if self._step_hook is not None:
                self._step_hook.remove()
                self._step_hook = None
            if _WATCHES.get(self.module) is self:
                del _WATCHES[self.module]


@dataclasses.dataclass
class _Pending:
    """A record taken at ``rec.step`` and waiting for its update (its step's optimiser step): what the write needs."""

    step: int
    flat: torch.Tensor  # float64 on the device: sums, counts, gradients, scale, curve, eager non-finite counts
    n: int  # steps of the curve it carries
    host_curve: np.ndarray
    unscaled: bool
    dtype: str | None  # of the blocks' outputs h
    has_scaler: bool
    lrs: list[float] | None  # each parameter group's, at the record
    scaler_state: dict | None
    grads: list | None  # (gradient, version) per parameter for the lazy non-finite count; None: counted eagerly
    stepped: set = dataclasses.field(default_factory=set)  # block weights whose optimiser has stepped since


def _nonfinite(t: torch.Tensor) -> torch.Tensor:
    """The number of non-finite entries of ``t`` (inf, -inf, NaN), a float64 scalar on its device, without a
    device sync: ``t * 0`` is NaN exactly there and +-0 elsewhere (a quarter of ``isfinite``'s time on the CPU,
    where ``isfinite`` is four passes)."""
    return torch.count_nonzero(t * 0).to(torch.float64)


def _float64(tensors: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """Scalars (e.g. ``_foreach_norm``'s) as one float64 vector on ``device``: one stack and one conversion where
    they are all there already (one per scalar only for a model across devices)."""
    if all(t.device == device for t in tensors):
        return torch.stack(tensors).to(torch.float64)
    return torch.stack([t.to(device, torch.float64) for t in tensors])


# -- the GradScaler, read without a device sync ---------------------------------------------------------

def _scale_of(scaler: Any) -> torch.Tensor | None:
    """The scaler's current scale as a tensor on its device (never ``get_scale()``, which syncs), or None."""
    if scaler is None or not getattr(scaler, "is_enabled", lambda: False)():
        return None
    scale = getattr(scaler, "_scale", None)
    return scale if isinstance(scale, torch.Tensor) else None


def _optimizer_state(scaler: Any, optimizer: Any) -> dict | None:
    states = getattr(scaler, "_per_optimizer_states", None)
    return states.get(id(optimizer)) if isinstance(states, dict) and optimizer is not None else None


def _unscaled(scaler: Any, optimizer: Any) -> bool:
    """Whether ``scaler.unscale_(optimizer)`` ran this step (the gradients in ``.grad`` are unscaled already)."""
    state = _optimizer_state(scaler, optimizer)
    return bool(state) and getattr(state.get("stage"), "name", "") == "UNSCALED"


def _found_inf(scaler: Any, optimizer: Any) -> torch.Tensor | None:
    """The scaler's count of devices with non-finite gradients, when ``unscale_`` ran; else None."""
    state = _optimizer_state(scaler, optimizer)
    found = state.get("found_inf_per_device") if state else None
    if not found:
        return None
    return sum(v.to(torch.float64) for v in found.values())
