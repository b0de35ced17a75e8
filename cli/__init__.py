"""The command line's helpers: parameters, render jobs and media (``render.py`` is the front door).

Modules here read rendered clips, traces and their records; they never train a network and never
draw a frame themselves (training runs in ``simulation``, drawing in ``scenes``).

:func:`render_command` is how the code starts the command line in a process of its own, from a checkout
(``python render.py``) or from an installed copy (``python -m residual_lecture``; see residual_lecture/__init__.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["ROOT", "INSTALLED", "render_command"]

ROOT = Path(__file__).resolve().parent.parent  # the checkout, or site-packages/residual_lecture when installed
INSTALLED = __name__.startswith("residual_lecture.")  # imported as residual_lecture.cli: an installed copy


def render_command() -> list[str]:
    """The argv that runs this project's command line in a fresh process (the arguments follow)."""
    return [sys.executable, "-m", "residual_lecture"] if INSTALLED else [sys.executable, str(ROOT / "render.py")]
