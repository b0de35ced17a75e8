"""Helpers for notebooks/lecture.ipynb: the command line's train and render, called from a notebook.

Example::

    from cli.notebook import train, render, show
    train("chain_rule", {"depth": 12})           # = python render.py train chain_rule --set depth=12 --json
    show(render("ChainRuleProduct", {"depth": 12}))

    from cli.notebook import record_model        # your own network in two calls
    traces = record_model("my_net.py:build", {"data": "digits-image", "model.width": 16})  # {RunKey("residual", 0): ...}
    show(render("GradientFlowOverTraining", {"data": "digits-image", "model.width": 16}, model="my_net.py:build"))

Each call runs ``render.py`` in a subprocess, so a notebook takes exactly the parameters, caching and checks of the
command line (and its kernel never imports torch or keeps Manim's settings between renders).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

from cli import render_command
from simulation.runkeys import RunKey, read_key_text

__all__ = ["train", "record_model", "render", "show", "sets_args", "NotebookError"]

class NotebookError(RuntimeError):
    """render.py refused the input or failed; the message is its one-line error."""


def sets_args(sets: Mapping[str, Any] | None) -> list[str]:
    """``{"depth": 12, "vanishing.depths": [8, 20]}`` -> ``["--set", "depth=12", "--set", "vanishing.depths=8,20"]``."""
    args = []
    for key, value in (sets or {}).items():
        text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value).lower() \
            if isinstance(value, bool) else str(value)
        args += ["--set", f"{key}={text}"]
    return args


def _run(args: list[str]) -> str:
    done = subprocess.run([*render_command(), *args], capture_output=True, text=True)
    if done.returncode:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise NotebookError(lines[-1] if lines else f"render.py exited with status {done.returncode}")
    return done.stdout


def train(experiment: str, sets: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Train ``experiment``'s runs (or read them from the trace cache): render.py train's ``--json`` summary,
    ``{"experiment": str, "runs": {run name: {"trace", "final_loss", "final_error", ...}}}``."""
    return json.loads(_run(["train", experiment, *sets_args(sets), "--json"]))


def record_model(spec: str, sets: Mapping[str, Any] | None = None) -> dict[RunKey, Path]:
    """Train a user's own network ``spec`` (``my_net.py:build``, ``torchvision.models:resnet18``) and its plain twin,
    or read them from the trace cache: ``{RunKey("residual", seed): trace path, RunKey("plain", seed): ...}`` (every
    seed of ``seeds``). ``sets``: as ``--set`` (``{"data": "digits-image32", "model.num_classes": 10}``)."""
    summary = json.loads(_run(["train", "--model", str(spec), *sets_args(sets), "--json"]))
    return {read_key_text(text, run["config"]["seed"]): Path(run["trace"]) for text, run in summary["runs"].items()}


def render(scene: str, sets: Mapping[str, Any] | None = None, quality: str = "l", lang: str = "en",
           output: str | Path = "media", model: str | None = None) -> Path:
    """Render ``scene`` (a name from ``render.py list`` or module:Class) as mp4 and return the video's path;
    nothing is rendered again when its inputs have not changed. ``model``: draw a user's own network
    (``render.py render SCENE --model SPEC``; the same ``sets`` as :func:`record_model`: its traces are reused)."""
    extra = ["--model", str(model)] if model else []
    out = _run(["render", scene, *extra, *sets_args(sets), "--quality", quality, "--lang", lang, "--output",
                str(output)])
    videos = [Path(line.strip()) for line in out.splitlines() if line.strip().endswith(".mp4")]
    if not videos:
        raise NotebookError(f"render.py reported no video for {scene}:\n{out}")
    return videos[0]


def show(video: Path, width: int = 720):
    """The video inline in the notebook (embedded, so the saved notebook keeps it)."""
    from IPython.display import Video

    return Video(str(video), embed=True, width=width, html_attributes="controls loop autoplay muted")
