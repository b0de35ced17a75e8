"""The lecture scenes of issue 4 (Analogies ... Summary): their pure helpers against independent
references, and each scene in a Manim dry run in both languages: clean layout, 15-40 s long, narrated,
and showing exactly the numbers recomputed here from the traces it read.

Example::

    pytest tests/test_scenes_lecture.py -k "costs or Sigmoid"

Data scenes read the tiny committed traces of ``tests/data/<experiment>/`` through ``trace_files`` (one build
per scene and language, shared with tests/test_scenes_all.py); the tamper and config tests copy them into a
private cache under the digest of the tiny configuration, so the scene's cache path is read too. A missing
one is trained once into a temporary folder.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from scenes.analogies import Analogies
from scenes.kit.base import LectureScene
from scenes.chain_rule import ChainRuleExploding
from scenes.compare import KINDS, HighwayDenseNetResidual, branch_params, connection_costs, linear_params
from scenes.highway import IdentityHighway, projection_params
from scenes.nested import TRUTH, NestedFunctionClasses, contains, get_function_classes, nearest_point
from scenes.plus_one import GradientPlusOne
from scenes.sigmoid import SigmoidDerivative, derivative_bound, geometric_mean_factor, sigmoid, sigmoid_prime
from scenes.kit.style import format_number
from support import FULL_LANGS as LANGS
from scenes.summary import Summary
from simulation.cache import trace_path
from simulation.experiments import PLAIN_LARGE_LR
from cli.params import build_runs, experiment_values  # parse string values as --set does
from simulation.runkeys import one_seed
from simulation.models import ResidualBlock, make_branch
from simulation.trace import Trace

from data.make_traces import tiny_overrides, tiny_trace_files, write_tiny_traces
from dry_run import built_scene, dry_run, scene_group, scene_lang_params

# Scenes that animate one step per block: with the tiny traces' 4 blocks they are shorter than in the
# lecture; test_depth_paced_scene_length checks them at the default size (slow: trains the runs).
DEPTH_PACED = {ChainRuleExploding}
SCENES = [Analogies, IdentityHighway, SigmoidDerivative, ChainRuleExploding, GradientPlusOne, NestedFunctionClasses,
          HighwayDenseNetResidual, Summary]


# -- pure helpers against independent references ----------------------------------------------------

def test_sigmoid_prime_matches_autograd_and_peaks_at_a_quarter():
    z = torch.linspace(-8, 8, 1601, dtype=torch.float64, requires_grad=True)
    (reference,) = torch.autograd.grad(torch.sigmoid(z).sum(), z)
    ours = sigmoid_prime(z.detach().numpy())
    np.testing.assert_allclose(ours, reference.numpy(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(sigmoid(z.detach().numpy()), torch.sigmoid(z).detach().numpy(), atol=1e-15)
    assert ours.max() == pytest.approx(0.25, abs=1e-15)
    assert z[int(ours.argmax())].item() == pytest.approx(0.0, abs=1e-12)


def test_derivative_bound_and_geometric_mean():
    np.testing.assert_allclose(derivative_bound(0.25, 4), [1, 0.25, 0.0625, 0.015625], rtol=1e-15)
    factors = np.array([0.1, 0.2, 0.5])  # backward factors between 4 blocks
    product = np.append(np.cumprod(factors[::-1])[::-1], 1.0)  # product[l] = prod of factors from l on
    assert geometric_mean_factor(product) == pytest.approx(math.exp(np.log(factors).mean()), rel=1e-12)
    assert math.isnan(geometric_mean_factor(np.array([0.0, 1.0])))  # an underflow has no mean factor


@pytest.mark.parametrize("width,depth,growth", [(32, 10, 12), (7, 3, 5), (64, 1, 64)])
def test_connection_costs_match_torch_modules(width, depth, growth):
    count = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
    costs = {kind: connection_costs(kind, width, depth, growth) for kind in KINDS}
    # ResNet: the project's own residual block, identity shortcut.
    block = ResidualBlock(width, width, "relu", "none")
    assert costs["residual"]["branch"] == [count(block.branch)] * depth
    assert costs["residual"]["shortcut"] == [count(block.shortcut)] * depth == [0] * depth
    # Highway: the same branch plus the gate T = sigmoid(Linear(width, width)) (Srivastava 2015, Eq. 3).
    gate = nn.Linear(width, width)
    assert costs["highway"]["shortcut"] == [count(gate)] * depth
    assert costs["highway"]["total"] == depth * (count(make_branch(width, width, "relu", "none")) + count(gate))
    # DenseNet: block l reads the concatenation of everything so far and adds `growth` features.
    layers = [make_branch(width + l * growth, growth, "relu", "none") for l in range(depth)]
    h = torch.randn(2, width)
    widths = [h.shape[1]]
    for layer in layers:
        h = torch.cat([h, layer(h)], dim=1)
        widths.append(h.shape[1])
    assert costs["dense"]["widths"] == widths
    assert costs["dense"]["branch"] == [count(layer) for layer in layers]
    assert costs["dense"]["total"] == sum(count(layer) for layer in layers)
    assert costs["residual"]["widths"] == costs["highway"]["widths"] == [width] * (depth + 1)


def test_connection_costs_reject_bad_input():
    with pytest.raises(ValueError, match="unknown connection"):
        connection_costs("gated", 8, 2, 2)
    with pytest.raises(ValueError, match=">= 1"):
        connection_costs("dense", 8, 2, 0)
    assert linear_params(3, 5) == 20 and linear_params(3, 5, bias=False) == 15
    assert branch_params(3, 5) == 20 + 30


def test_projection_params_match_the_projection_shortcut():
    block = ResidualBlock(32, 64, "relu", "none", shortcut="projection")
    assert projection_params(32, 64) == sum(p.numel() for p in block.shortcut.parameters())
    assert projection_params(32, 64, bias=True) == sum(p.numel() for p in nn.Linear(32, 64).parameters())
    with pytest.raises(ValueError):
        projection_params(0, 64)


def test_nested_classes_close_in_and_non_nested_drift_away():
    """D2L Fig. 8.6.1 as geometry: each nested class contains the previous and gets closer to f*;
    no drifting class contains the previous, and the largest ends farther away than the best one."""
    nested, drifting = get_function_classes(True), get_function_classes(False)
    assert all(contains(nested[i], nested[i - 1]) for i in range(1, len(nested)))
    assert not any(contains(drifting[i], drifting[i - 1]) for i in range(1, len(drifting)))
    near = [nearest_point(c, s, TRUTH[True])[1] for c, s in nested]
    far = [nearest_point(c, s, TRUTH[False])[1] for c, s in drifting]
    assert all(b < a for a, b in zip(near, near[1:]))
    assert far[-1] > min(far) + 0.5
    assert all(np.prod(s) > np.prod(p) for (_, s), (_, p) in zip(drifting[1:], drifting))  # areas grow


def test_contains_and_nearest_point_can_say_no():
    small = (np.array([0.0, 0.0]), np.array([1.0, 0.5]))
    assert contains((np.array([0.0, 0.0]), np.array([2.0, 1.0])), small)
    assert not contains((np.array([1.5, 0.0]), np.array([2.0, 1.0])), small)
    point, dist = nearest_point(np.array([0.0, 0.0]), np.array([1.0, 1.0]), np.array([3.0, 0.0]))
    assert dist == pytest.approx(2.0, abs=1e-6) and point[0] == pytest.approx(1.0, abs=1e-6)


def test_format_number_keeps_counts_exact():
    assert format_number(2048) == "2,048"
    assert format_number(31680.0) == "31,680"
    assert format_number(1234.5) == "1,234"
    assert format_number(0.153) == "0.15" and format_number(12.44) == "12.4" and format_number(3.1e-8) == "3.1×10⁻⁸"


@given(st.floats(min_value=1e-300, max_value=1e300) | st.floats(min_value=-1e300, max_value=-1e-300),
       st.integers(1, 4))
def test_format_number_writes_powers_of_ten_as_on_a_board(value, digits):
    """Whatever the magnitude, the screen never shows the programmer's 3.1e-08: a number outside 0.01 to 10,000 is
    m×10ⁿ with ``digits`` significant digits, and read back (superscripts undone, independently of the formatter) it
    is ``value`` to within half a unit of its last digit."""
    shown = format_number(value, digits)
    assert "e" not in shown.lower().replace("inf", "")
    if "×10" not in shown:
        return
    mantissa, power = shown.split("×10")
    exponent = int(power.translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")))
    assert 1 <= abs(float(mantissa)) < 10 and len(mantissa.lstrip("-").replace(".", "")) == digits
    assert abs(float(mantissa) * 10.0 ** exponent - value) <= 0.5 * 10.0 ** (exponent - digits + 1) * (1 + 1e-9)


def test_power_of_ten_labels_a_log_axis():
    from scenes.kit.style import power_of_ten

    assert [power_of_ten(e) for e in (-12, -3, 0, 1, 2)] == ["10⁻¹²", "10⁻³", "1", "10", "10²"]


# -- scenes in a dry run ---------------------------------------------------------------------------------



@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``built(scene, lang)``: the scene after a dry run with the layout check on, reading the tiny traces
    (the same build as tests/test_scenes_all.py's, once per process: dry_run.built_scene)."""
    def get(scene: type, lang: str) -> LectureScene:
        files = None
        if scene.experiment:
            files = tiny_trace_files(scene.experiment) or write_tiny_traces(scene.experiment,
                                                                           tmp_path_factory.mktemp("tiny"))
        return built_scene(scene, lang, files)

    return get


