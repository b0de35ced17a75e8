"""Run keys: typed (name, seed), written as text in one place and read back in one place, never taken apart elsewhere.

Example::

    pytest tests/test_runkeys.py -q -n 0

The text form (``NAME`` for the first seed of ``seeds``, ``NAME@seed{s}`` for the others; docs/how-to/sweeps.md) is only
known to :func:`simulation.runkeys.key_texts` and :func:`simulation.runkeys.read_key_text`: a round trip with
Hypothesis, and an ``ast`` check of every source file that no other code spells the text form or takes a run name
apart (prefix, suffix, split, partition, slicing, ``in``, a regular expression), with planted twins it must catch.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from simulation.experiments import EXPERIMENTS
from cli.params import build_runs  # parses string values as --set does
from simulation.runkeys import RunKey, by_name, by_seed, key_texts, one_seed, read_key_text

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("simulation", "scenes", "cli", "narration", "benchmarks", "tests", "render.py")
# The one place that knows the text form, and this file, which tests it.
TEXT_FORM_HOME = {"simulation/runkeys.py", "tests/test_runkeys.py"}

names = st.text(st.characters(blacklist_characters="@", blacklist_categories=("Cs",)), min_size=1, max_size=30)
keys = st.builds(RunKey, names, st.integers(0, 10_000))


# -- the text form: one writer, one reader -------------------------------------------------------------

@given(st.lists(keys, min_size=1, max_size=12, unique=True))
def test_every_key_reads_back_from_its_text(run_keys):
    texts = key_texts(run_keys)
    first = run_keys[0].seed
    assert list(texts) == run_keys and len(set(texts.values())) == len(run_keys)
    for key, text in texts.items():
        assert read_key_text(text, first) == key
        assert (text == key.name) == (key.seed == first), "the first seed's runs are written by their bare name"


def test_the_text_form_is_the_documented_one():
    texts = key_texts([RunKey("plain_d56", 0), RunKey("plain_d56", 3)])
    assert list(texts.values()) == ["plain_d56", "plain_d56@seed3"]  # docs/how-to/sweeps.md
    assert read_key_text("conv_residual_d110@seed4", 0) == RunKey("conv_residual_d110", 4)
    assert read_key_text("plain", 7) == RunKey("plain", 7)
    assert key_texts([]) == {}


@pytest.mark.parametrize("bad", ["", "a@b", "plain@seedx", "@seed1"])
def test_a_text_no_key_writes_is_refused(bad):
    with pytest.raises(ValueError):
        read_key_text(bad, 0)


@pytest.mark.parametrize(("name", "seed"), [("", 0), ("a@b", 0), ("plain", -1), ("plain", True), ("plain", 1.0),
                                            (3, 0)])
def test_a_bad_key_is_refused(name, seed):
    with pytest.raises(ValueError):
        RunKey(name, seed)


def test_build_runs_keys_every_run_by_name_and_seed():
    for name in EXPERIMENTS:
        runs = build_runs(name, {"seeds": "2,0"})
        assert all(isinstance(key, RunKey) and key.seed == config.seed for key, config in runs.items())
        assert list(by_seed(runs)) == [2, 0]
        assert by_seed(runs)[2].keys() == by_seed(runs)[0].keys() == by_name(runs).keys()
        with pytest.raises(ValueError, match="2 seeds"):
            one_seed(runs)


# -- nobody else takes a run name apart ----------------------------------------------------------------

# Containers keyed by run (a RunKey or a run's name): what a loop over them binds is a run key or name.
RUN_CONTAINERS = {"traces", "runs", "trace_files", "seed_traces", "summaries", "run_texts"}
KEYED_BY_RUN = {"files", "summary"}  # names also used for plain lists: run containers when iterated by .items()
RUN_SOURCES = {"build_runs", "scene_runs", "one_seed", "by_seed", "by_name", "tiny_trace_files",
               "tiny_trace_files_with_seeds", "committed_traces"}
TAKING_APART = {"startswith", "endswith", "partition", "rpartition", "split", "rsplit", "removeprefix",
                "removesuffix", "find", "rfind", "index", "rindex"}


def _container(node: ast.AST, by_items: bool = False) -> bool:
    """An expression that holds runs by key: ``traces``, ``self.traces``, ``runs.items()``, ``build_runs(...)``."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("items", "keys") and not node.args:
            return _container(func.value, by_items=True)
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in RUN_SOURCES or name in ("sorted", "list", "dict", "iter", "reversed") and bool(node.args) \
            and _container(node.args[0])
    if isinstance(node, ast.Subscript):
        return _container(node.value)
    names = RUN_CONTAINERS | KEYED_BY_RUN if by_items else RUN_CONTAINERS
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Attribute):
        return node.attr in names
    return False


