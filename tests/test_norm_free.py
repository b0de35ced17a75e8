"""Issue 23, finding 4: ReZero and Fixup against their definitions, the standard net's forward growth against
its closed form (Monte Carlo), and the NormFree scene's numbers recomputed from the traces.

Example::

    pytest tests/test_norm_free.py
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from scenes.norm_free import (EXPLODED, LOSS_LEVEL, NormFree, count_norm_free, growth_per_block, norm_free_verdicts,
                              steps_to_loss)
from simulation.config import ConfigError, RunConfig
from cli.params import build_runs  # parses string values as --set does
from simulation.models import build_model, fixup_scale
from simulation.runkeys import RunKey, one_seed
from simulation.trace import Trace

from data.make_traces import tiny_trace_files_with_seeds
from dry_run import scene_group
from scene_numbers import check_numbers, check_tampered_numbers

HE = math.sqrt(6)  # init_gain giving Var w = 2 / fan_in


def _pair(residual_init: str, depth: int = 6, width: int = 16, seed: int = 0):
    torch.manual_seed(seed)
    standard = build_model("residual", 8, width, depth, 3, "relu", init_gain=HE)
    torch.manual_seed(seed)
    other = build_model("residual", 8, width, depth, 3, "relu", init_gain=HE, residual_init=residual_init)
    return standard, other


def test_rezero_starts_as_the_identity_and_alpha_gets_a_gradient():
    """h = x + alpha F(x), alpha = 0 (Bachlechner et al. 2020, eq. 3): every block passes its input on exactly,
    and dL/dalpha = <dL/dh, F(x)> is not zero, so alpha moves on the first step."""
    standard, rezero = _pair("rezero")
    x = torch.randn(5, 8)
    h = rezero.stem(x)
    for block in rezero.blocks:
        assert float(block.alpha.detach()) == 0.0
        torch.testing.assert_close(block(h), h, rtol=0, atol=0)
    rezero(x).sum().backward()
    assert all(float(block.alpha.grad.abs()) > 0 for block in rezero.blocks)
    for a, b in zip(standard.parameters(), [p for n, p in rezero.named_parameters() if not n.endswith("alpha")]):
        torch.testing.assert_close(a, b)  # the same He init underneath


def test_fixup_rules_one_and_two():
    """Zhang et al. 2019, §3: the head and each branch's last layer start at zero; the other branch layer is
    the standard one times L^(-1/(2m - 2)) = L^(-1/2) for m = 2; the multiplier starts at 1."""
    depth = 9
    standard, fixup = _pair("fixup", depth=depth)
    assert fixup_scale(100) == pytest.approx(0.1) and fixup_scale(depth) == pytest.approx(1 / 3)
    for s, f in zip(standard.blocks, fixup.blocks):
        torch.testing.assert_close(f.branch[0].weight, s.branch[0].weight / 3)
        torch.testing.assert_close(f.branch[0].bias, s.branch[0].bias)
        assert not f.branch[-1].weight.any() and not f.branch[-1].bias.any() and float(f.alpha.detach()) == 1.0
    assert not fixup.head.weight.any() and not fixup.head.bias.any()
    x = torch.randn(4, 8)
    h = fixup.stem(x)
    for block in fixup.blocks:
        torch.testing.assert_close(block(h), h, rtol=0, atol=0)


@torch.no_grad()
def test_standard_forward_growth_matches_the_closed_form():
    """E||h_(l+1)||^2 / E||h_l||^2 = 1 + g^4 / 18 = 3 at He's init (g^2 = 6), measured over fresh nets."""
    torch.manual_seed(3)
    ratios = []
    for _ in range(20):
        model = build_model("residual", 8, 256, 6, 3, "relu", init_gain=HE)
        h = model.stem(torch.randn(64, 8)) * 10  # large inputs: the biases' constant is negligible
        for block in model.blocks:
            out = block(h)
            ratios.append(float(out.square().sum() / h.square().sum()))
            h = out
    expected = growth_per_block(RunConfig(activation="relu", init_gain=HE)) ** 2
    assert expected == pytest.approx(3.0)
    assert np.mean(ratios) == pytest.approx(expected, rel=0.08)
    assert math.isnan(growth_per_block(RunConfig(arch="residual", activation="relu", init_gain=HE,
                                                 residual_init="rezero")))


