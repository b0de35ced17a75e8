"""torchvision's CUDA wheel beside the CPU torch: define the two op schemas its import needs, before it runs.

Example::

    bash bootstrap.sh setup     # installs the start-up hook below into the venv
    .venv/bin/python -c "import lightning; from transformers import GPT2LMHeadModel; import torchvision"

PyPI's torchvision for x86_64 is built against CUDA torch: beside the CPU torch its C++ ops (``nms``,
``roi_align`` ...) do not load (``_C.so`` needs ``libc10_cuda.so``), and ``import torchvision`` then fails where
it registers fakes for two of them (``RuntimeError: operator torchvision::nms does not exist``). Lightning
(through torchmetrics) and transformers import torchvision whenever it is installed, so a user's script that
imports either one first fails before any code of ours runs. PyTorch's own CPU build of torchvision
(``--index-url https://download.pytorch.org/whl/cpu``) is the proper cure where that index can be reached; where
it cannot (this project's machines: only PyPI), :func:`install` is the start-up hook: ``bootstrap.sh`` copies
this file into the venv's site-packages as ``residual_lecture_torchvision.py`` beside a one-line
``residual_lecture_torchvision.pth`` that calls :func:`install` when the interpreter starts.

The hook costs nothing until something looks for torchvision: it is one finder on ``sys.meta_path`` that lets
every other name pass. At the first look-up of ``torchvision`` it removes itself, then loads torchvision's ops
if they load (a CPU build: nothing else happens) or else defines the schemas of ``nms`` and ``qnms``, which no
classification model calls; the import then goes on as usual. It imports only torch, and only then.

This module imports nothing of the project's (it runs from site-packages, before the project is on sys.path).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path
from typing import Any

__all__ = ["allow_torchvision_without_ops", "install", "TorchvisionOps"]

# The schemas stay defined for the life of the process: a torch.library.Library undefines them when collected.
_SCHEMAS: Any = None


def allow_torchvision_without_ops() -> None:
    """Make ``import torchvision`` work beside the CPU torch: load its ops, or define the two schemas its import
    registers fakes for (never called: no classification model uses them). Does nothing when torchvision is
    imported already or is not installed; imports torch."""
    global _SCHEMAS
    if "torchvision" in sys.modules or _SCHEMAS is not None:
        return
    found = importlib.util.find_spec("torchvision")
    if found is None or not found.submodule_search_locations:
        return
    import torch

    for library in Path(next(iter(found.submodule_search_locations))).glob("_C*.so"):
        try:
            torch.ops.load_library(str(library))
            return
        except (OSError, RuntimeError):
            pass
    try:
        _SCHEMAS = torch.library.Library("torchvision", "DEF")
        for name in ("nms", "qnms"):
            _SCHEMAS.define(f"{name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    except RuntimeError:
        pass  # defined already


class TorchvisionOps(importlib.abc.MetaPathFinder):
    """A finder that finds nothing: at the first look-up of ``torchvision`` it removes itself from
    ``sys.meta_path`` and calls :func:`allow_torchvision_without_ops`; the usual finders then find torchvision."""

    def find_spec(self, fullname: str, path=None, target=None) -> None:
        if fullname == "torchvision":
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            allow_torchvision_without_ops()
        return None


def install() -> None:
    """Put one :class:`TorchvisionOps` at the front of ``sys.meta_path`` (idempotent; nothing when torchvision is
    imported already)."""
    if "torchvision" in sys.modules:
        return
    if not any(type(finder).__name__ == "TorchvisionOps" for finder in sys.meta_path):
        sys.meta_path.insert(0, TorchvisionOps())
