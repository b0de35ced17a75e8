"""The trace digest follows the simulation code: editing code that shapes a run re-keys the cache.

Each case copies the ``simulation`` package to a temporary folder, edits one file and asks a fresh
interpreter for the digests of the default configs (~0.3 CPU s each): the default run edits each kind of file once
(a trainer's own module, a shared one, a function-level import, a comment, a docstring, a new kind's module); the
cases marked slow edit the others, and CI runs them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simulation.config import RunConfig, TransformerConfig
from simulation.provenance import NOT_RUN_SHAPING, code_fingerprint, run_sources

PACKAGE = Path(__file__).resolve().parent.parent / "simulation"
PROBE = "from simulation.config import RunConfig, TransformerConfig; print(RunConfig().digest(), TransformerConfig().digest())"


def _digests(root: Path) -> tuple[str, str]:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0], out[1]


def _edited_copy(tmp_path: Path, name: str, edit) -> Path:
    shutil.copytree(PACKAGE, tmp_path / "simulation", ignore=shutil.ignore_patterns("__pycache__"))
    path = tmp_path / "simulation" / name
    before = path.read_text() if path.exists() else ""
    path.write_text(edit(before))
    assert path.read_text() != before, "the edit changed nothing"
    return tmp_path


def _replace(old: str, new: str):
    def edit(text: str) -> str:
        assert old in text, f"{old!r} is not in the file any more: update this test"
        return text.replace(old, new, 1)
    return edit


def test_an_unedited_copy_gives_the_same_digests(tmp_path):
    root = _edited_copy(tmp_path, "README_probe.txt", lambda _: "not python\n")  # not a module: ignored
    assert _digests(root) == (RunConfig().digest(), TransformerConfig().digest())


# (file, edit, whether the MLP digest changes, whether the Transformer's does): a digest hashes what its trainer imports.
@pytest.mark.parametrize("name, edit, mlp_changes, transformer_changes", [
    ("kinds/mlp.py", _replace("SWEEP_POINTS = 256", "SWEEP_POINTS = 255"), True, False),  # a constant of the MLP trainer
    ("core/record.py", _replace("low.item() > 1e-15", "low.item() > 1e-14"), True, True),  # the recorders' float64 fallback
    pytest.param("models.py", _replace("nn.Linear(width_out, width_out)]", "nn.Linear(width_out, width_out, bias=False)]"),
                 True, False, marks=pytest.mark.slow),
    pytest.param("loop.py", _replace("if record or not result.finite:", "if record or not result.finite or step == 1:"),
                 True, True, marks=pytest.mark.slow),
    ("kinds/transformer.py", _replace("betas=(0.9, 0.98)", "betas=(0.9, 0.99)"), False, True),
    ("kinds/conv.py", lambda _: "WIDTHS = (16, 32, 64)\n", True, False),  # imported in a function of kinds/mlp.py
    pytest.param("config.py", lambda text: text + "\nEXTRA = 1\n", True, True,  # every trainer imports the configs
                 marks=pytest.mark.slow),
])
def test_editing_code_that_shapes_a_run_changes_the_digests_of_the_kinds_whose_trainers_import_it(
        tmp_path, name, edit, mlp_changes, transformer_changes):
    mlp, transformer = _digests(_edited_copy(tmp_path, name, edit))
    assert (mlp != RunConfig().digest()) == mlp_changes
    assert (transformer != TransformerConfig().digest()) == transformer_changes


@pytest.mark.parametrize("name, edit", [
    pytest.param("kinds/highway.py", _replace("return t * self.branch(x) + (1 - t) * x", "return t * self.branch(x) + (1 - t) * x * 2"),
                 marks=pytest.mark.slow),
    ("kinds/new_kind.py", lambda _: "from .mlp import MLPTask\nSCALE = 2\n"),  # a new kind's module, imported by no trainer
])
def test_a_kinds_own_module_keys_only_its_own_traces(tmp_path, name, edit):
    assert _digests(_edited_copy(tmp_path, name, edit)) == (RunConfig().digest(), TransformerConfig().digest())


def test_editing_a_kinds_own_module_re_keys_that_kind():
    from simulation.config import HighwayConfig
    from simulation.provenance import run_sources

    highway, mlp = PACKAGE / "kinds" / "highway.py", PACKAGE / "kinds" / "mlp.py"
    assert highway in run_sources(root="kinds.highway") and mlp in run_sources(root="kinds.highway")
    assert highway not in run_sources(root="kinds.mlp") and PACKAGE / "core" / "record.py" in run_sources(root="kinds.mlp")
    assert HighwayConfig().digest() != RunConfig().digest()


def test_package_imports_finds_module_and_function_level_imports_in_every_form():
    from simulation.provenance import package_imports

    text = ("from .a import x\nfrom . import b, c\nimport simulation.d\nfrom simulation.e import y\n"
            "import os\nfrom torch import nn\nfrom ..other import z\n"
            "def f():\n    from .g import h\n    import simulation.k as kk\n")
    assert package_imports(text) == {"a", "b", "c", "d", "e", "g", "k"}
    # from a subpackage: relative imports climb from it; "from P import m" counts P.m when that is a module
    text = "from ..core.record import R\nfrom .stacked import s\nfrom ..kinds import conv\nfrom .. import loop\n"
    assert package_imports(text, module="kinds.mlp", modules={"kinds.conv", "loop"}) == {
        "core.record", "kinds.stacked", "kinds.conv", "loop"}


def test_every_kind_has_its_trainer_in_the_package():
    from simulation.provenance import trainer_root
    from simulation.runs import KINDS

    for kind in KINDS.values():
        root = trainer_root(kind.trainer)
        assert root is not None and PACKAGE.joinpath(*root.split(".")).with_suffix(".py").is_file(), kind.trainer
    assert trainer_root("elsewhere.module:run") is None and trainer_root("simulation.a.b:run") == "a.b"


@pytest.mark.parametrize("name, edit", [
    ("kinds/mlp.py", _replace("SWEEP_POINTS = 256  #", "SWEEP_POINTS = 256  # (comment edited)")),
    ("core/record.py", lambda text: text.replace('"""Recorder:', '"""The recorder:', 1)),  # the module docstring
    pytest.param("loop.py", lambda text: text + "\n\n# a trailing comment\n", marks=pytest.mark.slow),
    ("cache.py", _replace("def cache_dir() -> Path:", "def cache_dir() -> Path:  # where traces live\n    pass\n\n\ndef _cache_dir() -> Path:")),
    pytest.param("experiments.py", lambda text: text + "\nEXTRA = 1\n", marks=pytest.mark.slow),  # digested field by field
])
def test_comments_docstrings_and_modules_that_cannot_change_a_number_keep_the_digest(tmp_path, name, edit):
    assert _digests(_edited_copy(tmp_path, name, edit)) == (RunConfig().digest(), TransformerConfig().digest())


def test_changing_the_trainer_of_a_kind_changes_the_digests_of_that_kind_only(tmp_path):
    """The trainer is chosen in simulation/runs.py (not hashed as source): its id is hashed by itself."""
    edit = _replace('trainer="simulation.kinds.mlp:run"', 'trainer="simulation.kinds.conv:run"')
    mlp, transformer = _digests(_edited_copy(tmp_path, "runs.py", edit))
    assert mlp != RunConfig().digest() and transformer == TransformerConfig().digest()


def test_registering_another_trainer_for_a_kind_changes_its_digest():
    import dataclasses

    from simulation.runs import kind_of, register_kind

    config, kind = RunConfig(), kind_of(RunConfig())
    before = config.digest()
    try:
        register_kind(dataclasses.replace(kind, trainer="simulation.kinds.identity_fit:run"))
        assert config.digest() != before and TransformerConfig().digest() == _digests(PACKAGE.parent)[1]
    finally:
        register_kind(kind)
    assert config.digest() == before


def test_every_module_is_either_hashed_or_listed_as_not_run_shaping():
    names = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    hashed = {p.relative_to(PACKAGE).as_posix() for p in run_sources()}
    assert hashed == names - NOT_RUN_SHAPING and {"kinds/mlp.py", "core/record.py", "loop.py", "models.py"} <= hashed
    assert code_fingerprint("x = 1  # one\n") == code_fingerprint('"""doc"""\nx = 1\n') != code_fingerprint("x = 2\n")


def test_the_memo_gives_a_cold_computations_digests_and_is_read_only_for_the_bytes_it_was_made_from(tmp_path):
    """simulation.provenance keeps each file's fingerprint and imports in a memo keyed by its bytes, so the next
    process (a scene's render worker) does not parse the package again: the digests it gives equal a cold
    computation's, a process that finds the memo parses nothing, and an edited file is parsed again."""
    root = _edited_copy(tmp_path, "README_probe.txt", lambda _: "not python\n")
    memo = root / "simulation" / "__pycache__" / f"provenance.{sys.implementation.cache_tag}.json"
    official = (RunConfig().digest(), TransformerConfig().digest())
    assert not memo.exists() and _digests(root) == official and memo.is_file()
    no_parsing = "import simulation.provenance as p; p.code_fingerprint = p.package_imports = None; " + PROBE
    warm = subprocess.run([sys.executable, "-c", no_parsing], cwd=root, capture_output=True, text=True,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert warm.returncode == 0, warm.stderr  # None is not callable: any parse would have failed
    assert tuple(warm.stdout.split()) == official
    mlp = root / "simulation" / "kinds" / "mlp.py"  # the same edit as above, now with the memo present
    mlp.write_text(mlp.read_text().replace("SWEEP_POINTS = 256", "SWEEP_POINTS = 255", 1))
    edited = _digests(root)
    assert edited[0] != official[0] and edited[1] == official[1]
    mlp.write_text(mlp.read_text().replace("SWEEP_POINTS = 255", "SWEEP_POINTS = 256", 1))
    assert _digests(root) == official  # both versions are in the memo now, each under its own bytes


@pytest.mark.parametrize("spoil", ["garbage", "wrong types", "no folder"])
def test_a_memo_that_cannot_be_read_or_written_is_ignored(tmp_path, spoil):
    root = _edited_copy(tmp_path, "README_probe.txt", lambda _: "not python\n")
    cache = root / "simulation" / "__pycache__"
    if spoil == "no folder":
        cache.write_text("a file where the folder would be\n")  # mkdir fails: nothing is written, nothing breaks
    else:
        cache.mkdir()
        memo = cache / f"provenance.{sys.implementation.cache_tag}.json"
        memo.write_text("{not json" if spoil == "garbage" else
                        '{"fingerprints": {"x": 1}, "imports": ["a"], "other": null}')
    assert _digests(root) == (RunConfig().digest(), TransformerConfig().digest())
