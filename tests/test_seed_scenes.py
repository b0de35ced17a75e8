"""Seeds on the claim scenes ResidualResponse, PathEnsemble, ShatteredGradients and PostLNvsPreLN.

Example::

    pytest tests/test_seed_scenes.py -q -n 0

Each scene in a Manim dry run from the tiny committed traces of seeds 0, 1, 2 (``tests/data/<experiment>/`` and
``seed<k>/``), in both languages: clean layout, 15-40 s, narrated, every seed listed; its per-seed numbers and
"k of n seeds" counts equal those recomputed from the arrays (tests/seed_numbers.py), with a tamper twin that
changes another seed than the one drawn in full. Another seed's missing value is recorded as missing and that
seed is left out of the count; a single seed still builds.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from scenes.layernorm import (RISE, PostLNvsPreLN, final_loss, grad_rises, init_ffn_grad_norm, needs_warmup,
                              seed_verdicts, stack_ratio)
from scenes.paths import PathEnsemble
from scenes.residual_response import ResidualResponse
from scenes.shattered import ShatteredGradients
from support import FULL_LANGS as LANGS
from simulation.experiments import POST_LN, POST_LN_WARMUP, PRE_LN
from simulation.runkeys import RunKey, read_key_text
from simulation.trace import Trace

from data.make_traces import tiny_trace_files, tiny_trace_files_with_seeds
from dry_run import built_scene, dry_run, scene_group, scene_lang_params
from seed_numbers import SEED_NUMBERS, by_seed

SCENES = [ResidualResponse, PathEnsemble, ShatteredGradients, PostLNvsPreLN]
# scene -> (a run of another seed, an array the seed spread draws, the claim count it changes, a value index)
OTHER_SEED = {
    "ResidualResponse": (RunKey("plain", 2), "branch_std", "residual.smaller_branch_std", (-1, 0)),
    "PathEnsemble": (RunKey("plain", 1), "lesion_test_error", "residual.more_robust", (0,)),
    "ShatteredGradients": (RunKey("residual_d6", 2), "input_grad_autocorr", "residual.more_correlated", (0, 1)),
    "PostLNvsPreLN": (RunKey("post_ln", 1), "loss_curve", "warmup_helps", (-1,)),
}
# PostLNvsPreLN's dry run is the slowest (about three times the others'): its extra builds run in the slow set.
EXTRA_BUILDS = [pytest.param(scene, id=scene.__name__, marks=pytest.mark.slow if scene is PostLNvsPreLN else ())
                for scene in SCENES]
TAMPER = {  # the twin: a change to that run that a correct scene must report
    "ResidualResponse": lambda v: v * 3.0,
    "PathEnsemble": lambda v: v * 0.1,
    "ShatteredGradients": lambda v: -v,
    "PostLNvsPreLN": lambda v: v * 0.25,
}


def seeded_files(scene: type) -> dict[RunKey, str]:
    files = tiny_trace_files_with_seeds(scene.experiment)
    assert files is not None and any(k.seed == 2 for k in files), \
        f"run python tests/data/make_traces.py --seeds {scene.experiment}"
    return files


def variant(scene: type, lang: str = "en", files: dict | None = None) -> type:
    return type(scene.__name__, (scene,), {"lang": lang, "check_layout": True,
                                           "trace_files": files or seeded_files(scene)})


@pytest.fixture(scope="module")
def built():
    """``built(scene, lang)``: the seeded build, once per process (dry_run.built_scene; tests/test_frames.py
    compares its last frame)."""

    def get(scene: type, lang: str):
        return built_scene(scene, lang, seeded_files(scene))

    return get


def loaded(files: dict[RunKey, str]) -> dict[RunKey, Trace]:
    return {k: Trace.load(v) for k, v in files.items()}


def assert_seed_numbers(shown: dict, expected: dict) -> None:
    """Every per-seed value and count is there and equal; the scene records no per-seed key of its own."""
    seed_keys = {k for k in shown if ".seed." in k or k.endswith((".seeds", ".of"))}
    assert seed_keys == set(expected), f"extra {seed_keys - set(expected)}, missing {set(expected) - seed_keys}"
    for key, value in expected.items():
        assert shown[key] == pytest.approx(float(value), rel=1e-9, abs=1e-12), key


@pytest.mark.parametrize("scene,lang", scene_lang_params(SCENES, LANGS))
def test_seed_scene_layout_length_and_narration(scene, lang, built):
    s = built(scene, lang)
    assert s.layout_log == []
    assert s.numbers["seeds"] == [0, 1, 2]
    assert 15 <= s.renderer.time <= 40, f"{scene.__name__} lasts {s.renderer.time:.1f} s"
    captions = s.renderer.file_writer.subcaptions
    assert len(captions) >= 3 and all(c.content for c in captions)
    if lang == "zh":
        assert any("\u4e00" <= ch <= "\u9fff" for c in captions for ch in c.content)


@pytest.mark.parametrize("scene", [pytest.param(s, id=s.__name__, marks=pytest.mark.xdist_group(scene_group(s, "en")))
                                   for s in SCENES])
def test_every_seed_value_and_count_equal_the_traces(scene, built):
    s = built(scene, "en")
    expected = SEED_NUMBERS[scene.__name__](loaded(seeded_files(scene)))
    assert expected, "nothing to compare"
    assert_seed_numbers(s.numbers["values"], expected)
    # the numbers JSON names every run of every seed as text, which the one reader reads back as the run's key
    files = seeded_files(scene)
    first = next(iter(files)).seed
    traces = s.numbers["traces"]
    assert {read_key_text(text, first): digest for text, digest in traces.items()} == {
        key: Trace.load(path).meta.digest for key, path in files.items()}

@pytest.mark.parametrize("scene", [pytest.param(scene, id=scene.__name__,
                                               marks=() if scene.__name__ == "ResidualResponse" else pytest.mark.slow)
                                  for scene in SCENES])  # one twin by default; the others in CI's slow set
def test_every_seed_value_when_another_seed_is_tampered(scene, built, tmp_path):
    """The twin: another seed's run changed; the scene reports the change (and not the clean numbers)."""
    run, key, _, _ = OTHER_SEED[scene.__name__]
    files = dict(seeded_files(scene))
    trace = Trace.load(files[run])
    trace.arrays[key] = TAMPER[scene.__name__](trace.arrays[key].astype(np.float64)).astype(trace.arrays[key].dtype)
    files[run] = str(trace.save(tmp_path / "tampered.npz"))
    s = dry_run(variant(scene, files=files), tmp_path / "media")
    with pytest.raises(AssertionError):
        assert_seed_numbers(s.numbers["values"], SEED_NUMBERS[scene.__name__](loaded(seeded_files(scene))))
    assert_seed_numbers(s.numbers["values"], SEED_NUMBERS[scene.__name__](loaded(files)))


