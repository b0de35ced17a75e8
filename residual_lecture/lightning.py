"""A PyTorch Lightning callback that records a LightningModule's residual blocks with :func:`residual_lecture.watch`.

Example::

    from lightning.pytorch import Trainer
    from residual_lecture.lightning import WatchCallback

    Trainer(callbacks=[WatchCallback("runs/resnet.npz", every=50)]).fit(model, loader)
    # then: python render.py render DepthTimeMap --trace runs/resnet.npz

Thin, over :func:`residual_lecture.watch` (docs/how-to/watch.md): the watch starts at ``on_fit_start`` on the LightningModule
(or its submodule ``module``, an attribute path, when ``training_step`` calls that one rather than ``self(x)``), and
``rec.step`` runs at ``on_before_optimizer_step``: once per optimiser step, after every micro-batch of
``accumulate_grad_batches`` and after a GradScaler's ``unscale_`` (precision "16-mixed": the scaler is the precision
plugin's, its scale and skipped steps are recorded). The loss of a step is the sum of the micro-batch losses Lightning
passes to ``on_before_backward`` (each already divided by ``accumulate_grad_batches``: their sum is the step's mean).

Not recorded as in a hand-written loop: Lightning clips gradients (``gradient_clip_val``) *after*
``on_before_optimizer_step``, so the recorded gradients are those before clipping. One process only: under a
multi-process strategy (DDP) the callback refuses in one line; record such a run with ``watch`` in your own loop.
Imports ``lightning`` (``pip install lightning``) when this module is imported, never with ``import residual_lecture``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import Callback

__all__ = ["WatchCallback"]


class WatchCallback(Callback):
    """Record the blocks of the module a ``Trainer`` fits into the trace ``path`` every ``every`` optimiser steps.

    ``module``: an attribute path of the LightningModule (``"model"``, ``"net.backbone"``) whose forward holds the
    blocks, when ``training_step`` calls it directly; default the LightningModule itself. ``watch_kwargs`` go to
    :func:`residual_lecture.watch` (``blocks=``, ``norm_dtype=`` ...). After ``fit``: ``callback.path`` is the trace
    (complete), ``callback.names`` the blocks' names."""

    def __init__(self, path: str | Path, every: int = 50, module: str | None = None, **watch_kwargs: Any) -> None:
        super().__init__()
        self.path, self.every, self.module, self.watch_kwargs = Path(path), every, module, watch_kwargs
        self.rec = None
        self.names: list[str] | None = None
        self._loss = None

    def _target(self, pl_module):
        target = pl_module
        for part in (self.module or "").split(".") if self.module else ():
            target = getattr(target, part, None)
            if target is None:
                from residual_lecture import WatchError

                raise WatchError(f"WatchCallback(module={self.module!r}): {type(pl_module).__name__} has no "
                                 f"submodule {self.module!r}")
        return target

    def on_fit_start(self, trainer, pl_module) -> None:
        from residual_lecture import WatchError, watch

        if trainer.world_size > 1:
            raise WatchError(f"WatchCallback records one process; this Trainer runs {trainer.world_size} "
                             "(strategy " + type(trainer.strategy).__name__ + "): record the run with "
                             "residual_lecture.watch in your own loop")
        self.rec = watch(self._target(pl_module), self.path, every=self.every, **self.watch_kwargs)
        self._loss = None

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        detached = loss.detach()
        self._loss = detached if self._loss is None else self._loss + detached

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if self.rec is None:
            return
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        inner = getattr(optimizer, "optimizer", optimizer)  # Lightning's LightningOptimizer wraps the torch one
        if self.rec.names is None:  # the watched module's forward never ran: training_step calls a submodule
            from residual_lecture import WatchError

            target = self._target(pl_module)
            children = [name for name, child in target.named_children()
                        if any(p.requires_grad for p in child.parameters())]
            error = WatchError(f"WatchCallback: {type(target).__name__}'s forward did not run in training_step, so no "
                               "residual block was found; if training_step calls a submodule (self.net(x)), name it: "
                               f"WatchCallback(path, module={children[0] if children else 'net'!r})"
                               + (f" (its submodules: {', '.join(children)})" if children else ""))
            self.rec.__exit__(WatchError, error, None)  # closed as a with block would: this error says what went wrong
            self.rec = None
            raise error
        self.rec.step(inner, scaler=scaler, loss=self._loss)
        self._loss = None

    def _close(self) -> None:
        if self.rec is not None:
            self.names = self.rec.names
            self.rec.close()
            self.rec = None

    def on_fit_end(self, trainer, pl_module) -> None:
        self._close()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self._close()  # the steps recorded so far stay in the trace
