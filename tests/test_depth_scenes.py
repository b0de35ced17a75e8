"""Issue 10's scenes: GradientFlowOverTraining, DepthSweep and the seed spread (scenes/kit/seeds.py).

Example::

    pytest tests/test_depth_scenes.py -q

Pure helpers against independent computations; each scene in a Manim dry run in both languages (clean
layout, 15-40 s, narrated) showing exactly the numbers recomputed here from the tiny committed traces
(``tests/data/vanishing/`` and ``tests/data/depth_sweep/``, extra seeds under ``seed<k>/``); each numbers test
has a tamper twin.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from scenes.depth_sweep import (DepthSweep, DepthSweepConv, decades_per_block, sweep_counts, sweep_points,
                                trains_worse)
from scenes.gradient_flow import (LIT, MIN_DECADES, GradientFlowOverTraining, brightness, flow_scale,
                                  pick_flow_runs, plain_end_line, value_along)
from scenes.kit.layout import text_mobjects
from scenes.kit.style import power_of_ten
from scenes.kit.seeds import count_true, seed_range
from support import FULL_LANGS as LANGS
from simulation.runkeys import RunKey, by_seed, one_seed
from simulation.summary import tail_mean
from simulation.trace import Trace

from data.make_traces import tiny_trace_files, tiny_trace_files_with_seeds
from dry_run import built_scene, dry_run, scene_group, scene_lang_params

SCENES = [GradientFlowOverTraining, DepthSweep, DepthSweepConv]


# -- pure helpers ------------------------------------------------------------------------------------------

def test_flow_scale_spans_the_decades_the_values_hold():
    """The whole decades from floor(log10 smallest) to ceil(log10 largest), at least MIN_DECADES (widened
    downwards), at most ``decades``; 0, NaN and inf are no values. Failed before: a fixed 6 decades below the top
    whatever the run held (the vanishing run's 1e-22..1.67 showed as 1e-5..1e1, a flat run as 1e-6..1)."""
    a, b = np.array([[1e-3, 0.2]]), np.array([[5e-9, 0.04]])
    assert flow_scale([a, b]) == (-9, 0)  # floor(log10 5e-9) = -9, ceil(log10 0.2) = 0
    assert flow_scale([np.array([[1.19e-22, 1.67]])]) == (-22, 1)  # the lecture's 20-block vanishing pair
    assert flow_scale([np.array([[0.3, 0.5, 0.0, np.nan, np.inf]])]) == (-2, 0)  # one decade: widened to two
    assert flow_scale([np.array([3.0])]) == (1 - MIN_DECADES, 1)
    assert flow_scale([a, b], decades=6) == (-6, 0)  # capped
    assert flow_scale([np.array([0.5])], decades=1) == (-1, 0)  # the cap wins over the minimum
    rng = np.random.default_rng(1)
    for _ in range(200):  # against an independent computation (math.log on exact decades)
        lo, hi = sorted(rng.uniform(-30, 5, 2))
        values = 10 ** rng.uniform(lo, hi, 7)
        top = min(e for e in range(-40, 10) if 10.0 ** e >= values.max() * (1 - 1e-12))
        low = max(e for e in range(-40, 10) if 10.0 ** e <= values.min() * (1 + 1e-12))
        assert flow_scale([values]) == (top - max(top - low, MIN_DECADES), top), values


def test_flow_scale_and_brightness_follow_log10():
    values = np.array([1e-7, 1e-6, 1e-3, 1.0, 10.0, 0.0, np.nan, np.inf, -1.0])
    expected = [0.0, 0.0, 0.5, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    np.testing.assert_allclose(brightness(values, -6, 0), expected, atol=1e-12)
    rng = np.random.default_rng(0)
    for v in 10 ** rng.uniform(-9, 2, 200):  # against an independent formula
        ref = min(max((math.log(v) / math.log(10) + 6) / 6, 0.0), 1.0)
        assert float(brightness(v, -6, 0)) == pytest.approx(ref, abs=1e-12)
    with pytest.raises(ValueError, match="no finite positive"):
        flow_scale([np.array([0.0, np.nan])], 6)


def test_value_along_interpolates_between_blocks_and_holds_at_the_ends():
    xs, levels = np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 0.5])
    assert value_along(levels, xs, 0.5) == pytest.approx(0.5)
    assert value_along(levels, xs, 1.5) == pytest.approx(0.75)
    assert value_along(levels, xs, -3) == 0.0 and value_along(levels, xs, 9) == 0.5


