"""Frame-comparison tests of the data-driven scenes on small committed traces, each with a tamper twin.

Example::

    pytest tests/test_frames.py                 # compare the last frame of each scene
    pytest tests/test_frames.py --set_test      # (re)write tests/control_data/scenes/*.npz

Each scene reads the tiny traces under ``tests/data/<experiment>/`` (made by
``tests/data/make_traces.py``) through ``LectureScene.trace_files``, so the frames depend on those
files only. The last frame (854x480) of the scene's one shared dry run (tests/dry_run.py: built_scene, under
Manim's last-frame test settings) is compared with the committed control frame by Manim's frame tester, with
the tolerances of its ``frames_comparison``. The ``*_fails_on_tampered_trace`` twin changes one recorded array and shows that the same
comparison then raises: the frame really is drawn from the trace. Every scene is compared in both
themes (``<name>.npz`` dark, ``<name>_light.npz`` light), each with its tamper twin.
"""

from __future__ import annotations

from pathlib import Path

import json

import av
import numpy as np
import pytest
from manim import tempconfig

from scenes.add_norm import TransformerAddNorm
from scenes.chain_rule import ChainRuleExploding, ChainRuleProduct
from scenes.layernorm import PostLNvsPreLN
from scenes.loss_landscape import LossLandscape
from scenes.hyper_connections import HyperConnections
from scenes.plus_one import GradientPlusOne
from scenes.sigmoid import SigmoidDerivative
from scenes.summary import Summary
from scenes.degradation import Degradation
from scenes.depth_sweep import DepthSweep, DepthSweepConv
from scenes.gradient_flow import GradientFlowOverTraining
from scenes.highway import IdentityHighway
from scenes.paths import PathEnsemble
from scenes.residual_response import ResidualResponse
from scenes.shattered import ShatteredGradients
from scenes.shortcut_scale import ShortcutScale
from scenes.norm_free import NormFree
from simulation.runkeys import RunKey
from simulation.summary import tail_mean
from simulation.trace import Trace

from dry_run import ZH_DEFAULT, built_scene, dry_run, scene_group
from seed_numbers import SEED_NUMBERS, base_runs
from frame_checks import (assert_fails_when_tampered, assert_numbers_match, committed_traces, make_frame_test,  # noqa: F401
                          same_cairo_as_control_data, scene_variant, twin_params)

__module_test__ = "scenes"  # control data lives in tests/control_data/scenes/


def checkerboard(values: np.ndarray) -> np.ndarray:
    """Every other grid point of a loss slice tripled: a rugged, non-convex surface (LossLandscape)."""
    return values * np.where(np.indices(values.shape).sum(0) % 2, 3.0, 1.0)


def times_two(values: np.ndarray) -> np.ndarray:
    return values * 2


def first_block_times_two(values: np.ndarray) -> np.ndarray:
    """Only block 0 doubled: ratios between blocks change (a uniform scale would cancel in them)."""
    out = values.copy()
    out[:, 0] *= 2
    return out


def last_block_times_two(values: np.ndarray) -> np.ndarray:
    """Only the last block (layer) doubled: the output end of a first/last ratio."""
    out = values.copy()
    out[:, -1] *= 2
    return out


# -- the numbers a scene shows are the trace's numbers -----------------------------------------
# Each function below recomputes, straight from the arrays, every number its scene must report.

def residual_response_numbers(traces: dict[RunKey, Trace]) -> dict[str, float]:
    base = base_runs(traces)
    out = {"step": float(base["residual"]["step"][-1]), **SEED_NUMBERS["ResidualResponse"](traces)}
    for name in ("plain", "residual"):
        t = base[name]
        x = t["input_norm"].astype(np.float64)
        f = t["branch_norm"].astype(np.float64)
        for l in range(x.shape[1]):
            out[f"{name}.block.{l}.ratio_step0"] = f[0, l] / x[0, l]
            out[f"{name}.block.{l}.ratio"] = f[-1, l] / x[-1, l]
            out[f"{name}.block.{l}.branch_std"] = float(t["branch_std"][-1, l])
        out[f"{name}.final_error"] = float(t["error"][-1])
        out[f"{name}.mean_ratio"] = float(np.mean(f[-1] / x[-1]))
        out[f"{name}.mean_branch_std"] = float(np.mean(t["branch_std"][-1].astype(np.float64)))
    return out


