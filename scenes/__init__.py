"""Manim scenes that turn recorded traces into the lecture; they never import torch."""

from __future__ import annotations

from .chain_rule import ChainRuleProduct
from .highway import IdentityHighway

__all__ = ["SCENES_IN_ORDER", "get_scene"]

# The lecture, in the order the story is told.
SCENES_IN_ORDER = [IdentityHighway, ChainRuleProduct]


def get_scene(name: str):
    """The scene class called ``name``; raises KeyError listing the known names."""
    for scene in SCENES_IN_ORDER:
        if scene.__name__ == name:
            return scene
    raise KeyError(f"unknown scene {name!r}; available: {', '.join(s.__name__ for s in SCENES_IN_ORDER)}")