def _fake(arch, depth, act="sigmoid"):
    return Trace(meta={"config": {"arch": arch, "depth": depth, "activation": act}})


@pytest.mark.parametrize("start, end, key", [
    (1e-9, 1e-9, "n_plain_stays_dark"),   # the lecture's 20-block sigmoid net: dark, and dark after training
    (1e-9, 1e-2, "n_plain_lights_up"),
    (9.2e-5, 6.4e-5, "n_plain_stays_lit"),  # a new user's 6-block twin: lit at step 0, its ratio fell (was "lights up")
    (9.2e-5, 1e-9, "n_plain_goes_dark"),
    (float("nan"), 1e-2, "n_plain_lights_up"),  # step 0 missing: said so then; the end as from dark
    (9.2e-5, float("nan"), "n_end_missing"),
])
def test_the_plain_nets_last_line_says_how_its_first_block_changed(start, end, key):
    """On the scene's log scale (top 1, six decades: lit from ~2e-6), the first block of the plain net at step 0
    and at the last record; the key must exist in the catalog of both variants."""
    bottom, top = -6, 0
    levels = [float(brightness(v, bottom, top)) for v in (start, end)]
    assert plain_end_line(start, end, *levels) == key
    assert (levels[0] >= LIT) == (start == 9.2e-5)
    from narration import i18n
    for scene in ("GradientFlowOverTraining", "ModelGradientFlowOverTraining"):
        assert i18n.english().get(f"{scene}.{key}") or key == "n_end_missing"


def test_pick_flow_runs_takes_the_nearest_depth_with_both_nets():
    traces = {"p8": _fake("plain", 8), "r8": _fake("residual", 8), "p20": _fake("plain", 20),
              "r56": _fake("residual", 56), "p56": _fake("plain", 56), "t20": _fake("residual", 20, "tanh")}
    assert pick_flow_runs(traces, 20, "sigmoid") == ("p8", "r8")  # 20 has no sigmoid residual run
    assert pick_flow_runs(traces, 40, "sigmoid") == ("p56", "r56")
    with pytest.raises(ValueError, match="plain and a residual relu"):
        pick_flow_runs(traces, 20, "relu")


def test_count_true_and_seed_range():
    assert count_true([True, False, True]) == (2, 3)
    assert seed_range([3.0, np.nan, 1.0, 2.0]) == (1.0, 2.0, 3.0)
    assert all(math.isnan(v) for v in seed_range([np.nan]))


def test_decades_per_block_is_the_slope_of_log10():
    depths = [2, 10, 30]
    assert decades_per_block(depths, [10.0 ** (-0.5 * d + 1) for d in depths]) == pytest.approx(-0.5, rel=1e-9)
    assert math.isnan(decades_per_block([2, 10], [1e-3, 0.0]))  # an underflow is no point


def _seed_traces(files: dict[RunKey, str] | None = None) -> dict[int, dict[str, Trace]]:
    """``{seed: {NAME: Trace}}`` of the tiny depth sweep (or of ``files``)."""
    files = files or tiny_trace_files_with_seeds("depth_sweep")
    assert files is not None, "run python tests/data/make_traces.py depth_sweep"
    out = by_seed({key: Trace.load(path) for key, path in files.items()})
    assert len(out) >= 3, "run python tests/data/make_traces.py --seeds depth_sweep"
    return out