@pytest.mark.parametrize("scene,lang", scene_lang_params(SCENES, LANGS))
def test_scene_layout_length_and_narration(scene, lang, built):
    s = built(scene, lang)
    assert s.layout_log == []
    shortest = 15 if scene not in DEPTH_PACED else 8  # tiny traces: 4 blocks instead of 20
    assert shortest <= s.renderer.time <= 40, f"{scene.__name__} lasts {s.renderer.time:.1f} s"
    captions = s.renderer.file_writer.subcaptions
    assert len(captions) >= 3
    assert all(c.content for c in captions)
    if lang == "zh":
        assert any("\u4e00" <= ch <= "\u9fff" for c in captions for ch in c.content)


def _values(scene: LectureScene) -> dict:
    return scene.numbers["values"]


@pytest.mark.xdist_group(scene_group(SigmoidDerivative, "en"))
def test_sigmoid_derivative_numbers_equal_the_trace(built):
    s = built(SigmoidDerivative, "en")
    g = s.traces["plain"]["out_grad_norm"][0].astype(np.float64)
    depth = len(g)
    values = _values(s)
    assert values["sigma_prime.max"] == pytest.approx(0.25, abs=1e-12)
    for k in range(depth):
        assert values[f"plain.measured.after.{k}"] == pytest.approx(g[depth - 1 - k] / g[-1], rel=1e-12)
        assert values[f"bound.after.{k}"] == pytest.approx(0.25 ** k, rel=1e-9)
    assert values["plain.mean_factor"] == pytest.approx((g[0] / g[-1]) ** (1 / (depth - 1)), rel=1e-9)


