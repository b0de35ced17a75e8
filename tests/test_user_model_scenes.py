"""The scenes of a user's own network (scenes/user_model.py) and their block labels (scenes/kit/block_labels.py).

Example::

    pytest tests/test_user_model_scenes.py -n 0
    pytest tests/test_user_model_scenes.py --set_test -k frame    # (re)write the control frames

The scenes read user-like traces (tests/data/model/<case>/, made by ``tests/data/make_traces.py --user-like``:
real plain and residual MLP runs of 24 and 50 blocks named like GPT-2's and ResNet-152's residual additions) or,
in the Hypothesis tests, traces of 2 to 160 blocks with random module paths (the per-block arrays of a real run,
tiled: what is checked there is the layout, not a claim). Labels must never overlap or leave the frame;
the numbers JSON must equal the arrays; frame tests compare the last frame with control data, each with a tamper
twin that proves the comparison fails when one recorded array changes.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st
from manim import VGroup

import scenes
from narration import i18n
from scenes import user_model
from scenes.kit.block_labels import (BlockLabels, _spread, estimate_width, middle_ellipsis, plan_block_labels,
                                 split_prefix, unique_names)
from scenes.chain_rule import running_product
from scenes.kit.layout import layout_problems
from support import FULL_LANGS as LANGS
from simulation.config import RunConfig, UserModelConfig
from simulation.runkeys import RunKey
from simulation.trace import Trace

from data.make_traces import USER_LIKE, tiled_traces, user_like_names, user_like_trace_files
from dry_run import built_scene, frame_build, scene_group
from subtitles import as_srt_cues, too_fast
from support import ROOT, examples
from frame_checks import assert_last_frame_matches, same_cairo_as_control_data  # noqa: F401 (an autouse fixture)

FRAME_W, FRAME_H = 14.222222222222221, 8.0

# -- module paths as users name them ------------------------------------------------------------------

IDENT = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)
LONG_IDENT = st.from_regex(r"[a-z][a-z0-9_]{24,44}", fullmatch=True)
# The same identifiers drawn as a first character and a text of the rest: the strings of the regular expressions above,
# ~14x faster to draw than st.from_regex (most of the planner tests' time went there). Hypothesis draws other examples
# from them (runs of one character, as "a000…"): the scene tests keep the regular expressions' examples.
_LOWER, _REST = "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz0123456789_"
FAST_IDENTS = (st.builds(str.__add__, st.sampled_from(_LOWER + "_"), st.text(_REST, max_size=10)),
               st.builds(str.__add__, st.sampled_from(_LOWER), st.text(_REST, min_size=24, max_size=44)))


@st.composite
def module_paths(draw, min_blocks: int = 2, max_blocks: int = 160, idents=(IDENT, LONG_IDENT)) -> list[str]:
    """Names of ``min_blocks`` .. ``max_blocks`` residual additions: flat (``layers.17``), staged
    (``layer3.4``), sublayers (``transformer.h.3.attn``) or any dotted ASCII (long ones, repeats included);
    ``idents``: the strategies of a short and a long identifier."""
    ident, long_ident = idents
    n = draw(st.integers(min_blocks, max_blocks))
    prefix = draw(st.lists(st.one_of(ident, long_ident), max_size=3))
    kind = draw(st.sampled_from(["flat", "staged", "sublayers", "random"]))
    if kind == "flat":
        return [".".join([*prefix, str(i)]) for i in range(n)]
    if kind == "staged":
        cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=min(5, n - 1)))) if n > 1 else []
        bounds = [0, *cuts, n]
        stage = draw(st.sampled_from(["layer", "stage", "block_group_with_a_long_name_"]))
        return [".".join([*prefix, f"{stage}{s + 1}", str(i - bounds[s])])
                for s in range(len(bounds) - 1) for i in range(bounds[s], bounds[s + 1])]
    if kind == "sublayers":
        parts = draw(st.lists(st.one_of(ident, long_ident), min_size=1, max_size=3, unique=True))
        return [".".join([*prefix, str(i // len(parts)), parts[i % len(parts)]]) for i in range(n)]
    return [".".join(draw(st.lists(st.one_of(ident, long_ident), min_size=1, max_size=4))) for _ in range(n)]


# -- the planner ---------------------------------------------------------------------------------------

def test_split_prefix_takes_whole_components_and_never_a_last_one():
    assert split_prefix(["transformer.h.0.attn", "transformer.h.11.mlp"]) == ("transformer.h.", ["0.attn", "11.mlp"])
    assert split_prefix(["layer1.0", "layer2.0"]) == ("", ["layer1.0", "layer2.0"])
    assert split_prefix(["layers.1", "layers.10"]) == ("layers.", ["1", "10"])
    assert split_prefix(["block", "block"]) == ("", ["block", "block"])  # a module called twice
    assert unique_names(["block", "block", "x", "block"]) == ["block", "block#2", "x", "block#3"]


@given(st.text(alphabet="abcdefghij._0123456789", min_size=1, max_size=80), st.integers(3, 90))
def test_middle_ellipsis_keeps_both_ends_within_the_limit(text, limit):
    short = middle_ellipsis(text, limit)
    if len(text) <= limit:
        assert short == text
    else:
        assert len(short) <= limit and "…" in short
        head, tail = short.split("…")
        assert text.startswith(head) and text.endswith(tail) and len(tail) >= len(head)


@given(st.lists(st.tuples(st.floats(-6, 6), st.floats(0.05, 2.0)), min_size=1, max_size=30))
def test_spread_keeps_order_gaps_and_bounds(items):
    desired = sorted(x for x, _ in items)
    widths = [w for _, w in items]
    bounds, gap = (-7.0, 7.0), 0.12
    xs = _spread(desired, widths, gap, bounds)
    if sum(widths) + gap * (len(widths) - 1) > bounds[1] - bounds[0] + 1e-9:
        assert xs is None
        return
    assert xs is not None
    for k in range(1, len(xs)):
        assert xs[k] - widths[k] / 2 >= xs[k - 1] + widths[k - 1] / 2 + gap - 1e-9
    assert xs[0] - widths[0] / 2 >= bounds[0] - 1e-9 and xs[-1] + widths[-1] / 2 <= bounds[1] + 1e-9
    roomy = all(desired[k] - desired[k - 1] >= (widths[k] + widths[k - 1]) / 2 + gap for k in range(1, len(xs)))
    inside = desired[0] - widths[0] / 2 >= bounds[0] and desired[-1] + widths[-1] / 2 <= bounds[1]
    if roomy and inside:  # nothing to move: every text stays at its place
        assert np.allclose(xs, desired)


@settings(max_examples=examples(60), deadline=None)
@given(module_paths(idents=FAST_IDENTS), st.floats(3.0, 10.5))
def test_plan_never_overlaps_and_every_label_is_its_blocks_name(names, width):
    xs = np.linspace(-width / 2, width / 2, len(names))
    bounds = (-width / 2 - 0.4, width / 2 + 0.4)
    plan = plan_block_labels(names, xs, bounds)
    prefix, rests = split_prefix(unique_names(names))
    rows = {"members": [(x, estimate_width(text)) for _, text, x in plan.members],
            "groups": [(x, estimate_width(text)) for _, _, text, x in plan.groups if text]}
    for row in rows.values():
        for (x0, w0), (x1, w1) in zip(row, row[1:]):
            assert x1 - w1 / 2 >= x0 + w0 / 2 + 0.1, f"labels overlap in {plan}"
        for x, w in row:
            assert bounds[0] - 1e-9 <= x - w / 2 and x + w / 2 <= bounds[1] + 1e-9
    for i, text, _ in plan.members:
        full = rests[i] if not plan.groups else rests[i].rsplit(".", 1)[-1]
        head, _, tail = text.partition("…")
        assert full.startswith(head) and full.endswith(tail), (text, full)
    covered = [i for first, last, _, _ in plan.groups for i in range(first, last + 1)]
    assert not plan.groups or covered == list(range(len(names)))  # groups tile the row in order
    assert plan.heading.startswith(prefix.rstrip("."))
    assert not plan.heading.partition(" (")[0].endswith(".")  # "stages", never "stages." (issue 35 item 7)


def test_plan_of_well_known_nets():
    r18 = [f"layer{s}.{i}" for s in (1, 2, 3, 4) for i in range(2)]
    plan = plan_block_labels(r18, np.linspace(-5, 5, 8))
    assert [g[2] for g in plan.groups] == ["layer1", "layer2", "layer3", "layer4"] and plan.stride == 1
    gpt = user_like_names("gpt2_24")
    plan = plan_block_labels(gpt, np.linspace(-5, 5, 24))
    assert plan.heading == "transformer.h (attn, mlp)" and [g[2] for g in plan.groups] == [str(i) for i in range(12)]
    plan = plan_block_labels(user_like_names("resnet152_50"), np.linspace(-3.5, 3.5, 50), (-4.0, 4.0))
    assert [g[2] for g in plan.groups] == ["layer1", "layer2", "layer3", "layer4"]
    flat = [f"encoder.layers.{i}" for i in range(160)]
    plan = plan_block_labels(flat, np.linspace(-5, 5, 160))
    assert plan.heading == "encoder.layers" and plan.members[0][1] == "0" and plan.members[-1][1] == "159"


def check_drawn_labels(names: list[str]) -> None:
    labels = BlockLabels(names, np.linspace(-5.0, 5.0, len(names)), (-5.6, 5.6))
    assert layout_problems([labels], FRAME_W, FRAME_H) == []
    for text in [*labels.members, *labels.groups]:
        assert -5.6 - 0.05 <= text.get_left()[0] and text.get_right()[0] <= 5.6 + 0.05


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(module_paths(idents=FAST_IDENTS))
def test_drawn_labels_stay_apart_and_inside_their_bounds(names):
    check_drawn_labels(names)


@pytest.mark.slow
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(module_paths())
def test_drawn_labels_stay_apart_and_inside_their_bounds_many(names):
    check_drawn_labels(names)


def test_overlap_check_catches_labels_drawn_on_top_of_each_other():
    """The layout check the tests rely on fails for two labels at one place (the tamper twin of the above)."""
    labels = BlockLabels(["layer1.0", "layer1.1", "layer2.0"], np.linspace(-1, 1, 3))
    twin = labels.members[1].copy().move_to(labels.members[0])
    assert layout_problems([VGroup(labels, twin)], FRAME_W, FRAME_H) != []


# -- the scenes ---------------------------------------------------------------------------------------------

def check_scene(built, lang: str) -> None:
    assert built.layout_log == [], built.layout_log
    assert built.renderer.num_plays > 0
    cues = as_srt_cues(built.renderer.file_writer.subcaptions)
    assert cues and too_fast(cues, lang) == []


@settings(max_examples=examples(2), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(scenes.MODEL_SCENES), module_paths(max_blocks=40), st.sampled_from(LANGS),
       st.sampled_from(["dark", "light"]))
def test_scenes_lay_out_any_block_names(scene, names, lang, theme):
    with tempfile.TemporaryDirectory() as folder:
        built = frame_build(scene, lang, tiled_traces(names, Path(folder)), theme)
    check_scene(built, lang)
    assert built.numbers["blocks"] == names


# Three rows of names under ModelResidualResponse's charts (members, stages, a long shared prefix) over a verdict
# wrapped onto three lines: the verdict sat at a fixed height and the heading ran onto it (found by this test in a
# fresh clone); the scene now lays its charts out around the verdict it measures first.
TALL_NAMES = [f"a_really_long_module_name_with_many_parts_x.layer{s + 1}.{i}" for s in range(3) for i in range(4)]


@pytest.mark.slow  # 4 generated examples and the explicit one (5 generated before it: the same slow time)
@settings(max_examples=examples(4), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(scenes.MODEL_SCENES), module_paths(max_blocks=160), st.sampled_from(LANGS),
       st.sampled_from(["dark", "light"]))
@example(user_model.ModelResidualResponse, TALL_NAMES, "en", "dark")
def test_scenes_lay_out_any_block_names_many(scene, names, lang, theme):
    with tempfile.TemporaryDirectory() as folder:
        built = frame_build(scene, lang, tiled_traces(names, Path(folder)), theme)
    check_scene(built, lang)


def test_layout_check_of_a_scene_catches_a_text_outside_the_frame(tmp_path):
    """The tamper twin of the layout tests: the same scene with its labels pushed off the frame is reported."""
    class Pushed(user_model.ModelGradientPlusOne):
        def block_axis(self, axes, depth):
            return super().block_axis(axes, depth).shift([0, -6, 0])

    built = frame_build(Pushed, "en", user_like_trace_files("gpt2_24"))
    assert any("outside the frame" in p for p in built.layout_log)


# The frame and numbers tests of one scene read one build per case (dry_run.built_scene), on one xdist worker.
CHAIN, FLOW = (pytest.mark.xdist_group(scene_group(s, "en")) for s in (user_model.ModelChainRuleProduct,
                                                                         user_model.ModelGradientFlowOverTraining))


# the 50-block scenes build the longest: their frame, numbers and tamper tests run with the slow tests (CI)
CASES = [USER_LIKE[0], pytest.param(USER_LIKE[1], marks=pytest.mark.slow)]


@CHAIN
@pytest.mark.parametrize("case", CASES)
def test_chain_rule_numbers_equal_the_trace(case):
    files, lang = user_like_trace_files(case), "en"
    built = built_scene(user_model.ModelChainRuleProduct, lang, files)
    check_scene(built, lang)
    values = built.numbers["values"]
    names = user_like_names(case)
    assert built.numbers["blocks"] == names
    for run in ("plain", "residual"):
        g = Trace.load(files[run])["out_grad_norm"][0].astype(np.float64)
        for l in range(len(names)):
            assert values[f"{run}.block.{l}.product"] == pytest.approx(g[l] / g[-1], rel=1e-12)
        shown = [k for k in values if k.startswith(f"{run}.block") and k.endswith(".factor")]
        for key in shown:  # every factor the pen shows: the product's ratio over the blocks it spans
            part = key.split(".")[2]  # "l" (one block back) or "l-hi"
            lo, hi = (int(x) for x in part.split("-")) if "-" in part else (int(part), int(part) + 1)
            assert values[key] == pytest.approx(g[lo] / g[hi], rel=1e-9)
        assert len(shown) <= user_model.MAX_PEN_STEPS


@FLOW
@pytest.mark.parametrize("case", CASES)
def test_gradient_flow_numbers_equal_the_trace(case):
    files = user_like_trace_files(case)
    built = built_scene(user_model.ModelGradientFlowOverTraining, "en", files)
    check_scene(built, "en")
    values = built.numbers["values"]
    for run in ("plain", "residual"):
        trace = Trace.load(files[run])
        g = trace["out_grad_norm"]
        for k, step in enumerate(trace["step"]):
            for l in range(g.shape[1]):
                assert values[f"{run}.step.{int(step)}.block.{l}.out_grad_norm"] == float(g[k, l])
            assert values[f"{run}.step.{int(step)}.first_over_last_out_grad_norm"] == pytest.approx(g[k, 0] / g[k, -1])


def test_degradation_numbers_equal_the_trace():
    files = user_like_trace_files("gpt2_24")
    built = frame_build(user_model.ModelDegradation, "en", files)
    values = built.numbers["values"]
    for run in ("plain", "residual"):
        curve = Trace.load(files[run])["error_curve"].astype(np.float64)
        window = max(1, round(len(curve) * 0.1))
        assert values[f"{run}.final_error_pct"] == pytest.approx(100 * curve[-window:].mean())
        test_error = Trace.load(files[run])["test_error"]
        assert values[f"{run}.step.0.test_error"] == pytest.approx(float(test_error[0]))


def test_a_long_verdict_raises_the_charts_instead_of_covering_the_legend():
    """ModelDegradation's verdict sat at a fixed height and grew upwards: a lecturer's own four-line verdict (--text)
    ran over the legend (the old layout's check reported both legend lines). The scene measures the verdict first and
    raises (and shortens) the charts to make the room."""
    wordy = ("Measured: the twin without shortcuts ends at {plain} training error and {model} with its shortcuts ends "
             "at {residual}; the same data, optimiser, seed and steps were used for both, so the only difference is "
             "the shortcuts: without them this network trains worse, as He et al. found.")

    class Wordy(user_model.ModelDegradation):
        text_overrides = {"ModelDegradation.twin_worse": wordy}
        fit_words = False  # the layout as drawn, not as scenes.kit.fit would mend it (and 3x faster)

    built = frame_build(Wordy, "en", user_like_trace_files("gpt2_24"), check_layout=False)  # the last frame's only
    assert layout_problems(built.mobjects, FRAME_W, FRAME_H) == []
    assert built.numbers["values"]["plain.worse.seeds"] == 1  # the verdict measured early is recorded once, when shown


@pytest.mark.slow  # a seven-sentence line to wrap (~5 s); paid for by one fewer example of the many-names test
def test_a_long_verdict_raises_the_charts_of_does_it_only_copy():
    """DoesItOnlyCopy's verdict lines sit at the bottom and grow upwards: a lecturer's own long line (--text) ran over
    the charts' tick labels (the old layout's check reported them). The chart is raised and shortened instead."""
    wordy = " ".join(["It never vanished (lowest {low} of ‖x‖): the blocks do more than copy."] * 7)

    class Wordy(user_model.ModelDoesItOnlyCopy):
        text_overrides = {"DoesItOnlyCopy.not_copy": wordy,
                          "DoesItOnlyCopy.copy": wordy.replace("lowest {low} of ‖x‖", "below {zero} of ‖x‖, lowest {low}")}
        fit_words = False  # the layout as drawn, not as scenes.kit.fit would mend it

    built = frame_build(Wordy, "en", user_like_trace_files("gpt2_24"), check_layout=False)  # the last frame's only
    assert layout_problems(built.mobjects, FRAME_W, FRAME_H) == []


def test_model_title_names_the_factory_or_its_file():
    def title(spec):
        return user_model.model_title(Trace(meta={"config": UserModelConfig(spec=spec).to_dict()}, arrays={}))

    assert title("torchvision.models:resnet18") == "resnet18"
    assert title("/home/me/examples/my_resnet.py:build") == "my_resnet"
    assert title("nets.vision:make_model") == "vision"
    assert title("a.py:" + "x" * 40) == middle_ellipsis("x" * 40, 24)
    assert user_model.model_title(Trace(meta={"config": RunConfig().to_dict()}, arrays={})) is None  # a built-in run


def test_registered_and_chosen_by_model():
    assert all(scenes.get_scene(s.__name__) is s for s in scenes.MODEL_SCENES)
    for name, variant in user_model.MODEL_VARIANTS.items():
        assert scenes.model_variant(scenes.get_scene(name)) is variant and issubclass(variant, scenes.get_scene(name))
        assert variant.experiment == "model"
    with pytest.raises(KeyError, match="cannot draw your own model"):
        scenes.model_variant(scenes.get_scene("Analogies"))
    names = [s.__name__ for s in scenes.MODEL_SCENES]
    assert len(set(names) | {s.__name__ for s in scenes.SCENES_IN_ORDER}) == len(names) + len(scenes.SCENES_IN_ORDER)


@pytest.mark.parametrize("scene", scenes.MODEL_SCENES, ids=lambda s: s.__name__)
def test_strings_in_both_languages(scene):
    for lang in LANGS:
        said = {key: scene.string(key, lang) for key in i18n.texts_of("en", i18n.owner_chain(scene))}
        assert said and all(text.strip() for text in said.values()), (lang, said)


def test_list_shows_the_model_scenes():
    from click.testing import CliRunner

    import render

    result = CliRunner().invoke(render.cli, ["list", "--json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.output)
    assert [s["name"] for s in listing["model_scenes"]] == [s.__name__ for s in scenes.MODEL_SCENES]
    human = CliRunner().invoke(render.cli, ["list"]).output
    assert "with --model, ChainRuleProduct draws this" in human


# -- frames ----------------------------------------------------------------------------------------

FRAMES = [pytest.param(user_model.ModelGradientFlowOverTraining, "model_gradient_flow", marks=FLOW,
                       id="model_gradient_flow"),
          pytest.param(user_model.ModelChainRuleProduct, "model_chain_rule", marks=CHAIN, id="model_chain_rule")]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("scene,name", FRAMES)
def test_frame(request, scene, name, case):
    built = built_scene(scene, "en", user_like_trace_files(case))
    assert_last_frame_matches(built, f"{name}_{case}", write=request.config.getoption("--set_test"))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("scene,name", [  # one twin by default (the chain rule's); the gradient flow's in CI's slow set
    pytest.param(*FRAMES[0].values, id=FRAMES[0].id, marks=[*FRAMES[0].marks, pytest.mark.slow]), FRAMES[1]])
def test_frame_fails_on_tampered_trace(request, tmp_path, scene, name, case):
    if request.config.getoption("--set_test"):
        pytest.skip("writing control data")
    files = {}
    for run, path in user_like_trace_files(case).items():
        files[run] = str(tmp_path / f"{run}.npz")
        shutil.copy(path, files[run])
    trace = Trace.load(files["residual"])
    grads = trace.arrays["out_grad_norm"].copy()
    grads[:, 0] *= 8  # the residual net's first block: its lit block, its curve's end
    trace.arrays["out_grad_norm"] = grads
    trace.save(files["residual"])
    built = frame_build(scene, "en", files)
    with pytest.raises(AssertionError, match="Frame no"):
        assert_last_frame_matches(built, f"{name}_{case}")


@pytest.mark.slow
def test_every_model_scene_draws_a_real_user_model(tmp_path, monkeypatch):
    """examples/my_resnet.py (projection shortcuts, six additions ``stages.0.0`` ...) and its twin trained a few
    steps: every scene builds with a clean layout, names the model's blocks and shows its trace's numbers."""
    from cli.notebook import record_model

    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path / "cache"))
    files = {key: str(path) for key, path in record_model(
        f"{ROOT / 'examples' / 'my_resnet.py'}:build", {"data": "digits-image", "steps": 6, "record_every": 3}).items()}
    assert set(files) == {RunKey("residual", 0), RunKey("plain", 0)}
    files = {key.name: path for key, path in files.items()}
    layers = Trace.load(files["residual"]).meta.layers
    assert layers and len(layers) >= 2
    for scene in scenes.MODEL_SCENES:
        built = frame_build(scene, "en", files)
        check_scene(built, "en")
        assert built.numbers["blocks"] == layers and built.numbers["model"] == "my_resnet"
    g = Trace.load(files["residual"])["out_grad_norm"][0]
    chain = frame_build(user_model.ModelChainRuleProduct, "zh", files)
    assert chain.numbers["values"]["residual.block.0.product"] == pytest.approx(g[0] / g[-1], rel=1e-12)