@pytest.mark.parametrize("model", ["mlp", "conv"])
def test_sweep_points_read_every_seed_and_depth(model):
    seed_traces = _seed_traces()
    points = sweep_points(seed_traces, model)
    seen = 0
    for seed, traces in seed_traces.items():
        for name, trace in traces.items():
            if trace.run_config.model != model:
                continue
            cell = points[trace.run_config.arch][trace.run_config.depth][seed]
            g = trace["grad_norm"][0]
            assert cell["ratio"] == pytest.approx(float(g[0]) / float(g[-1]), rel=1e-12)
            assert cell["error"] == pytest.approx(tail_mean(trace["error_curve"]), rel=1e-12)
            seen += 1
    assert seen == sum(len(cells) for by in points.values() for cells in by.values())
    with pytest.raises(ValueError, match="no transformer plain run"):
        sweep_points(seed_traces, "transformer")
    twice = {0: {**seed_traces[0], "copy": seed_traces[0]["mlp_plain_d4"]}}
    with pytest.raises(ValueError, match="two plain runs of depth 4"):
        sweep_points(twice)


def test_a_diverged_run_has_no_error_and_trains_worse():
    traces = _seed_traces()[0]
    trace = traces["mlp_plain_d8"]
    trace.meta = dataclasses.replace(trace.meta, diverged=True, diverged_step=3)
    cell = sweep_points({0: traces})["plain"][8][0]
    assert math.isnan(cell["error"]) and cell["diverged"] == 1.0
    fine = {"error": 0.5, "diverged": 0.0}
    assert trains_worse(cell, fine) and not trains_worse(fine, cell)
    assert trains_worse({"error": 0.52, "diverged": 0.0}, fine) and not trains_worse({"error": 0.505, "diverged": 0.0},
                                                                                     fine)


# -- the scenes in a dry run ------------------------------------------------------------------------

def variant(scene: type, lang: str = "en", files: dict | None = None) -> type:
    files = files or (tiny_trace_files_with_seeds if scene.experiment == "depth_sweep" else tiny_trace_files)(
        scene.experiment)
    return type(scene.__name__, (scene,), {"lang": lang, "check_layout": True, "trace_files": files})


@pytest.fixture(scope="module")
def built():
    """``built(scene, lang)``: ``variant(scene, lang)``'s dry run, once per process (dry_run.built_scene;
    GradientFlowOverTraining's is the one tests/test_scenes_all.py checks too)."""
    def get(scene: type, lang: str):
        return built_scene(scene, lang, variant(scene, lang).trace_files)

    return get


@pytest.mark.parametrize("scene,lang", scene_lang_params(SCENES, LANGS))
def test_scene_layout_length_and_narration(scene, lang, built):
    s = built(scene, lang)
    assert s.layout_log == []
    assert 15 <= s.renderer.time <= 40, f"{scene.__name__} lasts {s.renderer.time:.1f} s"
    captions = s.renderer.file_writer.subcaptions
    assert len(captions) >= 3 and all(c.content for c in captions)
    if lang == "zh":
        assert any("\u4e00" <= ch <= "\u9fff" for c in captions for ch in c.content)


def gradient_flow_numbers(traces: dict[str, Trace]) -> dict[str, float]:
    """Every ||dL/dh_l|| at every record of the deepest sigmoid pair, the scale and the ratios."""
    depth = max(t.run_config.depth for t in traces.values())
    pair = {a: traces[f"{a}_sigmoid_d{depth}"] for a in ("plain", "residual")}
    values = np.concatenate([t["out_grad_norm"].ravel() for t in pair.values()]).astype(np.float64)
    logs = np.log10(values[np.isfinite(values) & (values > 0)])
    top = math.ceil(logs.max() - 1e-12)
    span = min(max(top - math.floor(logs.min() + 1e-12), 2), GradientFlowOverTraining.decades)  # the decades held
    out = {"scale.log10_top": top, "scale.log10_bottom": top - span, "scale.decades": span}
    steps = pair["plain"]["step"]
    for arch, t in pair.items():
        name = f"{arch}_sigmoid_d{depth}"
        g = t["out_grad_norm"]
        for k, step in enumerate(steps):
            out.update({f"{name}.step.{step}.block.{l}.out_grad_norm": g[k, l] for l in range(depth)})
            out[f"{name}.step.{step}.first_over_last_out_grad_norm"] = g[k, 0] / g[k, -1]
    out.update({f"shown_step.{k}": float(s) for k, s in enumerate(steps)})
    out["last_step"] = float(steps[-1])
    for arch, t in pair.items():  # a finite run whose mean loss over its last 10 % ends 10x above step 0's
        curve = np.asarray(t["loss_curve"], dtype=np.float64)
        end = curve[-max(1, round(len(curve) * 0.1)):].mean()
        if not t.meta.diverged and end > 10 * curve[0]:
            out[f"{arch}_sigmoid_d{depth}.initial_loss"] = curve[0]
            out[f"{arch}_sigmoid_d{depth}.final_train_loss_avg"] = end
    return out