def degradation_numbers(traces: dict[RunKey, Trace]) -> dict[str, float]:
    """Trailing means over a tenth of the run, drawn at <= 100 steps; the last one is tail_mean. The runs of
    the other seeds: their final errors and the seed counts."""
    out, final, by_seed = {}, {}, {}
    first = next(iter(traces)).seed
    for key, t in traces.items():
        name = key.name
        by_seed.setdefault(name, {})[key.seed] = tail_mean(t["error_curve"])
        if key.seed != first:
            continue
        curve = t["error_curve"].astype(np.float64)
        window = max(1, round(len(curve) * 0.1))
        for i in np.unique(np.linspace(0, len(curve) - 1, min(100, len(curve))).round().astype(int)):
            out[f"{name}.step.{i}.smoothed_error"] = float(curve[max(0, i - window + 1): i + 1].mean())
        final[name] = tail_mean(curve)
        out[f"{name}.final_error_pct"] = 100 * final[name]
    for name, errors in by_seed.items():
        out.update({f"{name}.seed.{seed}.final_error_pct": 100 * e for seed, e in errors.items()})
    for arch in ("plain", "residual"):
        by_depth = sorted((t.run_config.depth, name) for name, t in base_runs(traces).items()
                          if t.run_config.arch == arch)
        out[f"{arch}.shallowest_final_error_pct"] = 100 * final[by_depth[0][1]]
        out[f"{arch}.deepest_final_error_pct"] = 100 * final[by_depth[-1][1]]
        deep, shallow = by_seed[by_depth[-1][1]], by_seed[by_depth[0][1]]
        out[f"{arch}.deeper_worse.seeds"] = sum(deep[s] > shallow[s] + 0.01 for s in deep)
        out[f"{arch}.deeper_worse.of"] = len(deep)
    return out


def path_ensemble_numbers(traces: dict[RunKey, Trace]) -> dict[str, float]:
    base = base_runs(traces)
    fraction = base["residual"]["path_length_fraction"].astype(np.float64)
    depth = base["residual"].run_config.depth
    out = {"depth": depth, "paths": 2.0 ** depth, "mean_path_length": float(np.arange(depth + 1) @ fraction),
           **SEED_NUMBERS["PathEnsemble"](traces)}
    out.update({f"path_length.{k}.fraction": v for k, v in enumerate(fraction)})
    for name in ("plain", "residual"):
        lesion = base[name]["lesion_test_error"].astype(np.float64)
        intact = float(base[name]["final_test_error"])
        out.update({f"{name}.block.{l}.lesion_test_error": v for l, v in enumerate(lesion)})
        out[f"{name}.intact_test_error_pct"] = 100 * intact
        out[f"{name}.mean_lesion_increase_pct"] = 100 * (np.nanmean(lesion) - intact)
    return out


def shattered_gradients_numbers(traces: dict[RunKey, Trace]) -> dict[str, float]:
    out = SEED_NUMBERS["ShatteredGradients"](traces)
    deepest, base = {}, base_runs(traces)
    for name, t in base.items():
        g = t["input_grad"][0].astype(np.float64)
        out[f"{name}.input_grad_scale"] = float(np.abs(g - g.mean()).max())
        out[f"{name}.autocorr_lag1"] = float(t["input_grad_autocorr"][0, 1])
        arch, depth = t.run_config.arch, t.run_config.depth
        if depth >= deepest.get(arch, (-1, ""))[0]:
            deepest[arch] = (depth, name)
    for arch, (_, name) in deepest.items():
        out.update({f"{name}.autocorr.{k}": float(v) for k, v in enumerate(base[name]["input_grad_autocorr"][0, :16])})
        out[f"deepest.{arch}.autocorr_lag1"] = float(base[name]["input_grad_autocorr"][0, 1])
    return out