@pytest.mark.xdist_group(scene_group(GradientPlusOne, "en"))
def test_gradient_plus_one_numbers_equal_the_trace(built):
    s = built(GradientPlusOne, "en")
    values = _values(s)
    for name in ("plain", "residual"):
        grad = s.traces[name]["grad_norm"][0]
        for l, v in enumerate(grad):
            assert values[f"{name}.block.{l}.grad_norm"] == pytest.approx(float(v), rel=1e-12)
        g = s.traces[name]["out_grad_norm"][0].astype(np.float64)
        assert values[f"{name}.mean_factor"] == pytest.approx((g[0] / g[-1]) ** (1 / (len(g) - 1)), rel=1e-9)


@pytest.mark.xdist_group(scene_group(IdentityHighway, "en"))
def test_identity_highway_numbers_equal_the_trace(built):
    s = built(IdentityHighway, "en")
    trace = s.traces["residual"]
    ratios = trace["branch_norm"][-1] / trace["input_norm"][-1]
    values = _values(s)
    assert values["skip.closest_block"] == int(np.argmin(ratios)) + 1
    assert values[f"block.{int(np.argmin(ratios))}.branch_to_input_ratio"] == pytest.approx(ratios.min(), rel=1e-6)
    width = trace.run_config.width
    assert values["projection.params"] == width * 2 * width


@pytest.mark.xdist_group(scene_group(ChainRuleExploding, "en"))
def test_chain_rule_exploding_numbers_equal_the_trace(built):
    s = built(ChainRuleExploding, "en")
    values = _values(s)
    gains = sorted((t.run_config.init_gain, name) for name, t in s.traces.items() if name != PLAIN_LARGE_LR)
    low, high = gains[0][1], gains[-1][1]
    for name in (low, high):
        t = s.traces[name]
        g = t["out_grad_norm"][0].astype(np.float64)
        for l in range(len(g)):
            assert values[f"{name}.block.{l}.product"] == pytest.approx(g[l] / g[-1], rel=1e-12)
        assert values[f"{name}.last_over_first_act_norm"] == pytest.approx(t["act_norm"][0, -1] / t["act_norm"][0, 0],
                                                                          rel=1e-6)
    # The largest gain explodes backwards: the first block's gradient exceeds the last one's.
    assert values[f"{high}.block.0.product"] > 1 > values[f"{low}.block.0.product"]
    for name in (high, "plain_large_lr"):
        meta = s.traces[name].meta
        if meta.diverged and meta.diverged_layer >= 0:
            assert values[f"{name}.diverged_step"] == meta.diverged_step
            assert values[f"{name}.diverged_block"] == meta.diverged_layer + 1
        elif not meta.diverged:
            assert f"{name}.diverged_step" not in values