@pytest.mark.xdist_group(scene_group(GradientFlowOverTraining, "en"))
def test_gradient_flow_numbers_equal_the_trace(built):
    s = built(GradientFlowOverTraining, "en")
    expected = gradient_flow_numbers(s.traces)
    assert s.numbers["values"] == pytest.approx(expected, rel=1e-9)
    # the colour bar is labelled with the range the trace holds (8 plain sigmoid blocks: 1e-9 .. 1e0 here)
    bottom, top = int(expected["scale.log10_bottom"]), int(expected["scale.log10_top"])
    assert top - bottom > 6, "the committed trace holds more than the old fixed 6 decades"
    texts = {m.text for m in text_mobjects(s.mobjects)}
    assert {power_of_ten(bottom), power_of_ten(top)} <= texts, texts


@pytest.mark.slow  # a twin: test_depth_sweep_numbers_when_tampered is the default run's number twin here
def test_gradient_flow_numbers_when_tampered(tmp_path):
    """The twin: a residual trace with its input half three decades dimmer reports other numbers."""
    files = one_seed(tiny_trace_files("vanishing"))
    trace = Trace.load(files["residual_sigmoid_d8"])
    g = trace.arrays["out_grad_norm"]
    trace.arrays["out_grad_norm"] = g * np.where(np.arange(g.shape[1]) < 4, 1e-3, 1.0)
    files["residual_sigmoid_d8"] = str(trace.save(tmp_path / "tampered.npz"))
    s = dry_run(variant(GradientFlowOverTraining, files=files), tmp_path)
    clean = gradient_flow_numbers({n: Trace.load(p) for n, p in one_seed(tiny_trace_files("vanishing")).items()})
    assert s.numbers["values"] != pytest.approx(clean, rel=1e-9)
    assert s.numbers["values"] == pytest.approx(gradient_flow_numbers(s.traces), rel=1e-9)


def test_a_residual_run_whose_loss_blew_up_is_said_so(tmp_path):
    """A finite run that did not train (its loss grew from step 0 on) gets a line saying so, with both losses;
    the same run with its real loss curve gets none (test_gradient_flow_numbers_equal_the_trace)."""
    files = one_seed(tiny_trace_files("vanishing"))
    trace = Trace.load(files["residual_sigmoid_d8"])
    curve = trace.arrays["loss_curve"]
    trace.arrays["loss_curve"] = (curve[0] * np.logspace(0, 20, len(curve))).astype(curve.dtype)
    files["residual_sigmoid_d8"] = str(trace.save(tmp_path / "blew_up.npz"))
    s = dry_run(variant(GradientFlowOverTraining, files=files), tmp_path)
    expected = gradient_flow_numbers(s.traces)
    assert {"residual_sigmoid_d8.initial_loss", "residual_sigmoid_d8.final_train_loss_avg"} <= set(expected)
    assert s.numbers["values"] == pytest.approx(expected, rel=1e-6)
    (line,) = [c.content for c in s.renderer.file_writer.subcaptions if "did not train" in c.content]
    assert line.startswith("Careful: this residual net's loss grew from 2.") and "×10²⁰" in line, line