@pytest.mark.parametrize("scene", EXTRA_BUILDS)
def test_another_seeds_missing_value_is_missing_and_not_counted(scene, tmp_path):
    run, key, count, index = OTHER_SEED[scene.__name__]
    files = dict(seeded_files(scene))
    trace = Trace.load(files[run])
    values = np.array(trace.arrays[key], dtype=np.float64)
    assert np.isfinite(values[index])
    values[index] = np.nan
    trace.arrays[key] = values
    files[run] = str(trace.save(tmp_path / "damaged.npz"))
    s = dry_run(variant(scene, files=files), tmp_path / "media")
    numbers = json.loads(json.dumps(s.numbers))
    seed = run.seed
    assert any(f".seed.{seed}." in k for k in numbers["missing"]), numbers["missing"]
    assert all(numbers["values"][k] is None for k in numbers["missing"])
    assert numbers["values"][f"{count}.of"] == 2, "a seed whose value is missing is counted"
    assert s.layout_log == []


@pytest.mark.slow  # the default run builds every scene from one seed already (tests/test_scenes_all.py)
@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.__name__)
def test_a_single_seed_builds_without_spread(scene, tmp_path):
    s = dry_run(variant(scene, files=tiny_trace_files(scene.experiment)), tmp_path)
    assert s.layout_log == [] and len(s.numbers["seeds"]) == 1
    values = s.numbers["values"]
    assert not any(".seed." in k and ".block." in k for k in values)  # no dots: there is no other seed
    assert all(values[k] == 1 for k in values if k.endswith(".of"))