@pytest.mark.xdist_group(scene_group(Summary, "en"))
def test_summary_numbers_equal_the_trace(built):
    s = built(Summary, "en")
    values = _values(s)
    for name in ("plain", "residual"):
        t = s.traces[name]
        assert values[f"{name}.first_over_last_grad_norm"] == pytest.approx(t["grad_norm"][0, 0] / t["grad_norm"][0, -1],
                                                                            rel=1e-12)
        assert values[f"{name}.final_loss"] == pytest.approx(float(t["loss"][-1]), rel=1e-12)


def _copy_traces(experiment: str, overrides: dict, tmp_path, edit=None) -> None:
    """Save the tiny traces of ``experiment`` into $RESIDUAL_CACHE under the digests of ``overrides``'
    runs, after ``edit(run_name, trace)``."""
    files = tiny_trace_files(experiment) or write_tiny_traces(experiment, tmp_path / "tiny")
    base = one_seed(files)
    for key, config in build_runs(experiment, overrides).items():
        trace = Trace.load(base[key.name])
        if edit:
            edit(key.name, trace)
        trace.save(trace_path(config))


def _dry_run(scene: type, overrides: dict, media) -> LectureScene:
    """A dry run of ``scene`` with ``overrides`` (``--set`` strings, typed as cli.params types them for a scene)."""
    params = experiment_values(scene.experiment, overrides)
    return dry_run(type(scene.__name__, (scene,), {"lang": "en", "params": params}), media)


@pytest.mark.xdist_group(scene_group(HighwayDenseNetResidual, "en"))
def test_compare_numbers_follow_the_trace_config(built, tmp_path, monkeypatch):
    """The same scene reading nets of another width and depth shows other, recomputed counts."""
    tiny = built(HighwayDenseNetResidual, "en").numbers
    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path / "cache"))
    wide_overrides = {**tiny_overrides("chain_rule"), "width": "24", "depth": "5"}

    def widen(name: str, trace: Trace) -> None:
        trace.meta = dataclasses.replace(trace.meta, config=trace.run_config.replace(width=24, depth=5).to_dict())

    _copy_traces("chain_rule", wide_overrides, tmp_path, widen)
    wide = _dry_run(HighwayDenseNetResidual, wide_overrides, tmp_path / "media").numbers
    for numbers, (width, depth) in ((tiny, (16, 4)), (wide, (24, 5))):
        assert numbers["config"]["width"] == width and numbers["config"]["depth"] == depth
        for kind in KINDS:
            costs = connection_costs(kind, width, depth, HighwayDenseNetResidual.growth)
            assert numbers["values"][f"{kind}.total_params"] == costs["total"]
            assert numbers["values"][f"{kind}.final_width"] == costs["widths"][-1]
            assert numbers["values"][f"{kind}.width.{depth}"] == costs["widths"][-1]
    assert tiny["values"]["residual.total_params"] != wide["values"]["residual.total_params"]


@pytest.mark.xdist_group(scene_group(SigmoidDerivative, "en"))
def test_a_tampered_trace_changes_what_the_scene_shows(built, tmp_path, monkeypatch):
    """Numbers come from the trace: scale the plain net's recorded gradients and the scene follows."""
    reference = _values(built(SigmoidDerivative, "en"))
    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path / "cache"))

    def tamper(name: str, trace: Trace) -> None:
        if name == "plain":
            g = trace.arrays["out_grad_norm"].astype(np.float64)
            trace.arrays["out_grad_norm"] = g * (0.5 ** np.arange(g.shape[1]))[::-1]  # extra x0.5 per block

    _copy_traces("chain_rule", tiny_overrides("chain_rule"), tmp_path, tamper)
    tampered = _dry_run(SigmoidDerivative, tiny_overrides("chain_rule"), tmp_path / "media").numbers["values"]
    assert tampered["plain.mean_factor"] == pytest.approx(reference["plain.mean_factor"] * 0.5, rel=1e-9)
    assert tampered["sigma_prime.max"] == reference["sigma_prime.max"]


@pytest.mark.slow
@pytest.mark.parametrize("scene", sorted(DEPTH_PACED, key=lambda s: s.__name__), ids=lambda s: s.__name__)
def test_depth_paced_scene_length(scene, tmp_path):
    """At the experiment's default size (trained now, about a minute) the scene lasts 15-40 s."""
    built = _dry_run(scene, {}, tmp_path / "media")
    assert 15 <= built.renderer.time <= 40