def depth_sweep_numbers(seed_traces: dict[int, dict[str, Trace]], model: str = "mlp") -> dict[str, float]:
    """Every seed's ratio, final error and divergence, per-depth medians, the seed counts of the claims."""
    out, cells = {}, {}
    for seed, traces in seed_traces.items():
        for name, t in traces.items():
            if t.run_config.model != model:
                continue
            arch, depth = t.run_config.arch, t.run_config.depth
            g = t["grad_norm"][0]
            diverged = bool(t.meta.diverged)
            ratio, error = float(g[0] / g[-1]), math.nan if diverged else tail_mean(t["error_curve"])
            out[f"{arch}.d{depth}.seed.{seed}.ratio"], out[f"{arch}.d{depth}.seed.{seed}.error"] = ratio, error
            out[f"{arch}.d{depth}.seed.{seed}.diverged"] = float(diverged)
            cells.setdefault((arch, depth), []).append((ratio, error))
    depths = sorted({d for _, d in cells})
    for (arch, depth), values in cells.items():
        errors = [e for _, e in values if math.isfinite(e)]
        out[f"{arch}.d{depth}.median_ratio"] = float(np.median([r for r, _ in values]))
        out[f"{arch}.d{depth}.median_error"] = float(np.median(errors)) if errors else "nan"
    lo, hi, seeds = depths[0], depths[-1], sorted(seed_traces)
    v = lambda arch, d, s, k: out[f"{arch}.d{d}.seed.{s}.{k}"]  # noqa: E731

    def worse(arch, s):
        deep, shallow = v(arch, hi, s, "diverged"), v(arch, lo, s, "diverged")
        return bool(deep and not shallow) if deep or shallow else v(arch, hi, s, "error") > v(arch, lo, s, "error") + 0.01

    counts = {"plain.ratio_falls": sum(v("plain", hi, s, "ratio") < 0.1 * v("plain", lo, s, "ratio") for s in seeds),
              "residual.ratio_within_decade": sum(all(0.1 <= v("residual", d, s, "ratio") <= 10 for d in depths)
                                                  for s in seeds),
              "plain.deeper_worse": sum(worse("plain", s) for s in seeds),
              "residual.deeper_worse": sum(worse("residual", s) for s in seeds)}
    for key, n in counts.items():
        out[f"{key}.seeds"], out[f"{key}.of"] = n, len(seeds)
    medians = np.array([out[f"plain.d{d}.median_ratio"] for d in depths])
    ok = medians > 0
    out["plain.decades_per_block"] = float(np.polyfit(np.array(depths)[ok], np.log10(medians[ok]), 1)[0])
    out["error_margin_points"] = 1.0
    return out


def test_sweep_counts_on_the_tiny_sweep_hold_fail_and_abstain():
    """sweep_counts (no Manim) on the committed seeds equals depth_sweep_numbers' recomputation from the arrays;
    then each claim made to hold, to fail, and to lose one seed's verdict to a missing value."""
    seed_traces = _seed_traces()
    points, seeds = sweep_points(seed_traces), sorted(seed_traces)
    expected = depth_sweep_numbers(seed_traces)
    counts = sweep_counts(points, seeds)
    assert counts == {key: (expected[f"{key}.seeds"], expected[f"{key}.of"]) for key in counts}
    n, nan = len(seeds), float("nan")
    lo, hi = min(points["plain"]), max(points["plain"])

    def edited(arch: str, key: str, deep, first=None, base=points) -> dict:
        """A copy of ``base`` with ``arch``'s deepest ``key`` set to ``deep(shallowest value)`` in every seed,
        and to ``first`` in the first seed when given."""
        out = {a: {d: {s: dict(c) for s, c in cells.items()} for d, cells in by.items()} for a, by in base.items()}
        for s in seeds:
            out[arch][hi][s][key] = first if first is not None and s == seeds[0] else deep(out[arch][lo][s][key])
        return out

    def count(p: dict, claim: str) -> tuple[int, int]:
        return sweep_counts(p, seeds)[claim]

    assert count(edited("plain", "ratio", lambda shallow: 0.01 * shallow), "plain.ratio_falls") == (n, n)
    assert count(edited("plain", "ratio", lambda shallow: shallow), "plain.ratio_falls") == (0, n)
    assert count(edited("plain", "ratio", lambda shallow: 0.01 * shallow, first=nan), "plain.ratio_falls") == (n - 1, n - 1)
    flat = edited("residual", "ratio", lambda _: 1.0)
    for d in flat["residual"]:
        for cell in flat["residual"][d].values():
            cell["ratio"] = 1.0
    assert count(flat, "residual.ratio_within_decade") == (n, n)
    assert count(edited("residual", "ratio", lambda _: 50.0, base=flat), "residual.ratio_within_decade") == (0, n)
    assert count(edited("residual", "ratio", lambda _: 1.0, first=nan, base=flat),
                 "residual.ratio_within_decade") == (n - 1, n - 1)
    assert count(edited("residual", "error", lambda shallow: shallow + 0.5), "residual.deeper_worse") == (n, n)
    assert count(edited("residual", "error", lambda shallow: shallow), "residual.deeper_worse") == (0, n)
    assert count(edited("residual", "diverged", lambda _: 1.0), "residual.deeper_worse") == (n, n)
    assert count(edited("plain", "error", lambda shallow: shallow + 0.5, first=nan), "plain.deeper_worse") == (n - 1, n - 1)


