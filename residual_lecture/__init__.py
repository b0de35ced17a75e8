"""residual-lecture as an installed package: the checkout's folders as subpackages of ``residual_lecture``.

Example::

    pip install .                      # or: pip wheel . --no-deps && pip install residual_lecture-*.whl
    residual-lecture render NestedFunctionClasses -q l
    python -m residual_lecture list    # the same command line as ``python render.py`` in a checkout

The checkout keeps its top-level folders (``render.py``, ``cli/``, ``narration/``, ``scenes/``, ``simulation/``, ``web/``), and its
code imports them by those names (``from simulation.config import RunConfig``). The wheel puts them *inside* this
package (``residual_lecture/cli``, ``residual_lecture/render.py`` ..., see ``[tool.setuptools.package-dir]`` in
pyproject.toml), so nothing generic lands at the top of site-packages, and the checkout's layout below the root is
kept: paths relative to the root (``web/node_modules/reveal.js``) hold in both.

Importing this package in an installed copy adds :class:`AliasFinder` to ``sys.meta_path``: an import of
``simulation.config`` (any name under :data:`ALIASES`) returns the module ``residual_lecture.simulation.config``,
the same object under both names, so each module runs once and pickles by its real name. Processes the code
starts use the real names (``python -m residual_lecture``, ``python -m residual_lecture.simulation.cache``: see
``cli.python_module``). In a checkout (and an editable install, ``pip install -e .``) the folders are the real
top-level packages: this package only puts the checkout's root on ``sys.path`` so that the console command finds
them, and installs no alias.

The library API for a user's own training loop, ``from residual_lecture import watch, plain_twin``
(docs/how-to/watch.md), is imported on first use, so that ``import residual_lecture`` loads no torch.

The aliases are process-wide: once ``residual_lecture`` is imported, ``import cli`` (or any name of
:data:`ALIASES`) means this project's module in that process.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["ALIASES", "AliasFinder", "INSTALLED", "main", "watch", "plain_twin", "Watch", "WatchError"]

# The library API, imported on first use (``import residual_lecture`` stays cheap: no torch until then).
_LAZY = {"watch": "simulation.core.watch", "plain_twin": "simulation.core.watch", "Watch": "simulation.core.watch",
         "WatchError": "simulation.core.watch"}

# The checkout's top-level modules and packages that the wheel holds as subpackages (pyproject.toml's package-dir
# maps the same names; tests/test_install.py checks that the two lists and the checkout's folders agree).
ALIASES = ("render", "cli", "narration", "scenes", "simulation")

_HERE = Path(__file__).resolve().parent
# Installed: the folders are inside this package. A checkout (or an editable install): they are its siblings.
INSTALLED = (_HERE / "simulation").is_dir()


class AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``NAME[.sub...]`` for NAME in ``names`` to the module ``PACKAGE.NAME[.sub...]`` (one object,
    registered under both names)."""

    def __init__(self, package: str, names: tuple[str, ...]) -> None:
        self.package, self.names = package, frozenset(names)
        self._real_specs: dict[str, importlib.machinery.ModuleSpec] = {}

    def find_spec(self, fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in self.names:
            return None
        real = f"{self.package}.{fullname}"
        if importlib.util.find_spec(real) is None:  # a name we do not have (``cli.nonexistent``): not ours
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        # The real module, imported (once) under its own name; the import system then registers it under the
        # alias too. module_from_spec keeps its __name__, __file__ and __path__ but sets __spec__ to the alias's:
        # exec_module puts the real one back (``python -m`` of ``module.__spec__.name`` must find it).
        module = importlib.import_module(f"{self.package}.{spec.name}")
        self._real_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing runs (the module already has); its own ``__spec__`` is restored."""
        module.__spec__ = self._real_specs.pop(module.__spec__.name)


def _install() -> None:
    if INSTALLED:
        if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, AliasFinder(__name__, ALIASES))
    elif str(_HERE.parent) not in sys.path:
        sys.path.insert(0, str(_HERE.parent))  # the checkout's root: its folders are the real packages


_install()


def __getattr__(name: str):
    """``watch``, ``plain_twin`` ... from :mod:`simulation.core.watch`, imported on first use."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def main() -> None:
    """The ``residual-lecture`` console command: ``render.py``'s command line."""
    from cli import quiet_ctrl_c

    quiet_ctrl_c("__main__")  # before the command line's modules load (cli/__init__.py)
    from render import cli

    cli(prog_name="residual-lecture")
