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
from .hyper_connections import HyperConnections
from .identity_fit import IdentityFit
from .layernorm import PostLNvsPreLN
from .loss_landscape import LossLandscape
from .logit_lens import LogitLens
from .nested import NestedFunctionClasses
from .norm_free import NormFree
from .paths import PathEnsemble
from .plus_one import GradientPlusOne
from .rank_collapse import RankCollapse
from .residual_response import ResidualResponse
from .shattered import ShatteredGradients
from .shortcut_scale import ShortcutScale
from .sigmoid import SigmoidDerivative
from .summary import Summary
from .user_model import MODEL_SCENES as _VARIANT_SCENES, MODEL_VARIANTS
from .depth_time_map import DepthTimeMap

__all__ = ["SCENES_IN_ORDER", "MODEL_SCENES", "ALL_SCENES", "CHAPTERS", "lecture_scenes", "get_scene",
           "model_variant"]

# The lecture, in the order the study note tells the story: its pictures, why the shortcut (gradients, why its "+ 1"
# must be exactly 1, "keep as is" is easy, degradation), the Transformer's Add & Norm, its three "why" questions
# (gates or concatenation, only copying, the conveyor belt, the answer it carries up a GPT, and what stacked
# attention does to the tokens without the belt), then the papers' deeper views and the summary.
SCENES_IN_ORDER = [Analogies, IdentityHighway, SigmoidDerivative, ChainRuleProduct, ChainRuleExploding, GradientPlusOne,
                   ShortcutScale, GradientFlowOverTraining, IdentityFit, Degradation, DepthSweep, LossLandscape,
                   NormFree, NestedFunctionClasses, ResidualResponse, TransformerAddNorm, PostLNvsPreLN,
                   HighwayDenseNetResidual, DoesItOnlyCopy, ConveyorBelt, LogitLens, RankCollapse, HyperConnections,
                   PathEnsemble, ShatteredGradients, Summary]

# Optional chapters: their scenes sit in SCENES_IN_ORDER at their place in the story (a scene's ``chapter``
# names its chapter), but ``render.py all`` renders them only when asked (``--chapter NAME``): their runs cost
# more than the cold lecture's time budget (README, "Optional chapter: beyond 2016").
CHAPTERS = {
    "beyond": "findings after 2016 whose runs take minutes of CPU (issue 23): LossLandscape, HyperConnections",
}


def lecture_scenes(chapters: tuple[str, ...] | list[str] = ()) -> list[type]:
    """SCENES_IN_ORDER without the scenes of the optional chapters not in ``chapters``. Raises KeyError for
    an unknown chapter name."""
    unknown = sorted(set(chapters) - set(CHAPTERS))
    if unknown:
        raise KeyError(f"unknown chapter {unknown[0]!r}; available: {', '.join(CHAPTERS)}")
    return [s for s in SCENES_IN_ORDER if getattr(s, "chapter", None) in (None, *chapters)]


# The scenes that draw a user's own network (experiment model: --model, or --trace for a run watched in the user's
# loop): the lecture scenes' variants (scenes/user_model.py), then those of their own (not in the lecture).
MODEL_SCENES = [*_VARIANT_SCENES, DepthTimeMap]

# Every scene by name: the lecture's, then those that draw a user's own network.
ALL_SCENES = [*SCENES_IN_ORDER, *MODEL_SCENES]


def get_scene(name: str):
    """The scene class called ``name`` (a lecture scene or a user-model scene); raises KeyError listing the
    known names."""
    for scene in ALL_SCENES:
        if scene.__name__ == name:
            return scene
    raise KeyError(f"unknown scene {name!r}; available: {', '.join(s.__name__ for s in ALL_SCENES)}")


def model_variant(scene: type) -> type:
    """The scene that draws a user's model (experiment ``model``) in place of lecture scene ``scene``
    (``render.py render SCENE --model SPEC``); a user-model scene is its own variant. Raises KeyError naming
    the scenes that have one."""
    if scene in MODEL_SCENES:
        return scene
    if scene.__name__ not in MODEL_VARIANTS:
        own = [s.__name__ for s in MODEL_SCENES if s.__name__ not in MODEL_VARIANTS and s not in MODEL_VARIANTS.values()]
        raise KeyError(f"scene {scene.__name__} cannot draw your own model; these can: "
                       f"{', '.join([*MODEL_VARIANTS, *own])}")
    return MODEL_VARIANTS[scene.__name__]