@pytest.mark.parametrize("scene", [pytest.param(s, id=s.__name__, marks=pytest.mark.xdist_group(scene_group(s, "en")))
                                   for s in (DepthSweep, DepthSweepConv)])
def test_depth_sweep_numbers_equal_every_seed(scene, built):
    s = built(scene, "en")
    assert sorted(s.seed_traces) == [0, 1, 2] and s.numbers["seeds"] == [0, 1, 2]
    assert s.numbers["values"] == pytest.approx(depth_sweep_numbers(_seed_traces(), scene.model), rel=1e-9)


def test_depth_sweep_numbers_when_tampered(tmp_path):
    """The twin: seed 2's deep plain net recorded three times its error and a million times smaller first
    gradient: the scene reports both."""
    files = dict(tiny_trace_files_with_seeds("depth_sweep"))
    trace = Trace.load(files[RunKey("mlp_plain_d8", 2)])
    trace.arrays["error_curve"] = np.minimum(trace.arrays["error_curve"] * 3, 1.0)
    trace.arrays["grad_norm"] = trace.arrays["grad_norm"] * np.where(np.arange(8) == 0, 1e-6, 1.0)
    files[RunKey("mlp_plain_d8", 2)] = str(trace.save(tmp_path / "tampered.npz"))
    s = dry_run(variant(DepthSweep, files=files), tmp_path)
    assert s.numbers["values"] != pytest.approx(depth_sweep_numbers(_seed_traces()), rel=1e-9)
    assert s.numbers["values"] == pytest.approx(depth_sweep_numbers(_seed_traces(files)), rel=1e-9)


@pytest.mark.slow  # a twin: test_depth_sweep_numbers_when_tampered is the default run's number twin here
def test_depth_sweep_conv_numbers_when_tampered(tmp_path):
    """DepthSweepConv's twin: seed 1's deep conv plain net recorded half its error and a thousand times smaller
    first gradient: the scene reports both, and not the clean numbers."""
    files = dict(tiny_trace_files_with_seeds("depth_sweep"))
    trace = Trace.load(files[RunKey("conv_plain_d14", 1)])
    trace.arrays["error_curve"] = trace.arrays["error_curve"] * 0.5
    blocks = trace.arrays["grad_norm"].shape[1]
    trace.arrays["grad_norm"] = trace.arrays["grad_norm"] * np.where(np.arange(blocks) == 0, 1e-3, 1.0)
    files[RunKey("conv_plain_d14", 1)] = str(trace.save(tmp_path / "tampered.npz"))
    s = dry_run(variant(DepthSweepConv, files=files), tmp_path)
    assert s.numbers["values"] != pytest.approx(depth_sweep_numbers(_seed_traces(), "conv"), rel=1e-9)
    assert s.numbers["values"] == pytest.approx(depth_sweep_numbers(_seed_traces(files), "conv"), rel=1e-9)