# scene name -> (scene, expected numbers, arrays a twin multiplies by 3 in one run)
NUMBER_CASES = {
    "ResidualResponse": (ResidualResponse, residual_response_numbers, ("branch_std", "error")),
    "Degradation": (Degradation, degradation_numbers, ("error_curve",)),
    "PathEnsemble": (PathEnsemble, path_ensemble_numbers, ("lesion_test_error", "final_test_error")),
    "ShatteredGradients": (ShatteredGradients, shattered_gradients_numbers, ("input_grad", "input_grad_autocorr")),
}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xdist_group(scene_group(case[0], "en")))
                                  for name, case in NUMBER_CASES.items()])
def test_numbers_equal_the_trace(name):
    scene, expected, _ = NUMBER_CASES[name]
    files = committed_traces(scene)
    built = built_scene(scene, "en", files)  # the build tests/test_scenes_all.py checks (dark theme)
    assert_numbers_match(built.numbers["values"], expected({k: Trace.load(v) for k, v in files.items()}))


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xdist_group(scene_group(case[0], "en")))
                                  for name, case in NUMBER_CASES.items()])
def test_numbers_equal_the_trace_when_tampered(name, tmp_path):
    """The twin: a scene fed a tripled array reports other numbers, so the check above can fail."""
    scene, expected, keys = NUMBER_CASES[name]
    files = dict(committed_traces(scene))
    traces = {k: Trace.load(v) for k, v in files.items()}
    run = sorted(k for k in files if k.seed == next(iter(files)).seed)[-1]  # a run of the seed drawn in full
    for key in keys:
        traces[run].arrays[key] = traces[run].arrays[key] * 3
    files[run] = str(traces[run].save(tmp_path / "tampered.npz"))
    untampered = expected({k: Trace.load(v) for k, v in committed_traces(scene).items()})
    built = dry_run(scene_variant(scene, files), tmp_path)
    with pytest.raises(AssertionError):
        assert_numbers_match(built.numbers["values"], untampered)
    assert_numbers_match(built.numbers["values"], expected(traces))


@pytest.mark.slow
@pytest.mark.parametrize("name", NUMBER_CASES)
def test_rendered_numbers_json_equals_the_trace(name, tmp_path):
    """A real 480p15 render: the JSON beside the video holds the trace's numbers; the video's size,
    frame rate and length are what Manim was asked for."""
    scene, expected, _ = NUMBER_CASES[name]
    files = committed_traces(scene)
    settings = {"quality": "low_quality", "media_dir": str(tmp_path), "progress_bar": "none", "verbosity": "WARNING"}
    with tempconfig(settings):
        built = scene_variant(scene, files)()
        built.render()
        movie = Path(built.renderer.file_writer.movie_file_path)
    written = json.loads(movie.with_suffix(".numbers.json").read_text())
    assert written["scene"] == scene.__name__ and written["lang"] == "en"
    assert_numbers_match(written["values"], expected({k: Trace.load(v) for k, v in files.items()}))
    with av.open(str(movie)) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height) == (854, 480)
        assert float(stream.average_rate) == pytest.approx(15, abs=0.01)
        duration = float(container.duration / av.time_base)
    assert duration == pytest.approx(built.renderer.time, abs=0.2)
    assert 15 <= duration <= 40, "a lecture clip lasts 15-40 s"


