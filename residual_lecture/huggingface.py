"""A Hugging Face ``TrainerCallback`` that records a model's residual blocks with :func:`residual_lecture.watch`.

Example::

    from transformers import Trainer
    from residual_lecture.huggingface import WatchCallback

    Trainer(model=model, args=args, train_dataset=data, callbacks=[WatchCallback("runs/gpt2.npz", every=50)]).train()
    # then: python render.py render DepthTimeMap --trace runs/gpt2.npz

Thin, over :func:`residual_lecture.watch` (docs/how-to/watch.md): the watch starts at ``on_train_begin`` on the Trainer's
model, and ``rec.step`` runs at ``on_pre_optimizer_step`` (transformers >= 4.44): after the step's last micro-batch
(``gradient_accumulation_steps``), after the clip (``max_grad_norm``), right before ``optimizer.step()``. The
``on_step_end`` a callback usually uses comes after ``model.zero_grad()``: the gradients are gone there. With fp16
the gradients are read unscaled whether or not the Trainer unscaled them (it does so to measure the norm even with
``max_grad_norm=0``); the scale and skipped steps are those of accelerate's GradScaler. The loss of a step is the
mean over its micro-batches of the ``loss`` the model returns (a forward hook; NaN when it returns none), or their
sum when the Trainer passed ``num_items_in_batch`` (a model whose forward takes ``**kwargs``, as every transformers
model: each micro-batch's loss is then already divided by the step's item count).

Not recorded as in a hand-written loop: the Trainer clips before any callback hook, so ``grad_norm_before_clip`` is
NaN. One process only: in a distributed run the callback refuses in one line; record such a run with ``watch`` in
your own loop. Imports ``transformers`` when this module is imported, never with ``import residual_lecture``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

__all__ = ["WatchCallback"]


def _loss_of(output: Any):
    """The ``loss`` of a model's output (a ModelOutput, a dict, or a tuple whose first item is the loss), or None."""
    loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    return loss if loss is not None and getattr(loss, "ndim", 1) == 0 else None


class WatchCallback(TrainerCallback):
    """Record the blocks of the ``Trainer``'s model into the trace ``path`` every ``every`` optimiser steps.

    ``watch_kwargs`` go to :func:`residual_lecture.watch` (``blocks=``, ``norm_dtype=`` ...). After ``train()``:
    ``callback.path`` is the trace (complete), ``callback.names`` the blocks' names."""

    def __init__(self, path: str | Path, every: int = 50, **watch_kwargs: Any) -> None:
        self.path, self.every, self.watch_kwargs = Path(path), every, watch_kwargs
        self.rec = None
        self.names: list[str] | None = None
        self._losses: list = []
        self._hook = None

    def on_train_begin(self, args, state, control, model=None, **kwargs) -> None:
        from residual_lecture import WatchError, watch

        if args.world_size > 1:
            raise WatchError(f"WatchCallback records one process; this Trainer runs {args.world_size}: record the "
                             "run with residual_lecture.watch in your own loop")
        self.rec = watch(model, self.path, every=self.every, **self.watch_kwargs)
        self._losses = []

        def keep_loss(module, inputs, kwargs, output) -> None:
            probing = getattr(self.rec, "_probing", False)  # watch's own forward finding the blocks: not a step's
            loss = _loss_of(output) if module.training and not probing else None
            if loss is not None:
                # given num_items_in_batch (a model whose forward takes **kwargs), the loss is already this
                # micro-batch's share of the step's: the step's loss is the sum, not the mean
                self._shares = self._shares or kwargs.get("num_items_in_batch") is not None
                self._losses.append(loss.detach())

        self._shares = False
        self._hook = model.register_forward_hook(keep_loss, with_kwargs=True)

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs) -> None:
        if self.rec is None:
            return
        loss = sum(self._losses[1:], self._losses[0]) if self._losses else None
        if loss is not None and not self._shares:
            loss = loss / len(self._losses)
        self._losses, self._shares = [], False
        inner = getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer wraps the torch one
        self.rec.step(inner, scaler=getattr(optimizer, "scaler", None), loss=loss)

    def _close(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self.rec is not None:
            self.names = self.rec.names
            self.rec.close()
            self.rec = None

    def on_train_end(self, args, state, control, **kwargs) -> None:
        self._close()
