"""The command line's helpers: parameters, render jobs and media (``render.py`` is the front door).

Modules here read rendered clips, traces and their records; they never train a network and never
draw a frame themselves (training runs in ``simulation``, drawing in ``scenes``).

:func:`render_command` is how the code starts the command line in a process of its own, from a checkout
(``python render.py``) or from an installed copy (``python -m residual_lecture``; see residual_lecture/__init__.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["ROOT", "INSTALLED", "render_command", "quiet_ctrl_c", "QUIET_CTRL_C"]

ROOT = Path(__file__).resolve().parent.parent  # the checkout, or site-packages/residual_lecture when installed
INSTALLED = __name__.startswith("residual_lecture.")  # imported as residual_lecture.cli: an installed copy


def render_command() -> list[str]:
    """The argv that runs this project's command line in a fresh process (the arguments follow)."""
    return [sys.executable, "-m", "residual_lecture"] if INSTALLED else [sys.executable, str(ROOT / "render.py")]


def _exit_on_signal(signum: int, frame: object) -> None:
    sys.exit(128 + signum)


QUIET_CTRL_C = _exit_on_signal  # the SIGINT handler of quiet_ctrl_c (cli.options.LectureCli replaces it)


def quiet_ctrl_c(name: str) -> None:
    """For ``name == "__main__"`` (the command line starting): Ctrl-C while its modules load ends the process with
    status 130 and no traceback (a KeyboardInterrupt inside an import would print one); nothing has been written
    yet. The command line's own handling (Aborted!, cleaning up) takes over when it starts. An inherited
    SIG_IGN (a background job of a shell without job control) is kept."""
    import signal

    if name == "__main__" and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, QUIET_CTRL_C)