def _loops(tree: ast.AST):
    """``(names bound to a run key, the nodes where they are in scope)`` for every ``for`` and comprehension over a
    run container (the first element of a ``(key, value)`` target over ``.items()``)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            loops, scope = [(node.target, node.iter)], node.body + node.orelse
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            loops, scope = [(g.target, g.iter) for g in node.generators], [node.elt, *(i for g in node.generators
                                                                                       for i in g.ifs)]
        elif isinstance(node, ast.DictComp):
            loops, scope = [(g.target, g.iter) for g in node.generators], [node.key, node.value, *(
                i for g in node.generators for i in g.ifs)]
        else:
            continue
        bound = set()
        for target, iterated in loops:
            if not _container(iterated):
                continue
            if isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name):
                bound.add(target.elts[0].id)
            elif isinstance(target, ast.Name):
                bound.add(target.id)
        if bound:
            yield bound, scope


def _is_run_name(node: ast.AST, bound: set[str]) -> bool:
    """``name`` bound to a run key, or its ``.name``."""
    if isinstance(node, ast.Attribute) and node.attr == "name":
        node = node.value
    return isinstance(node, ast.Name) and node.id in bound


def _taking_apart(node: ast.AST, bound: set[str]) -> str | None:
    """What ``node`` does to a run name of ``bound``, if it takes one apart."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in TAKING_APART and _is_run_name(func.value, bound):
            return f".{func.attr}() of a run name"
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "re" \
                and any(_is_run_name(arg, bound) for arg in node.args):
            return f"re.{func.attr}() of a run name"
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and _is_run_name(node.value, bound):
        return "a slice of a run name"
    elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
            and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str) \
            and any(_is_run_name(c, bound) for c in node.comparators):
        return "a substring test on a run name"
    return None


def run_name_parsing(source: str, path: str) -> list[str]:
    """Where ``source`` spells the run keys' text form or takes a run name apart: ``"path:line: what"``."""
    tree = ast.parse(source, filename=path)
    found = [f"{path}:{node.lineno}: the text form of a run key ({node.value!r})" for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and "@seed" in node.value]
    for bound, scope in _loops(tree):
        for node in (n for part in scope for n in ast.walk(part)):
            what = _taking_apart(node, bound)
            if what:
                found.append(f"{path}:{node.lineno}: {what}")
    return sorted(set(found))


def _source_files() -> list[Path]:
    out = []
    for entry in SOURCES:
        path = ROOT / entry
        out += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return out


def test_no_code_but_the_run_keys_module_knows_the_text_form_or_takes_a_run_name_apart():
    files = _source_files()
    assert len(files) > 100 and ROOT / "scenes" / "kit" / "base.py" in files
    found = []
    for path in files:
        relative = path.relative_to(ROOT).as_posix()
        if relative not in TEXT_FORM_HOME:
            found += run_name_parsing(path.read_text(encoding="utf-8"), relative)
    assert found == []


PLANTED = {  # twins: each takes a run name apart the way this codebase once did
    "prefix": 'for name, t in self.traces.items():\n    if name.startswith("plain_gain"):\n        pass\n',
    "partition": 'for key, t in traces.items():\n    name, _, seed = key.partition(SEP)\n',
    "text_form": 'KEY = f"{name}@seed{seed}"\n',
    "regex": 'import re\nfor key in build_runs("depth_sweep"):\n    m = re.match(r"(mlp|conv)_", key.name)\n',
    "substring": 'base = {k: t for k, t in traces.items() if "@" not in k}\n',
    "slice": 'for name in sorted(runs):\n    short = name[:5]\n',
}


@pytest.mark.parametrize("case", PLANTED)
def test_the_check_catches_a_planted_twin(case):
    assert len(run_name_parsing(PLANTED[case], f"planted_{case}.py")) == 1, case


def test_the_check_leaves_layer_names_and_typed_keys_alone():
    clean = ('for i, layer in enumerate(trace.meta.layers):\n    if layer.startswith("encoder."):\n        pass\n'
             'for key, t in traces.items():\n    if key.seed != first and key.name == PLAIN:\n        pass\n'
             'texts = key_texts(runs)\n')
    assert run_name_parsing(clean, "clean.py") == []