@pytest.mark.parametrize(("args", "runs"), [
    (["ResidualResponse"], 6),  # plain + residual, seeds 0, 1, 2 (the scene's default)
    (["ResidualResponse", "--set", "seeds=4"], 2),  # the user's seeds win over the scene's
    (["DepthSweep"], 24),  # only the MLPs it draws (models=mlp): 4 depths x 2 x 3 seeds, no conv net
])
def test_render_check_counts_the_runs_the_scene_reads(args, runs, tmp_path):
    """The command line trains (and --check counts) the runs of the scene's own experiment defaults, the
    runs its setup then reads: none is left for the scene to train on its own, none trained for nothing."""
    from click.testing import CliRunner

    from render import cli

    result = CliRunner().invoke(cli, ["render", *args, "--check", "--output", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert f"{runs} of {runs} traces would be trained" in result.output


# -- PostLNvsPreLN's verdicts as plain functions (no Manim) ----------------------------------------------------

def test_post_ln_verdicts_on_the_tiny_traces_and_by_hand():
    """grad_rises / needs_warmup / seed_verdicts on every committed seed equal seed_numbers' recomputation from the
    arrays; then a holding, a failing and a no-verdict case of each claim, and a seed lacking a run is skipped."""
    files = seeded_files(PostLNvsPreLN)
    traces = {key: Trace.load(path) for key, path in files.items()}
    expected, seeds = SEED_NUMBERS["PostLNvsPreLN"](traces), by_seed(traces)
    ratios, finals = {POST_LN: {}, PRE_LN: {}}, {POST_LN: {}, POST_LN_WARMUP: {}, PRE_LN: {}}
    for seed, runs in seeds.items():
        stack = "decoder" if runs[POST_LN].run_config.arch == "encoder_decoder" else "encoder"
        for name in ratios:
            ratios[name][seed] = stack_ratio(runs[name], init_ffn_grad_norm(runs[name]), stack)
            assert ratios[name][seed] == pytest.approx(expected[f"{name}.seed.{seed}.last_over_first"], rel=1e-12)
        for name in finals:
            finals[name][seed] = final_loss(runs[name])
            assert finals[name][seed] == pytest.approx(expected[f"{name}.seed.{seed}.final_loss"], rel=1e-12)
    rises, warms = seed_verdicts(ratios, grad_rises), seed_verdicts(finals, needs_warmup)
    assert len(rises) == len(warms) == len(seeds) >= 3
    assert (sum(rises), len(rises)) == (expected["post_ln.grad_rise.seeds"], expected["post_ln.grad_rise.of"])
    assert (sum(warms), len(warms)) == (expected["warmup_helps.seeds"], expected["warmup_helps.of"])

    assert grad_rises({POST_LN: 2 * RISE, PRE_LN: 1.0}) is True
    assert grad_rises({POST_LN: 0.9 * RISE, PRE_LN: 0.5}) is False  # not above RISE
    assert grad_rises({POST_LN: 3.0, PRE_LN: 4.0}) is False  # Pre-LN rises more
    assert grad_rises({POST_LN: np.nan, PRE_LN: 1.0}) is None
    assert needs_warmup({POST_LN: 5.0, POST_LN_WARMUP: 2.0, PRE_LN: 2.1}) is True
    assert needs_warmup({POST_LN: 5.0, POST_LN_WARMUP: 5.5, PRE_LN: 2.1}) is False  # warm-up did not help
    assert needs_warmup({POST_LN: 5.0, POST_LN_WARMUP: 2.0, PRE_LN: np.nan}) is None
    # a seed lacking a run gives no flag; a missing value gives None (left out of "k of N" by seed_count)
    by_run = {POST_LN: {0: 2 * RISE, 1: 1.0, 2: np.nan}, PRE_LN: {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}}
    assert seed_verdicts(by_run, grad_rises) == [True, False, None]
    assert seed_verdicts({POST_LN: {0: 2 * RISE, 1: 3.0}, PRE_LN: {1: 1.0}}, grad_rises) == [True]
