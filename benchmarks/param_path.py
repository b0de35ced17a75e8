"""Follow a command's parameters through the layers: the modules they pass, in order, and how often they climb back.

Example::

    python -m benchmarks.param_path render IdentityHighway --check --set steps=20 --set depth=3
    python -m benchmarks.param_path --json list --set seeds=0,1          # the figures as JSON

Runs ``render.py ARGS...`` in this process (``$RESIDUAL_CACHE`` defaults to a scratch folder: nothing is trained
with ``--check`` or ``list``) under :func:`sys.setprofile`, and records every call of a function of ``render.py``
(layer 0), ``cli/`` (layer 1) or ``simulation/`` (layer 2) that is handed a parameter, and the return to its caller.
A call is handed a parameter when an argument is, or holds one level down (a list, tuple or dict):

- ``params``: the parameters before the runs exist: the scene names or classes given, a
  :class:`cli.params.Layer`, or a dict of parameter values (its keys all parameter names of an experiment or a
  scene, raw or typed);
- ``configs``: what they become: a run config (:class:`simulation.config.BaseConfig`) or a render job.

For each of the two (and both together) it prints the path of modules (consecutive calls within one module
merged) and three counts:

- ``climbs``: steps of the path to a higher layer, returns to a caller included (issue 38's count: render.py
  -> cli/plan.py -> render.py is one climb);
- ``calls up``: calls from a lower layer into a function of a higher one (a layering violation; should be 0);
- ``re-entries``: returns to a module the path had already left.

Lateral steps (cli/plan.py -> cli/params.py) never count as climbs. Exit status: the command's.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

__all__ = ["ROOT", "layer_of", "module_of", "PathRecorder", "count", "follow", "main"]

ROOT = Path(__file__).resolve().parent.parent
_LAYERS = {"render.py": 0, "cli": 1, "simulation": 2}


@functools.lru_cache(maxsize=None)
def module_of(filename: str) -> str | None:
    """``cli/plan.py`` for a file of the project's three layers; None for any other file."""
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts and rel.parts[0] in _LAYERS else None


def layer_of(module: str) -> int:
    """0 for render.py, 1 for cli/, 2 for simulation/."""
    return _LAYERS[module.split("/")[0]]


def count(path: list[str]) -> dict[str, Any]:
    """The figures of a path of modules: ``{"rooms", "climbs", "re_entries", "path"}`` (calls up are counted while
    recording: a path alone cannot tell a call from a return)."""
    rooms = [m for i, m in enumerate(path) if i == 0 or m != path[i - 1]]
    climbs = sum(1 for a, b in zip(rooms, rooms[1:]) if layer_of(b) < layer_of(a))
    left: set[str] = set()
    re_entries = 0
    for i, module in enumerate(rooms):
        if module in left:
            re_entries += 1
        if i:
            left.add(rooms[i - 1])
    return {"rooms": len(rooms), "climbs": climbs, "re_entries": re_entries, "path": rooms}


class PathRecorder:
    """A :func:`sys.setprofile` hook that records, per kind of value (``kinds``: name -> predicate over one
    argument), the modules of the calls handed such a value and of the returns to their callers."""

    def __init__(self, kinds: dict[str, Callable[[Any], bool]], start: str = "render.py") -> None:
        self.kinds = kinds
        self.paths: dict[str, list[str]] = {name: [start] for name in kinds}
        self.calls_up: dict[str, list[str]] = {name: [] for name in kinds}
        self._stack: list[tuple[tuple[str, ...], str | None]] = []

    def __call__(self, frame, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        module = module_of(frame.f_code.co_filename)
        if module is None:
            return
        if event == "call":
            code = frame.f_code
            names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
            args = [frame.f_locals[n] for n in names if n in frame.f_locals]
            caller = module_of(frame.f_back.f_code.co_filename) if frame.f_back else None
            held = tuple(name for name, holds in self.kinds.items() if any(_holds(holds, a) for a in args))
            self._stack.append((held, caller))
            for name in held:
                self.paths[name].append(module)
                if caller is not None and layer_of(caller) > layer_of(module):
                    self.calls_up[name].append(f"{caller} -> {module}:{code.co_name}")
        elif self._stack:
            held, caller = self._stack.pop()
            for name in held:
                if caller is not None:
                    self.paths[name].append(caller)


def _holds(predicate: Callable[[Any], bool], value: Any) -> bool:
    if predicate(value):
        return True
    if isinstance(value, dict):
        items = list(value.values())[:50]
    elif isinstance(value, (list, tuple)):
        items = list(value)[:200]
    else:
        return False
    return any(predicate(item) for item in items)


def _kinds(scene_names: set[str]) -> dict[str, Callable[[Any], bool]]:
    from cli.media import RenderJob
    from cli.params import Layer, all_params, scene_params
    from scenes import ALL_SCENES
    from simulation.config import BaseConfig

    names = {key for keys in all_params().values() for key in keys} | {"seeds"}
    names |= {key for scene in ALL_SCENES for key in scene_params(scene)}

    def params(value: Any) -> bool:
        if isinstance(value, Layer):
            return True
        if isinstance(value, str):
            return value in scene_names
        if isinstance(value, type):
            return value.__name__ in scene_names
        return isinstance(value, dict) and bool(value) and all(isinstance(k, str) and k in names for k in value)

    def configs(value: Any) -> bool:
        return isinstance(value, (BaseConfig, RenderJob))

    return {"params": params, "configs": configs, "both": lambda v: params(v) or configs(v)}


def follow(args: list[str]) -> tuple[int, dict[str, dict[str, Any]]]:
    """Run ``render.py args`` and follow its parameters: ``(exit code, {kind: figures})`` (:func:`count`, plus
    ``calls_up``, a list of "caller -> module:function")."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("RESIDUAL_CACHE", str(Path(os.environ.get("TMPDIR", "/tmp")) / "param-path-cache"))
    from click.testing import CliRunner

    import render

    scene_names = {a.rpartition(":")[2] for a in args if a[:1].isupper() or ":" in a}
    recorder = PathRecorder(_kinds(scene_names))
    runner = CliRunner()
    sys.setprofile(recorder)
    try:
        result = runner.invoke(render.cli, args)
    finally:
        sys.setprofile(None)
    figures = {name: {**count(path), "calls_up": recorder.calls_up[name]} for name, path in recorder.paths.items()}
    if result.exit_code != 0:
        print(result.output.strip().splitlines()[-1] if result.output.strip() else repr(result.exception),
              file=sys.stderr)
    return result.exit_code, figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.param_path", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="render.py's arguments")
    options = parser.parse_args(argv)
    code, figures = follow(options.args)
    if options.json:
        print(json.dumps(figures, indent=2))
        return code
    for name, fig in figures.items():
        print(f"{name}: {' -> '.join(fig['path'])}")
        print(f"{name}: {fig['rooms']} rooms, {fig['climbs']} climbs back up a layer, {len(fig['calls_up'])} calls up"
              f"{' (' + '; '.join(fig['calls_up']) + ')' if fig['calls_up'] else ''}, "
              f"{fig['re_entries']} re-entries\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
