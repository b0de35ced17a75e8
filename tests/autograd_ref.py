"""The independent reference the recorder tests compare against: a forward pass that keeps every block output."""

from __future__ import annotations


def manual_forward(model, x):
    """(logits, [h_1 ... h_L]) of a stem -> blocks -> head model (MLP or conv), every block output kept so that
    ``torch.autograd.grad`` can differentiate with respect to it."""
    outputs = []
    h = model.stem(x)
    for block in model.blocks:
        h = block(h)
        outputs.append(h)
    return model.head(h), outputs
