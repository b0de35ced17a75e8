"""The independent reference the recorder tests compare against: forward passes that keep every block's tensors."""

from __future__ import annotations

import torch

from simulation.core.record import Recorder


def manual_forward(model, x):
    """(logits, [h_1 ... h_L]) of a stem -> blocks -> head model (MLP or conv), every block output kept so that
    ``torch.autograd.grad`` can differentiate with respect to it."""
    outputs = []
    h = model.stem(x)
    for block in model.blocks:
        h = block(h)
        outputs.append(h)
    return model.head(h), outputs


def block_parts(model, x):
    """[(h_in, F(h_in), shortcut(h_in) + F(h_in))] for every block of a stem -> blocks model, recomputed without
    grad from the blocks' own ``branch`` and ``shortcut``: what the recorder's activation statistics describe."""
    parts = []
    with torch.no_grad():
        h = model.stem(x)
        for block in model.blocks:
            f = block.branch(h)
            parts.append((h, f, block.shortcut(h) + f))
            h = parts[-1][2]
    return parts


def recorded_row(model, x):
    """The Recorder's row (``Recorder.collect``) for one armed step: ``model(x).sum()`` forward, then backward."""
    with Recorder(model) as rec:
        rec.arm()
        model(x).sum().backward()
        return rec.collect()
