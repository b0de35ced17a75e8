"""Loss landscape (issue 23, finding 1): filter normalisation, the slice, its curvature and the claim.

Example::

    pytest tests/test_loss_landscape.py            # fast: against direct computations
    pytest tests/test_loss_landscape.py -m slow    # Li et al. 2018's claim on 5 seeds and a held-out one

- :func:`simulation.kinds.landscape.filter_normalize` against a per-filter loop in numpy (Li et al. 2018, §4, eq. 1);
- :func:`simulation.kinds.landscape.slice_loss` against a copy of the net with the moved weights loaded by hand;
- :func:`simulation.summary.slice_hessians` / ``curvature_ratio`` against the closed-form Hessian and
  eigenvalues of quadratics (Hypothesis), ``local_minima`` against a brute-force search;
- the config's errors, the experiment's runs, the scene's plain verdict functions and its numbers;
- :func:`simulation.loop.minibatch_step` (the SGD step of the landscape and hyper-connection runs) against a step
  taken by hand from ``torch.autograd.grad`` on the same drawn batch.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation.config import ConfigError, LandscapeConfig
from simulation.runs import config_from_dict
from simulation.kinds.conv import build_conv_net
from simulation.experiments import depth_run
from cli.params import build_runs  # parses string values as --set does
from simulation.runkeys import RunKey, by_seed
from simulation.kinds.landscape import filter_normalize, random_direction, run as run_landscape, slice_loss
from simulation.summary import (curvature_ratio, local_minima, nonconvex_fraction, slice_eigenvalues, slice_figures,
                                slice_hessians, summarize)
from simulation.trace import Trace

from data.make_traces import tiny_trace_files_with_seeds
from dry_run import built_scene, dry_run, scene_group
from seed_numbers import base_runs

from scenes.loss_landscape import MARGIN, LossLandscape, claim_by_seed, landscape_claim, slice_depths

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: one torch thread, as the trainers use


def tiny_net(seed: int = 0):
    torch.manual_seed(seed)
    return build_conv_net("residual", 8, 2, 10)


# -- filter normalisation --------------------------------------------------------------------------

def test_filter_normalize_matches_a_per_filter_loop():
    net = tiny_net()
    weights = {k: v.detach().clone() for k, v in net.named_parameters()}
    generator = torch.Generator().manual_seed(5)
    raw = {k: torch.randn(w.shape, generator=generator) for k, w in weights.items()}
    out = filter_normalize(raw, weights)
    for name, w in weights.items():
        d, got = raw[name].numpy().astype(np.float64), out[name].numpy()
        if w.dim() <= 1:  # BatchNorm weight / bias, the head's bias: "ignore='biasbn'" zeroes them
            assert np.all(got == 0), name
            continue
        for j in range(w.shape[0]):  # one filter = one output channel (conv) or one output unit (Linear)
            expected = d[j] / (np.sqrt(np.sum(d[j] ** 2)) + 1e-10) * np.sqrt(np.sum(w[j].numpy().astype(np.float64) ** 2))
            np.testing.assert_allclose(got[j], expected, rtol=1e-5, atol=1e-7, err_msg=f"{name}[{j}]")


def test_filter_normalize_check_can_fail():
    """Layer-wise normalisation (one scale per tensor) is not filter-wise: the per-filter norms then differ."""
    net = tiny_net()
    weights = {k: v.detach() for k, v in net.named_parameters()}
    raw = {k: torch.randn(w.shape, generator=torch.Generator().manual_seed(5)) for k, w in weights.items()}
    name = "blocks.0.branch.0.weight"
    layer_wise = raw[name] * weights[name].norm() / raw[name].norm()
    filter_norms = layer_wise.flatten(1).norm(dim=1)
    assert not torch.allclose(filter_norms, weights[name].flatten(1).norm(dim=1), rtol=1e-3)
    assert torch.allclose(filter_normalize(raw, weights)[name].flatten(1).norm(dim=1),
                          weights[name].flatten(1).norm(dim=1), rtol=1e-5)


def test_random_directions_are_seeded_and_distinct():
    weights = {k: v.detach() for k, v in tiny_net().named_parameters()}
    a = random_direction(weights, torch.Generator().manual_seed(1))
    b = random_direction(weights, torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(1)
    first, second = random_direction(weights, g), random_direction(weights, g)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(first[k], second[k]) for k in first if first[k].dim() > 1)


# -- the slice -------------------------------------------------------------------------------------

def test_slice_loss_equals_a_copy_with_the_moved_weights_loaded():
    net = tiny_net(1)
    net.train()
    with torch.no_grad():  # give BatchNorm running statistics that are not the defaults
        net(torch.randn(32, 64))
    weights = {k: v.detach().clone() for k, v in net.named_parameters()}
    g = torch.Generator().manual_seed(2)
    delta, eta = random_direction(weights, g), random_direction(weights, g)
    x, y = torch.randn(16, 64, generator=g), torch.randint(10, (16,), generator=g)
    coords = np.array([-0.5, 0.0, 0.75])
    loss, error = slice_loss(net, weights, delta, eta, coords, x, y)
    assert net.training, "slice_loss leaves the mode as it was"
    for i, a in enumerate(coords):
        for j, b in enumerate(coords):
            moved = copy.deepcopy(net)
            state = moved.state_dict()
            for k in weights:
                state[k] = weights[k] + a * delta[k] + b * eta[k]
            moved.load_state_dict(state)
            moved.eval()
            with torch.no_grad():
                logits = moved(x)
            assert loss[i, j] == pytest.approx(float(torch.nn.functional.cross_entropy(logits, y)), rel=1e-5)
            assert error[i, j] == pytest.approx(float((logits.argmax(1) != y).float().mean()))
    assert all(torch.equal(p, weights[k]) for k, p in net.named_parameters()), "the net's own weights are untouched"


def test_run_records_the_slice_around_the_trained_weights():
    config = LandscapeConfig(depth=8, width=2, steps=5, grid=5, eval_examples=32, seed=3)
    trace = run_landscape(config)
    assert trace["loss_grid"].shape == trace["error_grid"].shape == (5, 5)
    assert trace["coords"].tolist() == pytest.approx([-1, -0.5, 0, 0.5, 1])
    assert trace["step"].tolist() == [5] and np.isfinite(trace["loss_curve"]).all()
    assert np.isfinite(trace["loss_grid"]).all() and 0 <= float(trace["final_test_error"]) <= 1
    # ||delta|| / ||theta|| is 1: every filter of the direction has its weight filter's norm
    assert trace["direction_norm"].tolist() == pytest.approx([1.0, 1.0], rel=1e-4)
    again = run_landscape(config)
    assert np.array_equal(trace["loss_grid"], again["loss_grid"]), "bit-identical on CPU"
    summary = summarize(trace).to_dict()
    assert summary["nonconvex_fraction"] == pytest.approx(slice_figures(trace)["nonconvex_fraction"])
    assert summary["local_minima"] == len(local_minima(trace["loss_grid"]))


# -- curvature of a sampled surface ----------------------------------------------------------------

def quadratic_grid(p: float, q: float, r: float, s: float, t: float, grid: int = 7, span: float = 1.0):
    coords = np.linspace(-span, span, grid)
    a, b = np.meshgrid(coords, coords, indexing="ij")
    return p * a ** 2 + q * b ** 2 + r * a * b + s * a + t * b + 0.3, coords[1] - coords[0]


coefficient = st.floats(-5, 5, allow_nan=False).filter(lambda v: abs(v) > 1e-3)


@settings(max_examples=60, deadline=None)
@given(coefficient, coefficient, coefficient, st.floats(-3, 3), st.floats(-3, 3))
def test_slice_hessian_is_exact_for_a_quadratic(p, q, r, s, t):
    loss, step = quadratic_grid(p, q, r, s, t)
    h = slice_hessians(loss, step)
    expected = np.array([[2 * p, r], [r, 2 * q]])
    np.testing.assert_allclose(h, np.broadcast_to(expected, h.shape), rtol=1e-6, atol=1e-6)
    # eigenvalues of [[2p, r], [r, 2q]] in closed form: p + q -+ sqrt((p - q)^2 + r^2)
    root = math.sqrt((p - q) ** 2 + r ** 2)
    low, high = p + q - root, p + q + root
    np.testing.assert_allclose(slice_eigenvalues(loss, step)[2, 3], [low, high], rtol=1e-6, atol=1e-6)
    ratio = max(-low, 0.0) / max(abs(low), abs(high))
    np.testing.assert_allclose(curvature_ratio(loss, step), ratio, rtol=1e-6, atol=1e-9)


def test_bowl_saddle_and_ridge():
    bowl, step = quadratic_grid(1, 2, 0, 0, 0)
    saddle, _ = quadratic_grid(1, -1, 0, 0, 0)
    ridge, _ = quadratic_grid(1, -3, 0, 0, 0)
    assert np.all(curvature_ratio(bowl, step) == 0) and nonconvex_fraction(bowl, step) == 0
    assert np.allclose(curvature_ratio(saddle, step), 1) and nonconvex_fraction(saddle, step) == 1
    assert np.allclose(curvature_ratio(ridge, step), 1)  # curves down 3x as strongly as up: capped at 1
    assert len(local_minima(bowl)) == 1 and len(local_minima(saddle)) == 0


def brute_force_minima(f: np.ndarray) -> list[tuple[int, int]]:
    out = []
    for i in range(1, f.shape[0] - 1):
        for j in range(1, f.shape[1] - 1):
            around = [f[i + di, j + dj] for di in (-1, 0, 1) for dj in (-1, 0, 1) if di or dj]
            if np.isfinite(f[i, j]) and all(not np.isnan(v) and f[i, j] < v for v in around):
                out.append((i, j))
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 9), st.integers(0, 2**31 - 1), st.sampled_from([None, np.nan, np.inf]))
def test_local_minima_match_a_brute_force_search(grid, seed, hole):
    rng = np.random.default_rng(seed)
    f = rng.integers(0, 5, size=(grid, grid)).astype(np.float64)  # ties are common: strictly lower only
    if hole is not None:
        f[rng.integers(grid), rng.integers(grid)] = hole
    assert [tuple(m) for m in local_minima(f)] == brute_force_minima(f)


def test_a_missing_loss_is_missing_curvature_not_a_number():
    loss, step = quadratic_grid(1, 1, 0, 0, 0)
    loss[3, 3] = np.nan
    ratio = curvature_ratio(loss, step)
    assert np.isnan(ratio[1:4, 1:4]).all() and np.isfinite(ratio[0, 0])
    assert math.isnan(nonconvex_fraction(np.full((5, 5), np.nan), 0.5))
    figures = slice_figures({"coords": np.linspace(-1, 1, 7), "loss_grid": loss})
    assert math.isnan(figures["local_minima"]) and math.isfinite(figures["nonconvex_fraction"])


@pytest.mark.parametrize("bad", [np.zeros((2, 2)), np.zeros((3, 4)), np.zeros(5)])
def test_slice_hessians_refuse_a_grid_that_is_not_square(bad):
    with pytest.raises(ValueError, match="square grid"):
        slice_hessians(bad, 0.1)


# -- config and experiment -------------------------------------------------------------------------

@pytest.mark.parametrize(("bad", "message"), [({"depth": 0}, "depth"), ({"grid": 2}, "grid"),
                                               ({"span": 0.0}, "span"), ({"arch": "dense"}, "arch")])
def test_bad_landscape_config_is_one_clear_error(bad, message):
    with pytest.raises(ConfigError, match=message) as info:
        LandscapeConfig(**bad)
    assert "\n" not in str(info.value)


def test_landscape_config_round_trips_and_every_field_is_in_the_digest():
    config = LandscapeConfig(arch="plain", depth=14, grid=9)
    assert config_from_dict(config.to_dict()) == config
    for change in ({"grid": 11}, {"span": 0.5}, {"eval_examples": 100}, {"weight_decay": 0.0}, {"seed": 1},
                   {"width": 4}, {"steps": 10}, {"lr": 0.05}, {"batch_size": 64}):
        assert config.replace(**change).digest() != config.digest(), change


def test_a_depth_that_is_not_6n_plus_2_is_refused_before_any_work(capsys):
    from simulation.kinds.landscape import main

    assert main(["--set", "depth=21"]) == 2
    err = capsys.readouterr().err
    assert "6n + 2" in err and err.count("\n") == 1
    with pytest.raises(ConfigError, match="6n"):
        run_landscape(LandscapeConfig(depth=21))
    # a global --set depth=3 (meant for the MLP experiments) does not break this experiment: depths decide
    assert {c.depth for c in build_runs("loss_landscape", {"depth": "3"}).values()} == {20, 56}


def test_experiment_builds_plain_and_residual_at_every_depth_and_seed():
    runs = build_runs("loss_landscape", {"depths": "8,14", "seeds": "0,4"})
    assert set(runs) == {RunKey(depth_run(a, d), s) for a in ("plain", "residual") for d in (8, 14) for s in (0, 4)}
    assert runs[RunKey("plain_d14", 4)].seed == 4 and runs[RunKey("plain_d14", 0)].arch == "plain"
    with pytest.raises(ConfigError, match="6n"):
        build_runs("loss_landscape", {"depths": "8,15"})


# -- the scene's verdict functions and numbers -----------------------------------------------------

def fake_trace(loss: np.ndarray) -> dict[str, np.ndarray]:
    return {"coords": np.linspace(-1, 1, loss.shape[0]), "loss_grid": loss}


def test_landscape_claim_on_a_bowl_and_a_rugged_surface():
    bowl, _ = quadratic_grid(1, 1, 0, 0, 0, grid=9)
    coords = np.linspace(-1, 1, 9)
    a, b = np.meshgrid(coords, coords, indexing="ij")
    rugged = bowl + 0.5 * np.sin(9 * a) * np.cos(7 * b)
    assert landscape_claim(fake_trace(rugged), fake_trace(bowl)) is True
    assert landscape_claim(fake_trace(bowl), fake_trace(rugged)) is False
    assert landscape_claim(fake_trace(bowl), fake_trace(bowl)) is False  # equal is not "more", by MARGIN
    assert landscape_claim(fake_trace(np.full((9, 9), np.nan)), fake_trace(bowl)) is None


def test_claim_by_seed_counts_each_seed_with_both_runs():
    bowl, _ = quadratic_grid(1, 1, 0, 0, 0, grid=9)
    saddle, _ = quadratic_grid(1, -1, 0, 0, 0, grid=9)
    seeds = {0: {"plain_d56": fake_trace(saddle), "residual_d56": fake_trace(bowl)},
             1: {"plain_d56": fake_trace(bowl), "residual_d56": fake_trace(bowl)},
             2: {"plain_d56": fake_trace(saddle)}}
    assert claim_by_seed(seeds, 56) == {0: True, 1: False}


def test_slice_depths_need_both_archs():
    class T:
        def __init__(self, depth):
            self.run_config = LandscapeConfig(depth=depth)
    runs = {"plain_d8": T(8), "residual_d8": T(8), "plain_d14": T(14)}
    assert slice_depths(runs) == [8]


def landscape_numbers(traces: dict[RunKey, Trace]) -> dict[str, float]:
    """Every number LossLandscape must report, recomputed from the arrays here."""
    out = {}
    base = base_runs(traces)
    depths = sorted({t.run_config.depth for t in base.values()})
    for d_index, depth in enumerate(depths):
        out[f"depth.{d_index}"] = depth
    for name, t in base.items():
        figures = slice_figures(t)
        out[f"{name}.nonconvex_fraction_pct"] = 100 * figures["nonconvex_fraction"]
        out[f"{name}.mean_curvature_ratio"] = figures["mean_curvature_ratio"]
        out[f"{name}.local_minima"] = figures["local_minima"]
        out[f"{name}.test_error_pct"] = 100 * float(t["final_test_error"])
        g = t["loss_grid"]
        out[f"{name}.centre_loss"] = float(g[g.shape[0] // 2, g.shape[1] // 2])
    for key, t in traces.items():
        out[f"{key.name}.seed.{key.seed}.nonconvex_fraction_pct"] = 100 * slice_figures(t)["nonconvex_fraction"]
    config = next(iter(base.values())).run_config
    out.update({"steps": config.steps, "eval_examples": config.eval_examples, "grid": config.grid})
    logs = np.concatenate([np.log10(t["loss_grid"]).ravel() for t in base.values()])
    span = logs.max() - logs.min()
    out["contour_decades"] = 0.5 if span <= 6 else 1.0 if span <= 12 else 2.0
    deep = depths[-1]
    seeds = by_seed(traces)
    verdicts = [landscape_claim(runs[depth_run("plain", deep)], runs[depth_run("residual", deep)])
                for runs in seeds.values()]
    out["claim.seeds"], out["claim.of"] = sum(bool(v) for v in verdicts), len(verdicts)
    return out


def tiny_files() -> dict[RunKey, str]:
    files = tiny_trace_files_with_seeds("loss_landscape")
    assert files is not None, "run python tests/data/make_traces.py loss_landscape"
    return files


@pytest.mark.xdist_group(scene_group(LossLandscape, "en"))
def test_scene_numbers_equal_the_trace():
    files = tiny_files()
    built = built_scene(LossLandscape, "en", files)
    expected = landscape_numbers({k: Trace.load(v) for k, v in files.items()})
    shown = built.numbers["values"]
    assert set(shown) == set(expected), (set(shown) ^ set(expected))
    for key, value in expected.items():
        assert shown[key] == pytest.approx(value, rel=1e-6, abs=1e-12), key


def test_scene_numbers_change_with_a_tampered_grid(tmp_path):
    """The twin: a rugged grid for the deepest plain net changes its non-convex fraction and the verdict count."""
    files = dict(tiny_files())
    trace = Trace.load(files[RunKey("plain_d14", 0)])
    g = trace.arrays["loss_grid"].astype(np.float64)
    idx = np.indices(g.shape).sum(0)
    trace.arrays["loss_grid"] = (g * np.where(idx % 2, 3.0, 1.0)).astype(np.float32)  # a checkerboard
    files[RunKey("plain_d14", 0)] = str(trace.save(tmp_path / "plain_d14.npz"))
    scene = type("LossLandscape", (LossLandscape,), {"trace_files": files, "lang": "en"})
    built = dry_run(scene, tmp_path / "media")
    untampered = landscape_numbers({k: Trace.load(v) for k, v in tiny_files().items()})
    assert built.numbers["values"]["plain_d14.nonconvex_fraction_pct"] != pytest.approx(
        untampered["plain_d14.nonconvex_fraction_pct"])
    assert built.numbers["values"] == pytest.approx(landscape_numbers({k: Trace.load(v) for k, v in files.items()}))


# -- Li et al. 2018's claim on 5 seeds and a held-out one (slow) -----------------------------------

# Tiny nets so that the claim costs ~1.5 min of one core: 20 layers (ResNet-20 and its plain twin) of width 4,
# 80 SGD steps, a 9 x 9 slice on 128 examples. Measured (seeds 0-5): plain 25-53 % of the slice non-convex,
# residual 4-14 %.
CLAIM = {"depth": 20, "width": 4, "steps": 80, "grid": 9, "eval_examples": 128}
CLAIM_SEEDS, HELD_OUT = (0, 1, 2, 3, 4), 5


def claim_on_seed(seed: int) -> bool | None:
    plain, residual = (run_landscape(LandscapeConfig(arch=arch, seed=seed, **CLAIM)) for arch in ("plain", "residual"))
    return landscape_claim(plain, residual)


@pytest.mark.slow
def test_without_skips_the_slice_is_less_convex_on_at_least_4_of_5_seeds_and_the_held_out_seed():
    verdicts = [claim_on_seed(seed) for seed in CLAIM_SEEDS]
    assert sum(bool(v) for v in verdicts) >= 4, verdicts
    assert claim_on_seed(HELD_OUT) is True



# -- the optional chapter -------------------------------------------------------------------------

def test_the_lecture_leaves_the_optional_chapter_out_unless_asked():
    import scenes

    lecture, beyond = scenes.lecture_scenes(), scenes.lecture_scenes(["beyond"])
    assert LossLandscape not in lecture and LossLandscape in beyond
    assert beyond.index(LossLandscape) == beyond.index(scenes.DepthSweep) + 1  # degradation, then its landscape
    assert [s for s in beyond if getattr(s, "chapter", None) is None] == lecture
    assert all(getattr(s, "chapter", None) in scenes.CHAPTERS for s in scenes.SCENES_IN_ORDER if s not in lecture)
    with pytest.raises(KeyError, match="unknown chapter 'nope'"):
        scenes.lecture_scenes(["nope"])


def test_render_all_checks_the_chapter_and_renders_it_only_when_asked():
    from click.testing import CliRunner

    from render import cli

    runner = CliRunner()
    bad = runner.invoke(cli, ["all", "--chapter", "nope", "--check", "-q", "l"])
    assert bad.exit_code != 0 and "unknown chapter 'nope'" in bad.output and bad.output.count("\n") == 1
    plain, beyond = (runner.invoke(cli, ["all", "--check", "-q", "l", *extra]) for extra in ([], ["--chapter", "beyond"]))
    assert plain.exit_code == 0 and beyond.exit_code == 0, plain.output + beyond.output
    import scenes

    n, m = len(scenes.lecture_scenes()), len(scenes.lecture_scenes(["beyond"]))
    assert m > n and f"{n} of {n} scenes" in plain.output and f"{m} of {m} scenes" in beyond.output
    listing = runner.invoke(cli, ["list"]).output
    assert "optional chapter 'beyond'" in listing


def test_minibatch_step_is_one_step_on_the_drawn_batch_and_skips_a_non_finite_loss():
    from simulation.loop import minibatch_step

    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3)
    x, y = torch.randn(40, 5), torch.randint(0, 3, (40,))
    before = [p.detach().clone() for p in model.parameters()]
    generator = torch.Generator().manual_seed(7)
    idx = torch.randint(40, (8,), generator=torch.Generator().manual_seed(7))  # the batch the step will draw
    weight, bias = (p.detach().clone().requires_grad_() for p in before)
    expected_loss = torch.nn.functional.cross_entropy(x[idx] @ weight.T + bias, y[idx])
    grads = torch.autograd.grad(expected_loss, (weight, bias))
    loss = minibatch_step(model, torch.optim.SGD(model.parameters(), lr=0.5), x, y, 8, generator)
    assert loss == pytest.approx(expected_loss.item(), rel=1e-6)
    for p, p0, g in zip(model.parameters(), before, grads):
        torch.testing.assert_close(p.detach(), p0 - 0.5 * g, rtol=1e-6, atol=1e-7)
    x[:] = float("inf")  # a diverged forward: the loss is returned, nothing is updated
    after = [p.detach().clone() for p in model.parameters()]
    assert not math.isfinite(minibatch_step(model, torch.optim.SGD(model.parameters(), lr=0.5), x, y, 8, generator))
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), after))
