"""The import graph of simulation/, scenes/, cli/, narration/ and render.py: no cycle, no private name from another module.

Example::

    pytest tests/test_imports.py

Every ``import`` and ``from ... import`` counts, at module level and inside functions alike (a function-level
import that closes a cycle is still a cycle: it only moves the failure to run time), and so do the imports made by
name at run time: ``importlib.import_module("a.b")`` (or ``import_module``, ``__import__``) with a literal name,
and every string ``"a.b:function"`` that names a module of the graph (the table of run kinds names its trainers so,
and loads them when used). The graph is read with ``ast``, without importing anything.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("simulation", "scenes", "cli", "narration")
TOP_LEVEL = ("render.py",)


def modules(root: Path, packages=PACKAGES, top_level=TOP_LEVEL) -> dict[str, Path]:
    """``{dotted module name: file}`` of every module of ``packages`` under ``root`` plus ``top_level`` files."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for name in top_level:
        if (root / name).is_file():
            found[Path(name).stem] = root / name
    return found


def _target(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names (relative imports resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


IMPORT_BY_NAME = ("import_module", "__import__")  # functions whose literal first argument is a module imported
LOADED_BY_NAME = re.compile(r"([A-Za-z_][\w.]*):[A-Za-z_]\w*")  # "module:function", loaded when used (a trainer)


def _by_name(node: ast.AST) -> str | None:
    """The module that ``node`` imports by name at run time: the literal of ``import_module("a.b")``, or the
    module of a string ``"a.b:function"``; None otherwise."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name in IMPORT_BY_NAME and isinstance(node.args[0].value, str):
            return node.args[0].value
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        match = LOADED_BY_NAME.fullmatch(node.value)
        return match.group(1) if match else None
    return None


def import_graph(root: Path, **kwargs) -> tuple[nx.DiGraph, list[str]]:
    """The graph of imports among :func:`modules` (an edge A -> B: A imports B, anywhere in A, by an import
    statement or by name, :func:`_by_name`) and the private names imported across modules, as
    ``"A imports _name from B"``."""
    found = modules(root, **kwargs)
    graph, private = nx.DiGraph(), []
    graph.add_nodes_from(found)
    for module, path in found.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            named = _by_name(node)
            if named in found:
                graph.add_edge(module, named)
            if isinstance(node, ast.Import):
                graph.add_edges_from((module, alias.name) for alias in node.names if alias.name in found)
            elif isinstance(node, ast.ImportFrom):
                target = _target(module, path, node)
                for alias in node.names:
                    if f"{target}.{alias.name}" in found:  # from package import module
                        graph.add_edge(module, f"{target}.{alias.name}")
                    elif target in found:
                        graph.add_edge(module, target)
                        if alias.name.startswith("_") and not alias.name.startswith("__") and target != module:
                            private.append(f"{module} imports {alias.name} from {target}")
    graph.remove_edges_from(list(nx.selfloop_edges(graph)))
    return graph, private


def cycles(graph: nx.DiGraph) -> list[list[str]]:
    """Each group of modules that import each other (directly or around a loop), sorted."""
    return sorted(sorted(group) for group in nx.strongly_connected_components(graph) if len(group) > 1)


@pytest.fixture(scope="module")
def checkout_graph() -> tuple[nx.DiGraph, list[str]]:
    """:func:`import_graph` of this checkout, read once for the tests that only read it (one worker: their group)."""
    return import_graph(ROOT)


@pytest.mark.xdist_group("checkout-import-graph")
def test_no_import_cycle_and_no_private_import_across_modules(checkout_graph):
    graph, private = checkout_graph
    assert {"simulation.runs", "simulation.cache", "scenes.kit.base", "cli.media", "render"} <= set(graph)
    assert graph.has_edge("simulation.cache", "simulation.sweep")  # the graph does see relative imports
    assert graph.has_edge("simulation.runs", "simulation.kinds.mlp")  # ... and the table's trainer strings
    assert cycles(graph) == []
    assert private == []


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


@pytest.mark.parametrize("closing", [
    "from .a import run\n",
    "def f():\n    from simulation import a\n",
    "import importlib\n\ndef f():\n    return importlib.import_module('simulation.a').run\n",
    "TRAINER = 'simulation.a:run'  # loaded when used, as the table of kinds names its trainers\n",
])
def test_the_check_finds_a_planted_cycle_at_module_or_function_level_or_by_name(tmp_path, closing):
    _write(tmp_path, {"simulation/__init__.py": "", "simulation/a.py": "from .b import g\n",
                      "simulation/b.py": "import simulation.c\n", "simulation/c.py": closing,
                      "scenes/__init__.py": "", "cli/__init__.py": ""})
    assert cycles(import_graph(tmp_path)[0]) == [["simulation.a", "simulation.b", "simulation.c"]]


def test_the_check_finds_a_private_name_imported_from_another_module(tmp_path):
    _write(tmp_path, {"simulation/__init__.py": "", "simulation/a.py": "def _hidden():\n    pass\n",
                      "scenes/__init__.py": "", "scenes/x.py": "def f():\n    from simulation.a import _hidden\n",
                      "cli/__init__.py": "from __future__ import annotations\n"})
    graph, private = import_graph(tmp_path)
    assert private == ["scenes.x imports _hidden from simulation.a"] and cycles(graph) == []


def test_render_py_holds_the_commands_and_little_else():
    """The front door stays small: options, the planner and the pipeline live in cli/ (issue 19)."""
    lines = (ROOT / "render.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 350, f"render.py has {lines} lines; move what is not a click command into cli/"


def test_no_test_file_imports_another():
    """Shared helpers live in modules that are not test files (tests/support.py, tests/frame_checks.py, ...)."""
    tests = ROOT / "tests"
    names = {p.stem for p in tests.glob("test_*.py")}
    found = []
    for path in sorted(tests.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name} imports {t}" for t in targets if t.split(".")[0] in names]
    assert found == []


def _layer_imports(graph: nx.DiGraph, source: str, target: str) -> list[str]:
    """Edges from a module of package ``source`` to one of package ``target``, as ``"A -> B"``."""
    return sorted(f"{a} -> {b}" for a, b in graph.edges
                  if a.split(".")[0] == source and b.split(".")[0] == target)


@pytest.mark.xdist_group("checkout-import-graph")
def test_no_module_of_scenes_imports_cli(checkout_graph):
    """The drawing layer never reaches up to the command line's: the beat record lives in narration/, the
    languages in narration.text, the theme names in scenes.kit.theme (cli/params.py repeats both for --help)."""
    graph, _ = checkout_graph
    assert graph.has_edge("scenes.kit.beats", "narration.beats")  # the graph sees the scenes' imports
    assert _layer_imports(graph, "scenes", "cli") == []


def test_the_layer_check_finds_a_scene_that_imports_cli(tmp_path):
    _write(tmp_path, {"scenes/__init__.py": "", "scenes/kit/__init__.py": "",
                      "scenes/kit/style.py": "def f():\n    from cli.params import LANGS\n",
                      "cli/__init__.py": "", "cli/params.py": "LANGS = ()\n", "simulation/__init__.py": ""})
    assert _layer_imports(import_graph(tmp_path)[0], "scenes", "cli") == ["scenes.kit.style -> cli.params"]


CORE_PROBE = """
import sys
import simulation.core, simulation.core.record, simulation.core.residual_adds
top = {name.split(".")[0] for name in sys.modules}
print(sorted(top & {"manim", "click", "cli", "scenes", "narration", "render", "dask", "distributed"}))
"""


@pytest.mark.xdist_group("torch-probes")  # the worker that holds the probe server (tests/forked.py)
def test_the_core_imports_only_torch_numpy_and_the_standard_library(checkout_graph):
    """simulation.core (the recorder, the residual-addition finder, watch): its modules import only torch, numpy,
    the standard library, each other and the torch-free trace file (read with ``ast``), and a fresh interpreter (a child
    of one that imported only torch, tests/forked.py) that imports it loads neither
    Manim, click, Dask nor anything of cli/, scenes/ or narration/ (the package simulation/ above it loads its
    torch-free table of kinds). The twin: the probe does see a module that the import pulls in."""
    import sys

    from forked import run_forked

    allowed = {"torch", "numpy", "__future__"} | set(sys.stdlib_module_names)
    graph, _ = checkout_graph
    core = [m for m in graph if m.startswith("simulation.core")]
    outside = {b for a in core for b in graph[a] if not b.startswith("simulation.core")}
    assert "simulation.core.record" in core and outside <= {"simulation.trace"}, outside  # the torch-free trace file
    for path in (ROOT / "simulation" / "core").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            assert {n.split(".")[0] for n in names} <= allowed | {"simulation"}, f"{path.name} imports {names}"
    out = run_forked(CORE_PROBE)  # a fresh child of an interpreter that imported only torch (tests/forked.py)
    assert out.returncode == 0 and out.stdout.splitlines() == ["[]"], (out.stdout, out.stderr)
    twin = run_forked(CORE_PROBE.replace("import simulation.core, simulation.core.record, simulation.core.residual_adds",
                                         "import cli.params"))
    assert twin.returncode == 0 and twin.stdout.splitlines() == ["['cli']"], (twin.stdout, twin.stderr)