# -- Every trace-driven scene: (scene, control name, run, array, tamper) ------------------------------
# HighwayDenseNetResidual is left out: it draws counts computed from the traces' width and depth only.
FRAME_SCENES = [
    (IdentityHighway, "identity_highway", RunKey("residual", 0), "branch_norm", times_two),
    (SigmoidDerivative, "sigmoid_derivative", RunKey("plain", 0), "out_grad_norm", first_block_times_two),
    (ChainRuleProduct, "chain_rule_product", RunKey("plain", 0), "out_grad_norm", first_block_times_two),
    (ChainRuleExploding, "chain_rule_exploding", RunKey("plain_gain3", 0), "out_grad_norm", first_block_times_two),
    (GradientPlusOne, "gradient_plus_one", RunKey("plain", 0), "grad_norm", first_block_times_two),
    (Degradation, "degradation", RunKey("plain_d6", 0), "error_curve", lambda v: v * 0.5),
    (ResidualResponse, "residual_response", RunKey("residual", 0), "branch_std", times_two),
    (TransformerAddNorm, "transformer_add_norm", RunKey(TransformerAddNorm.shown_run, 0), "branch_norm", times_two),
    (PostLNvsPreLN, "post_ln_vs_pre_ln", RunKey("post_ln", 0), "init_ffn_grad_norm", last_block_times_two),
    (PathEnsemble, "path_ensemble", RunKey("residual", 0), "lesion_test_error", times_two),
    (ShatteredGradients, "shattered_gradients", RunKey("residual_d6", 0), "input_grad",
     lambda v: v + np.sin(np.arange(v.shape[-1]))),
    (Summary, "summary", RunKey("plain", 0), "loss", times_two),
    (GradientFlowOverTraining, "gradient_flow_over_training", RunKey("residual_sigmoid_d8", 0), "out_grad_norm",
     lambda v: v * np.where(np.arange(v.shape[1]) < v.shape[1] // 2, 1e-3, 1.0)),  # input half three decades dimmer
    (DepthSweep, "depth_sweep", RunKey("mlp_plain_d8", 2), "error_curve", lambda v: v * 0.5),
    (DepthSweepConv, "depth_sweep_conv", RunKey("conv_plain_d14", 1), "error_curve", lambda v: v * 0.5),
    (ShortcutScale, "shortcut_scale", RunKey("scale0p9", 0), "out_grad_norm", first_block_times_two),
    (NormFree, "norm_free", RunKey("rezero", 0), "loss_curve", lambda v: v * 0.5),
    (LossLandscape, "loss_landscape", RunKey("plain_d14", 0), "loss_grid", checkerboard),
    (HyperConnections, "hyper_connections", RunKey("hc", 0), "composite_row_gain", times_two),
]
for _scene, _name, _run, _key, _tamper in FRAME_SCENES:
    globals()[f"test_{_name}"] = make_frame_test(_scene, _name)  # control data: <name>.npz


# The tamper twins prove that a frame comparison can fail. The default run keeps the twins of the four scenes that
# together use every widget (TWIN_DEFAULT, also the light theme's default set below); the other twins, and every light-theme twin, are slow: CI runs them
# (.ci/run), the default run still compares every English frame.
TWIN_DEFAULT = {"chain_rule_product", "degradation", "path_ensemble", "summary"}


@pytest.mark.parametrize(("scene", "name", "run", "key", "tamper"),
                         twin_params(FRAME_SCENES, slow={c[1] for c in FRAME_SCENES} - TWIN_DEFAULT))
def test_frame_fails_on_tampered_trace(request, tmp_path, scene, name, run, key, tamper):
    assert_fails_when_tampered(request, tmp_path, scene, name, run=run, key=key, tamper=tamper)


# -- The light theme (--theme light): the same table, control data <name>_light.npz ----------------------
# Four scenes that together use every widget run in the default test run; the rest are marked slow.
LIGHT_DEFAULT = TWIN_DEFAULT
LIGHT_SCENES = twin_params(FRAME_SCENES, suffix="_light", slow={c[1] for c in FRAME_SCENES})  # twins: all slow
for _scene, _name, _run, _key, _tamper in FRAME_SCENES:
    _test = make_frame_test(_scene, f"{_name}_light", theme="light")
    globals()[f"test_{_name}_light"] = _test if _name in LIGHT_DEFAULT else pytest.mark.slow(_test)


@pytest.mark.parametrize(("scene", "name", "run", "key", "tamper"), LIGHT_SCENES)
def test_light_frame_fails_on_tampered_trace(request, tmp_path, scene, name, run, key, tamper):
    assert_fails_when_tampered(request, tmp_path, scene, f"{name}_light", run=run, key=key, tamper=tamper,
                               theme="light")


def test_light_and_dark_control_frames_differ():
    """The themes really are applied: each light control frame has the light background in its corner,
    each dark one the dark background, and no pair of frames is equal."""
    from scenes.kit.theme import THEMES

    folder = Path(__file__).parent / "control_data" / "scenes"
    for _, name, *_ in FRAME_SCENES:
        dark, light = (np.load(folder / f"{stem}.npz")["frame_data"] for stem in (name, f"{name}_light"))
        assert dark.shape == light.shape and not np.array_equal(dark, light), name
        for frame, theme in ((dark, "dark"), (light, "light")):
            corner = frame[0, 2, 2, :3] / 255  # frames are stored as [1, height, width, RGBA]
            expected = np.array(THEMES[theme]["background"].to_rgb())
            assert np.abs(corner - expected).max() < 2 / 255, (name, theme)


# -- the issue-10 scenes in Chinese too: same traces, zh strings, their own control frames --------------------
# The seed-spread scenes' Chinese twins tamper another seed than the one drawn in full: the dots and thin
# lines of the other seeds are drawn from their own traces.
ZH_FRAME_SCENES = [m for m in FRAME_SCENES if m[0] in (GradientFlowOverTraining, DepthSweep, DepthSweepConv)] + [
    (ShortcutScale, "shortcut_scale", RunKey("scale1", 2), "error_curve", lambda v: v * 0.25),
    (NormFree, "norm_free", RunKey("standard", 0), "act_norm", times_two),
    (ResidualResponse, "residual_response", RunKey("residual", 2), "branch_std", times_two),
    (PathEnsemble, "path_ensemble", RunKey("plain", 1), "lesion_test_error", lambda v: v * 0.5),
    (ShatteredGradients, "shattered_gradients", RunKey("residual_d6", 2), "input_grad_autocorr", lambda v: v * -1.0),
    (PostLNvsPreLN, "post_ln_vs_pre_ln", RunKey("pre_ln", 1), "loss_curve", lambda v: v * 0.5),
    (LossLandscape, "loss_landscape", RunKey("plain_d14", 1), "loss_grid", checkerboard),  # its "k of N seeds"
    (HyperConnections, "hyper_connections", RunKey("mhc", 2), "composite_row_gain", times_two),  # its "k of N seeds"
]
# Their English frames run by default; the Chinese ones added with the seed spread (and DepthSweepConv's, whose
# English frame runs by default) are slow, so the default run stays fast.
ZH_SLOW = {"residual_response", "path_ensemble", "shattered_gradients", "post_ln_vs_pre_ln", "depth_sweep_conv",
           "shortcut_scale", "norm_free", "loss_landscape", "hyper_connections"} | {
    name for scene, name, *_ in ZH_FRAME_SCENES if scene.__name__ not in ZH_DEFAULT}  # dry_run.ZH_DEFAULT
for _scene, _name, _run, _key, _tamper in ZH_FRAME_SCENES:
    _test = make_frame_test(_scene, f"{_name}_zh", lang="zh")  # control: <name>_zh.npz
    globals()[f"test_{_name}_zh"] = pytest.mark.slow(_test) if _name in ZH_SLOW else _test


# Every Chinese twin is slow: the Chinese frames compared by default read the same tampered-array checks as the English
# ones, whose twins (TWIN_DEFAULT) run by default.
@pytest.mark.parametrize(("scene", "name", "run", "key", "tamper"),
                         twin_params(ZH_FRAME_SCENES, "zh", slow={c[1] for c in ZH_FRAME_SCENES}))
def test_frame_fails_on_tampered_trace_zh(request, tmp_path, scene, name, run, key, tamper):
    assert_fails_when_tampered(request, tmp_path, scene, f"{name}_zh", run=run, key=key, tamper=tamper, lang="zh")