def test_experiment_and_config():
    runs = one_seed(build_runs("norm_free", {"inits": "none,fixup"}))
    assert {n: c.residual_init for n, c in runs.items()} == {"standard": "none", "fixup": "fixup"}
    assert all(c.depth == 100 and c.norm == "none" and c.init_gain == pytest.approx(HE)
               for c in build_runs("norm_free").values())
    with pytest.raises(ConfigError, match="needs arch=residual"):
        RunConfig(residual_init="fixup")
    with pytest.raises(ConfigError, match="inits must be among"):
        build_runs("norm_free", {"inits": "zero"})


def _s(growth, step, diverged=0.0):
    return {"growth": growth, "per_block": math.nan, "closed_form": math.nan, "step": step, "diverged": diverged,
            "diverged_step": 1.0 if diverged else math.nan}


def test_verdicts_hold_fail_and_abstain():
    good = {"standard": _s(1e23, -1, 1.0), "rezero": _s(1.0, 14), "fixup": _s(1.0, 27)}
    assert norm_free_verdicts(good) == {"forward": True, "trains": True}
    assert norm_free_verdicts({**good, "standard": _s(EXPLODED / 2, -1)})["forward"] is False
    assert norm_free_verdicts({**good, "fixup": _s(1.001, 27)})["forward"] is False
    assert norm_free_verdicts({**good, "standard": _s(1e23, 50)})["trains"] is False
    assert norm_free_verdicts({**good, "rezero": _s(1.0, -1)})["trains"] is False
    assert norm_free_verdicts({**good, "rezero": _s(math.nan, math.nan)}) == {"forward": None, "trains": None}
    assert norm_free_verdicts({"rezero": _s(1.0, 3)}) == {"forward": None, "trains": None}
    slower = {**good, "rezero": _s(1.0, 40)}
    assert count_norm_free({0: good, 1: slower, 2: {**good, "fixup": _s(1.0, -1)}}) == {
        "forward": (3, 3), "trains": (2, 3), "rezero_first": (1, 2)}


def test_steps_to_loss_stops_at_a_divergence_and_reports_a_gap():
    files = tiny_trace_files_with_seeds("norm_free")
    trace = Trace.load(files[RunKey("rezero", 0)])
    curve = trace["loss_curve"].astype(np.float64)
    below = np.flatnonzero(curve < LOSS_LEVEL)
    assert steps_to_loss(trace) == ((int(below[0]) if len(below) else -1), False)
    trace.arrays["loss_curve"] = np.where(np.arange(len(curve)) == 2, np.nan, curve).astype(np.float32)
    assert steps_to_loss(trace, level=0.0)[1] is True
    standard = Trace.load(files[RunKey("standard", 0)])
    assert standard.meta.diverged
    assert steps_to_loss(standard, level=1e30)[0] == 0  # its first loss is finite; nothing after the stop is read


# -- the scene's numbers, recomputed from the arrays without the scene's helpers ---------------------

def norm_free_numbers(traces: dict[RunKey, Trace]) -> dict[str, float]:
    out: dict[str, float] = {"loss_level": LOSS_LEVEL}
    first = next(iter(traces)).seed
    for key, t in traces.items():
        name, seed = key.name, key.seed
        growth = float(t["act_norm"][0, -1]) / float(t["input_norm"][0, 0])
        loss = t["loss_curve"].astype(np.float64)
        ran = loss[: t.meta.diverged_step] if t.meta.diverged else loss
        hits = np.flatnonzero(ran < LOSS_LEVEL)
        step = float(hits[0]) if len(hits) else -1.0
        out[f"{name}.seed.{seed}.growth"] = growth
        out[f"{name}.seed.{seed}.step_below_level"] = step
        if seed != first:
            continue
        out[f"{name}.growth"] = growth
        if step >= 0:
            out[f"{name}.step_below_level"] = step
        if name == "standard":
            out["standard.per_block"] = growth ** (1 / t.run_config.depth)
            out["closed_form_per_block"] = math.sqrt(1 + t.run_config.init_gain ** 4 / 18)
            if t.meta.diverged:
                out["standard.diverged_step"] = float(t.meta.diverged_step)
    return out


@pytest.mark.xdist_group(scene_group(NormFree, "en"))
def test_numbers_equal_the_trace():
    check_numbers(NormFree, norm_free_numbers, {"forward.seeds", "trains.seeds", "rezero_first.seeds"})


@pytest.mark.slow  # a twin of check_numbers: test_shortcut_scale's runs in the default run
def test_numbers_equal_the_trace_when_tampered(tmp_path):
    """The twin: a scene fed a doubled act_norm of the standard net reports another growth."""
    check_tampered_numbers(NormFree, norm_free_numbers, RunKey("standard", 0), "act_norm", lambda v: v * 2, tmp_path)
