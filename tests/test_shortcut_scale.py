"""Issue 23, finding 2: scaled and gated shortcuts (He et al. 2016, "Identity Mappings", §3), against
autograd, a Monte Carlo estimate of the branch gain, and the scene's numbers recomputed from the traces.

Example::

    pytest tests/test_shortcut_scale.py
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from scenes.shortcut_scale import (FOLLOW_FACTOR, ShortcutScale, branch_gain_sq, count_seeds, expected_ratio,
                                   seed_verdicts)
from simulation.config import ConfigError, RunConfig
from cli.params import build_runs  # parses string values as --set does
from simulation.models import ResidualBlock, Scale, build_model
from simulation.runkeys import RunKey, one_seed
from simulation.trace import Trace

from data.make_traces import tiny_trace_files_with_seeds
from dry_run import dry_run, scene_group
from frame_checks import scene_variant
from scene_numbers import check_numbers, check_tampered_numbers


def _jacobian(fn, x: torch.Tensor) -> torch.Tensor:
    return torch.autograd.functional.jacobian(fn, x)


@pytest.mark.parametrize("scale", [0.5, 0.9, 1.1])
def test_scaled_block_jacobian_is_lambda_plus_branch_jacobian(scale):
    """dh/dx of h = lambda x + F(x) equals lambda I + dF/dx (He et al. 2016, eq. 8), by autograd on both."""
    torch.manual_seed(0)
    block = ResidualBlock(6, 6, "relu", "none", shortcut_scale=scale)
    assert isinstance(block.shortcut, Scale)
    x = torch.randn(6)
    whole = _jacobian(block, x)
    branch = _jacobian(block.branch, x)
    torch.testing.assert_close(whole, scale * torch.eye(6) + branch, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("gate", ["exclusive", "shortcut_only"])
def test_gated_block_computes_the_papers_gate(gate):
    """(1 - g) x + g F(x) or (1 - g) x + F(x), g = sigmoid(W_g x + b_g), b_g starting at gate_bias."""
    torch.manual_seed(1)
    block = ResidualBlock(5, 5, "relu", "none", gate=gate, gate_bias=-6.0)
    assert torch.all(block.gate.bias == -6.0)
    x = torch.randn(4, 5)
    g = 1 / (1 + torch.exp(-(x @ block.gate.weight.T + block.gate.bias)))
    f = block.branch(x)
    want = (1 - g) * x + (g * f if gate == "exclusive" else f)
    torch.testing.assert_close(block(x), want)


def test_the_new_fields_are_checked_and_in_the_digest():
    base = RunConfig(arch="residual", activation="relu")
    assert base.replace(shortcut_scale=0.5).digest() != base.digest()
    assert base.replace(gate="exclusive").digest() != base.replace(gate="exclusive", gate_bias=-6.0).digest()
    with pytest.raises(ConfigError, match="needs arch=residual"):
        RunConfig(arch="plain", shortcut_scale=0.5)
    with pytest.raises(ConfigError, match="set one"):
        base.replace(shortcut_scale=0.5, gate="exclusive")
    with pytest.raises(ConfigError, match="shortcut_scale must be"):
        base.replace(shortcut_scale=-1.0)
    runs = build_runs("shortcut_scale", {"scales": "0.5,1", "gates": "shortcut_only"})
    assert {n: (c.shortcut_scale, c.gate) for n, c in one_seed(runs).items()} == {
        "scale0p5": (0.5, "none"), "scale1": (1.0, "none"), "gate_shortcut_only": (1.0, "shortcut_only")}


@pytest.mark.parametrize("gain", [1.0, 2.0])
def test_branch_gain_closed_form_matches_monte_carlo(gain):
    """s^2 = E||J_F^T v||^2 / ||v||^2 over fresh inits, inputs and directions, against branch_gain_sq."""
    torch.manual_seed(2)
    width, draws, total = 64, 300, 0.0
    for _ in range(draws):
        model = build_model("residual", 4, width, 1, 2, "relu", init_gain=gain)
        branch = model.blocks[0].branch
        x = torch.randn(1, width, requires_grad=True)
        v = torch.randn(1, width)
        (grad,) = torch.autograd.grad(branch(x), x, v)
        total += float(grad.square().sum() / v.square().sum())
    closed = branch_gain_sq(RunConfig(activation="relu", init_gain=gain))
    assert total / draws == pytest.approx(closed, rel=0.1)
    assert math.isnan(branch_gain_sq(RunConfig(activation="tanh")))
    assert math.isnan(branch_gain_sq(RunConfig(activation="relu", norm="batchnorm")))


def _run(scale, ratio, error, diverged=0.0, s2=1 / 18, k=19):
    return {"scale": scale, "ratio": ratio, "error": error, "diverged": diverged,
            "shortcut_only": scale ** k if not math.isnan(scale) else math.nan,
            "expected": float(expected_ratio(scale, s2, k)) if not math.isnan(scale) else math.nan}


def _seed(**changes):
    runs = {"scale0p5": _run(0.5, 1.2e-5, 0.9), "scale0p9": _run(0.9, 0.25, 0.05), "scale1": _run(1.0, 1.6, 0.01),
            "scale1p1": _run(1.1, 9.0, math.nan, diverged=1.0), "gate_exclusive": _run(math.nan, 3e-6, 0.9)}
    for name, fields in changes.items():
        runs[name] = {**runs[name], **fields}
    return runs


def test_seed_verdicts_hold_fail_and_abstain():
    assert seed_verdicts(_seed()) == {"follows": True, "identity_best": True}
    far = float(expected_ratio(0.5, 1 / 18, 19)) * FOLLOW_FACTOR * 1.5  # beyond the factor, still rising
    assert seed_verdicts(_seed(scale0p5={"ratio": far}))["follows"] is False
    assert seed_verdicts(_seed(scale0p9={"ratio": 2.0}))["follows"] is False  # 0.9 above 1: not rising
    assert seed_verdicts(_seed(scale0p9={"error": 0.005}))["identity_best"] is False  # 0.9 better than 1
    assert seed_verdicts(_seed(scale0p5={"error": 0.015}))["identity_best"] is False  # within the margin
    assert seed_verdicts(_seed(scale1={"diverged": 1.0, "error": math.nan}))["identity_best"] is False
    missing = seed_verdicts(_seed(scale1={"error": math.nan}, scale0p9={"ratio": math.nan}))
    assert missing == {"follows": None, "identity_best": None}
    runs = _seed()
    del runs["scale1"]
    assert seed_verdicts(runs)["identity_best"] is None
    assert count_seeds({0: _seed(), 1: _seed(scale0p9={"error": 0.001}), 2: _seed(scale1={"error": math.nan})}) == {
        "follows": (3, 3), "identity_best": (1, 2)}


# -- the scene's numbers, recomputed from the arrays without the scene's helpers ---------------------

def shortcut_scale_numbers(traces: dict[RunKey, Trace]) -> dict[str, float]:
    out: dict[str, float] = {}
    first = next(iter(traces)).seed
    for key, t in traces.items():
        name, seed = key.name, key.seed
        g = t["out_grad_norm"][0].astype(np.float64)
        curve = t["error_curve"].astype(np.float64)
        diverged = bool(t.meta.diverged)
        error = math.nan if diverged else float(np.mean(curve[-max(1, round(0.1 * len(curve))):]))
        out[f"{name}.seed.{seed}.ratio"] = g[0] / g[-1]
        if not diverged:
            out[f"{name}.seed.{seed}.final_error"] = error
        out[f"{name}.seed.{seed}.diverged"] = float(diverged)
        if seed != first:
            continue
        cfg, k = t.run_config, len(g) - 1
        out[f"{name}.ratio"] = g[0] / g[-1]
        if cfg.gate == "none":
            s2 = (cfg.init_gain ** 2 / 3) ** 2 / 2
            out[f"{name}.shortcut_only"] = cfg.shortcut_scale ** k
            out[f"{name}.expected"] = (cfg.shortcut_scale ** 2 + s2) ** (k / 2)
            out["branch_gain_sq"] = s2
            if cfg.shortcut_scale == 1.0:
                out["identity.final_error_pct"] = 100 * error
        else:
            out["gate_bias"] = cfg.gate_bias
    return out


@pytest.mark.xdist_group(scene_group(ShortcutScale, "en"))
def test_numbers_equal_the_trace():
    check_numbers(ShortcutScale, shortcut_scale_numbers, {"follows.seeds", "follows.of", "identity_best.seeds",
                                                          "identity_best.of"})


def test_numbers_equal_the_trace_when_tampered(tmp_path):
    """The twin: a scene fed a tripled out_grad_norm of block 0 reports other ratios."""
    check_tampered_numbers(ShortcutScale, shortcut_scale_numbers, RunKey("scale0p9", 0), "out_grad_norm",
                           lambda v: v * np.r_[3.0, np.ones(v.shape[1] - 1)], tmp_path)


def test_a_diverged_run_is_marked_diverged_not_missing(tmp_path):
    """lambda = 1.1 diverges on most seeds at the default size: its final error is absent (the bar says
    "diverged"), never recorded as a missing value."""
    import dataclasses

    files = dict(tiny_trace_files_with_seeds("shortcut_scale"))
    trace = Trace.load(files[RunKey("scale1p1", 0)])
    trace.meta = dataclasses.replace(trace.meta, diverged=True, diverged_step=5, diverged_layer=2,
                                     diverged_pass="forward")
    curve = trace["error_curve"].copy()
    curve[5:] = np.nan
    trace.arrays["error_curve"] = curve
    files[RunKey("scale1p1", 0)] = str(trace.save(tmp_path / "diverged.npz"))
    numbers = dry_run(scene_variant(ShortcutScale, files), tmp_path).numbers
    assert numbers["missing"] == []
    assert numbers["values"]["scale1p1.seed.0.diverged"] == 1.0 and "scale1p1.seed.0.final_error" not in numbers["values"]
