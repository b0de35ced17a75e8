"""The claim tests' shared trace cache (tests/support.py: shared_traces): a run two claims need is trained once per
session, also when the other xdist worker is training it right now. Tiny runs: well under a second each."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from filelock import FileLock

import support
from simulation import cache
from cli.params import build_runs  # parses string values as --set does
from simulation.runkeys import RunKey

TINY = {"steps": 20, "depth": 3}


@pytest.fixture
def shared(tmp_path, monkeypatch):
    """An empty shared cache and a process that has read nothing from it yet."""
    monkeypatch.setenv(support.SHARED_CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(support, "_TRACES", {})
    return tmp_path


def no_training(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(cache, "run_sweep", refuse)
    monkeypatch.setattr(cache, "train", refuse)


def test_a_run_two_claims_share_is_trained_once(shared, monkeypatch, isolated_cache):
    first = support.cached_traces("chain_rule", **TINY, seeds="0,1")
    digests = {c.digest() for c in build_runs("chain_rule", {**TINY, "seeds": "0,1"}).values()}
    assert {p.stem for p in shared.glob("*.npz")} == digests  # stored in the shared cache ...
    assert not list(isolated_cache.glob("*.npz"))  # ... not in the test's own
    monkeypatch.setattr(support, "_TRACES", {})  # another process (the other xdist worker, CI's slow run)
    no_training(monkeypatch)
    again = support.trained_at_seed("chain_rule", 1, **TINY)
    assert set(again) == {"plain", "residual"}
    for name, trace in again.items():
        assert np.array_equal(trace["grad_norm"], first[RunKey(name, 1)]["grad_norm"])


def test_a_run_the_other_worker_is_training_is_waited_for_not_trained_again(shared, monkeypatch):
    config = next(iter(build_runs("chain_rule", {**TINY, "seed": 0}).values()))
    digest = config.digest()
    other = FileLock(str(shared / f"{digest}.lock"))
    other.acquire()  # the other worker holds the run's lock: it is training it
    result = {}
    reader = threading.Thread(target=lambda: result.update(traces=support.shared_traces([config])))
    reader.start()
    reader.join(0.5)
    assert reader.is_alive() and not result, "did not wait for the run being trained elsewhere"
    monkeypatch.setenv("RESIDUAL_CACHE", str(shared))
    trained = cache.get_trace(config, progress=False)  # what the other worker stores before it lets go
    no_training(monkeypatch)
    other.release()
    reader.join(60)
    assert not reader.is_alive()
    assert np.array_equal(result["traces"][0]["grad_norm"], trained["grad_norm"])


# -- the session's formulas (tests/dry_run.tex_to_svg_shared): one LaTeX compile per formula, not one per worker ----

def _formula_in(tex_dir, expression: str):
    from manim import MathTex, tempconfig

    with tempconfig({"tex_dir": str(tex_dir), "verbosity": "ERROR"}):
        return MathTex(expression)


def _counting_compiles(monkeypatch) -> list:
    from manim.utils import tex_file_writing

    compiled, compile_tex = [], tex_file_writing.compile_tex

    def counting(*args, **kwargs):
        compiled.append(args[0])
        return compile_tex(*args, **kwargs)

    monkeypatch.setattr(tex_file_writing, "compile_tex", counting)
    return compiled


def test_a_formula_another_worker_compiled_is_copied_not_compiled_again(shared, tmp_path, monkeypatch):
    """Two processes' own tex_dirs (as two pytest-xdist workers have): the second reads the SVG the first
    published, compiles nothing, and draws the same glyphs."""
    import dry_run  # noqa: F401 (installs tex_to_svg_shared)

    compiled = _counting_compiles(monkeypatch)
    first = _formula_in(tmp_path / "worker-a", r"x_{l+1} = x_l + F(x_l) \quad (\mathrm{shared})")
    assert len(compiled) == 1 and [p.name for p in (shared / "manim-tex").iterdir()] == [compiled[0].with_suffix(".svg").name]
    second = _formula_in(tmp_path / "worker-b", r"x_{l+1} = x_l + F(x_l) \quad (\mathrm{shared})")
    assert len(compiled) == 1, "compiled again"
    pairs = list(zip(first.family_members_with_points(), second.family_members_with_points(), strict=True))
    assert pairs and all(np.array_equal(a.points, b.points) for a, b in pairs)


def test_without_the_session_folder_each_process_compiles_its_own(tmp_path, monkeypatch):
    """The twin: outside a test session (no shared folder) the second process compiles the formula again, so the
    count above can fail."""
    import dry_run  # noqa: F401

    monkeypatch.delenv(support.SHARED_CACHE_ENV, raising=False)
    compiled = _counting_compiles(monkeypatch)
    for worker in ("worker-a", "worker-b"):
        _formula_in(tmp_path / worker, r"x_{l+1} = x_l + F(x_l) \quad (\mathrm{alone})")
    assert len(compiled) == 2
