"""The study note's questions (issue 13): the quantities the new scenes read, against independent computations.

Example::

    pytest tests/test_copy_fit_belt_quantities.py

- ``input_cos`` of the Transformer recorder against cosines computed here from a hand-written forward pass;
- the identity-fit trainer: the same initial weights for both blocks, its error against a numpy closed form,
  ``tolerance_step`` against a brute-force search, determinism;
- :func:`simulation.summary.ratio_course` and :func:`first_step_below` against brute-force versions on
  generated curves (NaN, flat, monotone, V-shaped);
- the three experiments' runs and parameter errors; the scenes' numbers against the tiny traces.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simulation.config import ConfigError, IdentityFitConfig, TransformerConfig
from simulation.runs import config_from_dict
from cli.params import build_runs  # parses string values as --set does
from simulation.runkeys import RunKey, by_name, one_seed
from simulation.kinds.identity_fit import build_block, relative_error, run as fit_identity
from simulation.summary import COURSES, first_step_below, ratio_course, summarize
from simulation.trace import Trace
from simulation.kinds.transformer import make_task

from data.make_traces import tiny_trace_files, tiny_trace_files_with_seeds
from dry_run import built_scene, dry_run, scene_group
from seed_numbers import base_runs
from support import TRANSFORMER_TINY, forward_keeping_layers, recorded_transformer_row, tiny_transformer

from scenes.conveyor_belt import ConveyorBelt, encoder_cos
from scenes.does_it_copy import NEAR_ZERO, DoesItOnlyCopy, branch_ratios
from scenes.identity_fit import IdentityFit, error_points
from scenes.kit.seeds import SeedSpread

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: the trainer's one torch thread


# -- the Transformer's conveyor belt ---------------------------------------------------------------

@pytest.mark.parametrize("norm", ["post_ln", "pre_ln"])
@pytest.mark.parametrize("arch", ["encoder", "encoder_decoder"])
def test_input_cos_is_the_cosine_to_the_input_of_the_stack(norm, arch):
    config, model = tiny_transformer(3, norm=norm, arch=arch)
    src, tgt_in, tgt = make_task(config.task, config.vocab, config.seq_len, 8, torch.Generator().manual_seed(4))
    with torch.no_grad():
        _, outputs = forward_keeping_layers(model, src, tgt_in)
        inputs = [model._embed(src)] * len(model.encoder) + [model._embed(tgt_in)] * len(model.decoder)
    expected = []
    for x0, h in zip(inputs, outputs):  # cos per token, by hand: a.b / (|a| |b|)
        a, b = x0.numpy().reshape(-1, config.width), h.numpy().reshape(-1, config.width)
        expected.append(float(np.mean((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))))
    row = recorded_transformer_row(model, src, tgt_in, tgt)
    assert row["input_cos"] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert -1 <= row["input_cos"].min() and row["input_cos"].max() <= 1


def test_input_cos_is_in_the_trace_per_record_and_layer():
    from simulation.kinds.transformer import run

    trace = run(TransformerConfig(**TRANSFORMER_TINY), progress=False)
    assert trace["input_cos"].shape == (len(trace["step"]), len(trace.meta.layers))
    assert trace["input_cos"].dtype == np.float64 and np.isfinite(trace["input_cos"]).all()


# -- identity fit ----------------------------------------------------------------------------------

def test_plain_and_residual_blocks_start_from_the_same_weights():
    plain, residual = (build_block(IdentityFitConfig(arch=a, seed=2), 64) for a in ("plain", "residual"))
    p, r = dict(plain.named_parameters()), dict(residual.named_parameters())
    assert set(p) == set(r) and all(torch.equal(p[k], r[k]) for k in p)
    other = build_block(IdentityFitConfig(arch="plain", seed=3), 64)
    assert not torch.equal(other.branch[0].weight, plain.branch[0].weight)


def test_relative_error_matches_numpy():
    rng = np.random.default_rng(0)
    h, x = rng.normal(size=(50, 7)), rng.normal(size=(50, 7))
    expected = np.mean(np.sum((h - x) ** 2, 1)) / np.mean(np.sum(x ** 2, 1))
    assert float(relative_error(torch.from_numpy(h), torch.from_numpy(x))) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("arch", ["plain", "residual"])
def test_identity_fit_trace_step0_error_and_tolerance_step(arch):
    from simulation.data import load_dataset

    config = IdentityFitConfig(arch=arch, steps=40, lr=0.01, tolerance=0.05, record_every=7, seed=1)
    trace = fit_identity(config)
    x = load_dataset("digits", seed=1).x_train.double().numpy()
    block = build_block(config, x.shape[1]).double()
    with torch.no_grad():
        f = block.branch(torch.from_numpy(x)).numpy()
    h = x + f if arch == "residual" else f  # the residual block's error at step 0 is ||F(x)||^2 / ||x||^2
    expected = np.mean(np.sum((h - x) ** 2, 1)) / np.mean(np.sum(x ** 2, 1))
    assert float(trace["loss_curve"][0]) == pytest.approx(expected, rel=1e-5)
    below = [i for i, v in enumerate(trace["loss_curve"]) if v < config.tolerance]
    assert int(trace["tolerance_step"]) == (below[0] if below else -1)
    assert trace["step"].tolist() == [0, 7, 14, 21, 28, 35, 39]
    assert trace["branch_ratio"][0] == pytest.approx(np.linalg.norm(f, axis=1).mean() / np.linalg.norm(x, axis=1).mean(),
                                                     rel=1e-5)
    again = fit_identity(config)
    assert all(np.array_equal(trace[k], again[k]) for k in trace.arrays)
    summary = summarize(trace)
    assert summary.tolerance_step == int(trace["tolerance_step"]) and summary.final_error is None


@pytest.mark.parametrize("bad, message", [
    ({"arch": "dense"}, "arch must be one of"), ({"tolerance": 0.0}, "tolerance must be"),
    ({"lr": float("nan")}, "lr must be"), ({"steps": 0}, "steps must be"), ({"steps": 2.5}, "steps must be int"),
    ({"kind": "mlp"}, "kind must be one of"), ({"momentum": 1.0}, "momentum must be"),
])
def test_bad_identity_fit_config_is_one_clear_error(bad, message):
    with pytest.raises(ConfigError, match=message):
        IdentityFitConfig(**bad)


def test_identity_fit_config_round_trips_and_has_its_own_digest():
    config = IdentityFitConfig(arch="residual", lr=0.003)
    assert config_from_dict(config.to_dict()) == config
    assert config.digest() != IdentityFitConfig(arch="plain", lr=0.003).digest()


# -- the course of a ratio, and the first step below a tolerance -------------------------------------

def _course_by_hand(v: list[float], margin: float) -> str:
    finite = [x for x in v if x == x]
    start, end, low = finite[0], finite[-1], min(finite)
    if low < start * (1 - margin):
        return "shrinks_then_grows" if end > low * (1 + margin) else "shrinks"
    return "grows" if end > start * (1 + margin) else "flat"


def test_ratio_course_matches_a_by_hand_version_on_generated_curves():
    rng = np.random.default_rng(13)
    seen = set()
    for _ in range(400):
        n = int(rng.integers(2, 30))
        shape = rng.choice(["walk", "v", "down", "up", "flat"])
        t = np.linspace(0, 1, n)
        v = {"walk": np.exp(np.cumsum(rng.normal(0, 0.3, n))), "v": 0.2 + (t - rng.uniform()) ** 2,
             "down": 1.5 - t, "up": 0.5 + t, "flat": np.full(n, 0.7)}[shape]
        v = v.astype(np.float64)
        if n > 3 and rng.uniform() < 0.3:
            v[rng.integers(1, n - 1)] = np.nan  # a missing record inside the run
        if np.isfinite(v).sum() < 2:
            continue
        margin = float(rng.choice([0.0, 0.1, 0.2, 0.5]))
        got = ratio_course(v, margin)
        assert got["course"] == _course_by_hand(list(v), margin)
        assert got["low"] == pytest.approx(np.nanmin(v)) and v[got["low_index"]] == got["low"]
        assert got["settle_index"] <= got["low_index"]
        assert v[got["settle_index"]] <= got["low"] * (1 + margin)
        seen.add(got["course"])
    assert seen == set(COURSES), "the generated curves must cover every course"


def test_ratio_course_refuses_too_few_values():
    with pytest.raises(ValueError, match="at least two finite"):
        ratio_course([np.nan, 1.0, np.nan])


def test_first_step_below_matches_brute_force():
    rng = np.random.default_rng(5)
    for _ in range(300):
        curve = rng.uniform(0, 1, int(rng.integers(1, 20)))
        curve[rng.uniform(size=len(curve)) < 0.2] = np.nan
        tol = float(rng.uniform(0, 1))
        expected = next((i for i, v in enumerate(curve) if v < tol), -1)
        assert first_step_below(curve, tol) == expected


# -- the experiments -----------------------------------------------------------------------------

def test_seeded_experiments_take_the_global_seeds_and_share_configs():
    copy = build_runs("does_it_copy", {"seeds": "10,11,12"})
    assert list(copy) == [RunKey("residual", 10), RunKey("residual", 11), RunKey("residual", 12)]
    assert [c.seed for c in copy.values()] == [10, 11, 12] and all(c.arch == "residual" for c in copy.values())
    assert copy[RunKey("residual", 10)] == one_seed(build_runs("residual_response", {"seed": 10}))["residual"]
    assert list(one_seed(build_runs("does_it_copy", {}))) == ["residual"]  # no seeds: the one run of ``seed``
    belt = build_runs("conveyor_belt", {"seeds": "0,1"})
    assert sorted(belt) == [RunKey("post_ln", 0), RunKey("post_ln", 1), RunKey("pre_ln", 0), RunKey("pre_ln", 1)]
    assert belt[RunKey("post_ln", 0)] == one_seed(build_runs("layernorm", {}))["post_ln_warmup"]
    assert belt[RunKey("post_ln", 1)] == belt[RunKey("post_ln", 0)].replace(seed=1)
    assert belt[RunKey("pre_ln", 0)].warmup_steps == belt[RunKey("post_ln", 0)].warmup_steps  # one schedule
    fit = build_runs("identity_fit", {"steps": 30})
    assert {c.arch for c in fit.values()} == {"plain", "residual"} and {c.steps for c in fit.values()} == {30}
    for experiment in ("does_it_copy", "conveyor_belt"):
        with pytest.raises(ConfigError, match="seeds must be"):
            build_runs(experiment, {"seeds": "1,1"})


# -- the scenes show the traces' numbers --------------------------------------------------------------

def _built(scene: type, tmp_path, files: dict[RunKey, str] | None = None):
    files = files or _tiny(scene)
    return dry_run(type(scene.__name__, (scene,), {"trace_files": files}), tmp_path), {
        k: Trace.load(v) for k, v in files.items()}


def _tiny(scene: type) -> dict[RunKey, str]:
    """The committed tiny traces of ``scene``'s experiment, every seed's for a scene that shows seeds."""
    return (tiny_trace_files_with_seeds if issubclass(scene, SeedSpread) else tiny_trace_files)(scene.experiment)


def by_seed(traces: dict[RunKey, Trace], name: str) -> dict[int, Trace]:
    """``{seed: trace}`` of run ``name``, the first seed first."""
    return by_name(traces)[name]


def _mean_ratio(t: Trace) -> np.ndarray:
    return (t["branch_norm"].astype(np.float64) / t["input_norm"].astype(np.float64)).mean(1)


def does_it_copy_numbers(traces: dict[RunKey, Trace]) -> dict[str, float]:
    seeds = by_seed(traces, "residual")
    t = base_runs(traces)["residual"]
    r = t["branch_norm"].astype(np.float64) / t["input_norm"].astype(np.float64)
    mean, loss, steps = r.mean(1), t["loss"].astype(np.float64), t["step"]
    courses = [ratio_course(_mean_ratio(trace))["course"] for trace in seeds.values()]
    low = int(np.argmin(mean))
    settle = int(np.flatnonzero(mean <= mean[low] * 1.2)[0])
    out = {f"step.{s}.mean_ratio": m for s, m in zip(steps, mean)}
    out.update({f"step.{s}.loss": v for s, v in zip(steps, loss)})
    out.update({f"block.{l}.ratio_step0": r[0, l] for l in range(r.shape[1])})
    out.update({f"block.{l}.ratio_final": r[-1, l] for l in range(r.shape[1])})
    for seed, trace in seeds.items():
        m = _mean_ratio(trace)
        out.update({f"residual.seed.{seed}.course.start": m[0], f"residual.seed.{seed}.course.low": m.min(),
                    f"residual.seed.{seed}.course.end": m[-1]})
    out.update({"seeds.agree": sum(c == courses[0] for c in courses), "seeds.total": len(seeds),
                "course.start": mean[0], "course.low": mean[low], "course.low_step": steps[low],
                "course.last_step": steps[-1], "course.end": mean[-1], "course.settle_step": steps[settle],
                "course.loss_step0": loss[0]})
    if courses[0] == "shrinks":
        out["course.loss_at_settle"] = loss[settle]
    else:
        out["course.loss_final"] = loss[-1]
    return out


def identity_fit_numbers(traces: dict[RunKey, Trace]) -> dict[str, float]:
    out, traces = {}, base_runs(traces)
    for name, t in traces.items():
        curve = t["loss_curve"].astype(np.float64)
        keep = np.unique(np.linspace(0, len(curve) - 1, min(200, len(curve))).round().astype(int))
        out.update({f"{name}.step.{i}.relative_error": curve[i] for i in keep})
        out[f"{name}.step0_error"] = curve[0]
        if int(t["tolerance_step"]) >= 0:
            out[f"{name}.tolerance_step"] = int(t["tolerance_step"])
    config = traces["residual"].run_config
    out.update({"lr": config.lr, "tolerance": config.tolerance, "steps": config.steps})
    if "plain.tolerance_step" in out and "residual.tolerance_step" in out:
        out["plain_over_residual_steps"] = out["plain.tolerance_step"] / max(out["residual.tolerance_step"], 1)
    return out


def conveyor_belt_numbers(traces: dict[RunKey, Trace]) -> dict[str, float]:
    out, top, base = {}, {}, base_runs(traces)
    for norm in ("post_ln", "pre_ln"):
        for seed, t in by_seed(traces, norm).items():
            enc = [i for i, layer in enumerate(t.meta.layers) if layer.startswith("encoder.")]
            cos = np.concatenate([np.ones((len(t["step"]), 1)), t["input_cos"][:, enc]], axis=1)
            top[norm, seed] = cos[-1, -1]
            out[f"{norm}.seed.{seed}.top_cos_step0"], out[f"{norm}.seed.{seed}.top_cos_final"] = cos[0, -1], cos[-1, -1]
            if t is base[norm]:  # the first seed, drawn in full
                out.update({f"{norm}.layer.{l}.cos_step0": cos[0, l] for l in range(cos.shape[1])})
                out.update({f"{norm}.layer.{l}.cos_final": cos[-1, l] for l in range(cos.shape[1])})
                out[f"{norm}.top_cos_final"], out[f"{norm}.top_cos_step0"] = cos[-1, -1], cos[0, -1]
                out["step"] = float(t["step"][-1])
    seeds = sorted({seed for _, seed in top})
    out["seeds.total"] = len(seeds)
    out["seeds.pre_keeps_more"] = sum(top["pre_ln", k] > top["post_ln", k] for k in seeds)
    return out


CASES = {DoesItOnlyCopy: (does_it_copy_numbers, RunKey("residual", 0), "branch_norm"),
         IdentityFit: (identity_fit_numbers, RunKey("plain", 0), "loss_curve"),
         ConveyorBelt: (conveyor_belt_numbers, RunKey("pre_ln", 0), "input_cos")}


def _match(shown: dict, expected: dict) -> None:
    assert set(shown) == set(expected), f"extra {set(shown) - set(expected)}, missing {set(expected) - set(shown)}"
    for key, value in expected.items():
        assert shown[key] == pytest.approx(float(value), rel=1e-6, abs=1e-12), key


@pytest.mark.parametrize("scene", [pytest.param(s, id=s.__name__, marks=pytest.mark.xdist_group(scene_group(s, "en")))
                                   for s in CASES])
def test_scene_numbers_equal_the_trace_and_change_with_it(scene, tmp_path):
    expected, run, key = CASES[scene]
    built = built_scene(scene, "en", _tiny(scene))  # shared with test_scenes_all where the traces are the same
    traces = {k: Trace.load(v) for k, v in _tiny(scene).items()}
    _match(built.numbers["values"], expected(traces))
    tampered = dict(_tiny(scene))  # the twin: one array scaled, other numbers shown
    trace = Trace.load(tampered[run])
    trace.arrays[key] = trace.arrays[key] * 0.5
    tampered[run] = str(trace.save(tmp_path / "tampered.npz"))
    again, tampered_traces = _built(scene, tmp_path / "b", tampered)
    with pytest.raises(AssertionError):
        _match(again.numbers["values"], expected(traces))
    _match(again.numbers["values"], expected(tampered_traces))


def test_does_it_copy_says_what_the_run_shows(tmp_path):
    """The verdict text is chosen by the measured course: a flat tampered run gets the 'flat' sentence."""
    files = dict(_tiny(DoesItOnlyCopy))
    trace = Trace.load(files[RunKey("residual", 0)])
    trace.arrays["branch_norm"] = (trace["input_norm"] * 0.3).astype(np.float32)  # ratio 0.3 everywhere
    files[RunKey("residual", 0)] = str(trace.save(tmp_path / "flat.npz"))
    built, _ = _built(DoesItOnlyCopy, tmp_path / "m", files)
    texts = [getattr(m, "text", "") for m in built.mobjects for m in m.get_family()]
    flat = DoesItOnlyCopy.string("flat", "en").replace(" ", "")
    assert any(flat in t.replace(" ", "") for t in texts), texts
    values = built.numbers["values"]
    assert values["seeds.agree"] == 1 and values["seeds.total"] == 3  # the untampered seeds 1 and 2 shrink
    assert built.numbers["seeds"] == [0, 1, 2]
    assert 0.3 > NEAR_ZERO


def test_identity_fit_scene_handles_a_block_that_never_reaches_the_tolerance(tmp_path):
    files = dict(tiny_trace_files("identity_fit"))
    trace = Trace.load(files[RunKey("plain", 0)])
    trace.arrays["tolerance_step"] = np.int64(-1)
    files[RunKey("plain", 0)] = str(trace.save(tmp_path / "never.npz"))
    built, _ = _built(IdentityFit, tmp_path / "m", files)
    assert "plain.tolerance_step" not in built.numbers["values"]
    texts = "".join(getattr(m, "text", "") for m in built.mobjects for m in m.get_family()).replace(" ", "")
    assert "theplainblocknotwithin" in texts


def test_conveyor_belt_counts_only_the_seeds_that_have_both_placements(tmp_path):
    """A seed whose Pre-LN run is missing keeps its Post-LN figures but is left out of "n of N seeds"."""
    files = dict(_tiny(ConveyorBelt))
    del files[RunKey("pre_ln", 1)]
    built, _ = _built(ConveyorBelt, tmp_path, files)
    values = built.numbers["values"]
    assert values["seeds.total"] == 1 and "post_ln.seed.1.top_cos_final" in values
    assert "pre_ln.seed.1.top_cos_final" not in values and built.numbers["seeds"] == [0, 1]
