"""Manim scenes that turn recorded traces into the lecture; they never import torch."""

from __future__ import annotations

from .add_norm import TransformerAddNorm
from .analogies import Analogies
from .chain_rule import ChainRuleExploding, ChainRuleProduct
from .compare import HighwayDenseNetResidual
from .conveyor_belt import ConveyorBelt
from .degradation import Degradation
from .depth_sweep import DepthSweep
from .gradient_flow import GradientFlowOverTraining
from .does_it_copy import DoesItOnlyCopy
from .highway import IdentityHighway
from .identity_fit import IdentityFit
from .layernorm import PostLNvsPreLN
from .logit_lens import LogitLens
from .nested import NestedFunctionClasses
from .paths import PathEnsemble
from .plus_one import GradientPlusOne
from .rank_collapse import RankCollapse
from .residual_response import ResidualResponse
from .shattered import ShatteredGradients
from .shortcut_scale import ShortcutScale
from .sigmoid import SigmoidDerivative
from .summary import Summary

__all__ = ["SCENES_IN_ORDER", "get_scene"]

# The lecture, in the order the study note tells the story: its pictures, why the shortcut (gradients, why its "+ 1"
# must be exactly 1, "keep as is" is easy, degradation), the Transformer's Add & Norm, its three "why" questions
# (gates or concatenation, only copying, the conveyor belt, the answer it carries up a GPT, and what stacked
# attention does to the tokens without the belt), then the papers' deeper views and the summary.
SCENES_IN_ORDER = [Analogies, IdentityHighway, SigmoidDerivative, ChainRuleProduct, ChainRuleExploding, GradientPlusOne,
                   ShortcutScale, GradientFlowOverTraining, IdentityFit, Degradation, DepthSweep, NestedFunctionClasses,
                   ResidualResponse, TransformerAddNorm, PostLNvsPreLN, HighwayDenseNetResidual, DoesItOnlyCopy,
                   ConveyorBelt, LogitLens, RankCollapse, PathEnsemble, ShatteredGradients, Summary]


def get_scene(name: str):
    """The scene class called ``name``; raises KeyError listing the known names."""
    for scene in SCENES_IN_ORDER:
        if scene.__name__ == name:
            return scene
    raise KeyError(f"unknown scene {name!r}; available: {', '.join(s.__name__ for s in SCENES_IN_ORDER)}")
