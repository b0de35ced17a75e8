"""House rules that hold across the code: scenes never load torch, string tables agree across languages.

Example::

    pytest tests/test_house.py
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import string
from pathlib import Path

import pytest

import scenes
from forked import run_forked
from narration import i18n
from support import FULL_LANGS as LANGS

ROOT = Path(__file__).resolve().parent.parent


TORCH_FREE = ["scenes", "cli.params", "cli.media", "render", "narration"]


# Both probes run in children of tests/forked.py's Manim server (Manim imported, which loads no torch): the twin
# shows that torch loaded there is seen.
@pytest.mark.xdist_group("manim-probes")  # the worker that holds the Manim probe server
def test_importing_never_loads_torch():
    """One fresh interpreter imports each module in turn and counts torch's modules after each: the first
    module whose import loads torch is the one named (one interpreter start instead of four)."""
    code = ("import importlib, json, sys\n"
            f"counts = {{}}\nfor name in {TORCH_FREE!r}:\n"
            "    importlib.import_module(name)\n"
            "    counts[name] = sum(1 for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
            "print(json.dumps(counts))\n")
    done = run_forked(code, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, server="manim")
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert list(counts) == TORCH_FREE
    loaded = [name for name, count in counts.items() if count]
    assert not loaded, f"importing {loaded[0]} loaded torch"


@pytest.mark.xdist_group("manim-probes")
def test_the_torch_check_can_fail():
    done = run_forked("import sys\nprint('torch' in sys.modules)\nimport simulation.kinds.mlp\nprint('torch' in sys.modules)",
                      env={"PYTHONPATH": str(ROOT)}, server="manim")
    assert done.stdout.split() == ["False", "True"], done.stderr  # the trainer does import torch: the probe above would see it


def _string_tables():
    """Every ``{key: {lang: text}}`` table in the scenes package: each scene's ``strings`` and every
    module-level dict of such entries, and the catalogs (locale/, narration.i18n) as one table ``"Owner.key"``."""
    english, chinese = i18n.english(), i18n.messages("zh")
    tables = {"locale": {name: {"en": text, "zh": chinese.get(name, text)} for name, text in english.items()}}
    for info in pkgutil.walk_packages(scenes.__path__, "scenes."):  # scenes.kit's modules too
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, dict) and value and all(isinstance(v, dict) and set(LANGS) <= set(v)
                                                         for v in value.values()):
                tables[f"{info.name}.{name}"] = value
            elif isinstance(value, dict) and set(value) == set(LANGS) and all(isinstance(v, str) for v in value.values()):
                tables[f"{info.name}.{name}"] = {name: value}
            elif isinstance(value, type) and isinstance(getattr(value, "strings", None), dict) and value.strings:
                tables[f"{value.__module__}.{value.__name__}.strings"] = value.strings
    return tables


def _fields(text: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}


def test_every_string_table_uses_the_same_placeholders_in_every_language():
    tables = _string_tables()
    assert "ChainRuleProduct.title" in tables["locale"] and "LectureScene.missing" in tables["locale"]
    wrong = [f"{table}[{key!r}]: " + ", ".join(f"{lang} {sorted(_fields(entry[lang]))}" for lang in LANGS)
             for table, entries in tables.items() for key, entry in entries.items()
             if len({frozenset(_fields(entry[lang])) for lang in LANGS}) > 1]
    assert wrong == []


def test_the_placeholder_check_can_fail():
    assert _fields("{a} and {b:.2f}") == {"a", "b"} != _fields("{a} 和")


@pytest.mark.xdist_group("house-group-probe")
def test_xdist_groups_reach_the_scheduler(request):
    """Under ``--dist loadgroup`` a grouped test's node id ends in ``@group``, the only thing pytest-xdist's
    scheduler reads; without it each test of a scene's group may run on another worker, and the scene's
    shared build (tests/dry_run.py) is made on each (tests/conftest.py mends this for pytest 9.2)."""
    if not hasattr(request.config, "workerinput") or not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by pytest-xdist with --dist loadgroup")
    assert request.node.nodeid.endswith("@house-group-probe"), request.node.nodeid
