"""The logit lens on a small GPT (nostalgebraist 2020; Belrose et al. 2023): measure, verdicts, scene, claim.

Example::

    pytest tests/test_logit_lens.py                  # KL, the lens, the GPT, verdicts, frames (fast)
    pytest -m slow tests/test_logit_lens.py          # the claim on 5 seeds and a held-out seed (~1 min of CPU)
    pytest tests/test_logit_lens.py --set_test       # (re)write the frame control data

The KL is checked against torch's own ``kl_div`` and scipy's ``rel_entr`` on hand-built distributions; the
lens against a recomputation from forward hooks on the layers (not the model's ``stream``), decoded by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.special import rel_entr
from torch.nn import functional as F

from scenes.logit_lens import AGREE, CLAIMS, LogitLens, answer_layer, lens_row, lens_verdicts
from simulation.config import TransformerConfig
from simulation.experiments import GPT
from cli.params import build_runs  # parses string values as --set does
from simulation.runkeys import RunKey, one_seed
from simulation.kinds.transformer import build_transformer, lens_kl, logit_lens, make_task

from support import NEEDED, SEEDS, at_seed, cached_traces
from frame_matrix import frame_matrix
from frame_checks import same_cairo_as_control_data  # noqa: F401

__module_test__ = "scenes"  # control data lives in tests/control_data/scenes/

HELD_OUT_SEED = 11  # not among SEEDS: the verdicts must come out the same on it


# -- the KL against torch and scipy -------------------------------------------------------------------

def test_lens_kl_on_a_hand_built_case():
    p = torch.tensor([[0.7, 0.2, 0.1], [0.25, 0.25, 0.5]], dtype=torch.float64)
    q = torch.tensor([[0.1, 0.3, 0.6], [0.25, 0.25, 0.5]], dtype=torch.float64)
    by_hand = 0.7 * math.log(7) + 0.2 * math.log(2 / 3) + 0.1 * math.log(1 / 6)  # sum p log(p / q), row 0
    got = lens_kl(p.log(), q.log())
    assert got[0].item() == pytest.approx(by_hand, rel=1e-12) and got[1].item() == pytest.approx(0.0, abs=1e-15)
    torch_kl = F.kl_div(q.log(), p.log(), log_target=True, reduction="none").sum(-1)  # kl_div(input=log q, target=log p)
    torch.testing.assert_close(got, torch_kl)
    np.testing.assert_allclose(got.numpy(), rel_entr(p.numpy(), q.numpy()).sum(-1), rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(2, 9)), elements=st.floats(-30, 30)),
       arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(2, 9)), elements=st.floats(-30, 30)))
def test_lens_kl_matches_torch_and_is_never_negative(a, b):
    if a.shape != b.shape:
        b = np.resize(b, a.shape)
    log_p, log_q = (F.log_softmax(torch.from_numpy(x), -1) for x in (a, b))
    got = lens_kl(log_p, log_q)
    torch.testing.assert_close(got, F.kl_div(log_q, log_p, log_target=True, reduction="none").sum(-1))
    assert (got >= -1e-12).all()
    assert lens_kl(log_p, log_p).abs().max() < 1e-12


# -- the GPT and the lens ------------------------------------------------------------------------------

def _gpt(depth: int = 3, seed: int = 0):
    config = TransformerConfig(arch="decoder_only", norm="pre_ln", depth=depth, width=16, heads=2, ffn_width=32)
    torch.manual_seed(seed)
    return build_transformer(config), make_task("reverse", 8, 8, 6, torch.Generator().manual_seed(seed + 1))


def test_gpt_is_causal_and_predicts_the_target_positions():
    model, (src, tgt_in, tgt) = _gpt()
    logits = model(src, tgt_in)
    assert logits.shape == (6, 8, 9) and model.layer_names() == ["block.0", "block.1", "block.2"]
    changed = tgt_in.clone()
    changed[:, 5:] = (changed[:, 5:] % 8) + 1  # change the target from position 5 on
    later = model(src, changed)
    torch.testing.assert_close(later[:, :5], logits[:, :5])  # positions before 5 never see it
    assert not torch.allclose(later[:, 5:], logits[:, 5:])


def test_logit_lens_against_hooks_and_the_models_output():
    """The stream recomputed from forward hooks on the layers (not model.stream), decoded by hand; the last
    layer's lens is the model's own output: KL 0, top-1 agreement 1, accuracy that of the logits."""
    model, (src, tgt_in, tgt) = _gpt(seed=3)
    outputs = []
    hooks = [layer.register_forward_hook(lambda m, i, o: outputs.append(o)) for layer in model.encoder]
    with torch.no_grad():
        logits = model(src, tgt_in)
    for h in hooks:
        h.remove()
    with torch.no_grad():
        embedded = model.embed(torch.cat([src, tgt_in], 1)) * math.sqrt(model.width) + model.positions[:16]
        stream = [embedded, *outputs]
        final = F.log_softmax(logits.double(), -1)
        expected_kl, expected_top1 = [], []
        for h in stream:
            lp = F.log_softmax(model.head(model.enc_ln_f(h[:, 8:])).double(), -1)
            expected_kl.append(F.kl_div(lp, final, log_target=True, reduction="none").sum(-1).mean().item())
            expected_top1.append((lp.argmax(-1) == final.argmax(-1)).double().mean().item())
    got = logit_lens(model, src, tgt_in, tgt)
    np.testing.assert_allclose(got["lens_kl"], expected_kl, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got["lens_top1"], expected_top1)
    assert got["lens_kl"][-1] == pytest.approx(0.0, abs=1e-9) and got["lens_top1"][-1] == 1.0
    assert got["lens_accuracy"][-1] == pytest.approx((logits.argmax(-1) == tgt).double().mean().item())
    assert model.training, "the lens puts the model back in training mode"


def test_the_experiment_is_one_causal_pre_ln_gpt_per_seed():
    runs = build_runs("logit_lens", {"seeds": "0,1"})
    assert list(runs) == [RunKey(GPT, 0), RunKey(GPT, 1)]
    assert {(c.arch, c.norm, c.residual, c.ffn) for c in runs.values()} == {("decoder_only", "pre_ln", True, True)}


# -- the verdicts (plain functions, no Manim) -----------------------------------------------------------

def test_answer_layer_and_verdicts():
    kl, top1 = np.array([3.0, 2.7, 0.1, 0.01, 0.0]), np.array([0.13, 0.18, 0.99, 1.0, 1.0])
    assert answer_layer(top1) == 2
    assert lens_verdicts(kl, top1) == dict.fromkeys(CLAIMS, True)
    late = np.array([0.13, 0.18, 0.3, 0.6, 1.0])
    assert answer_layer(late) == 4 and lens_verdicts(kl, late)["answer_early"] is False
    assert lens_verdicts(np.array([0.5, 0.4, 0.3, 0.2, 0.0]), top1)["kl_falls"] is False
    assert answer_layer(np.array([0.1, AGREE, 1.0])) == 1 and answer_layer(np.array([AGREE, 0.5, 1.0])) == 2
    gap = np.array([0.13, np.nan, 0.5, 0.6, 1.0])
    assert answer_layer(gap) is None and lens_verdicts(kl, gap)["answer_early"] is None
    assert lens_verdicts(np.array([np.nan, 1, 1, 0.01, 0]), top1)["kl_falls"] is None


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.integers(3, 8), elements=st.floats(allow_nan=True, allow_infinity=True)))
def test_verdicts_never_raise_on_hostile_values(values):
    verdicts = lens_verdicts(values, values)
    assert set(verdicts) == set(CLAIMS) and all(v in (True, False, None) for v in verdicts.values())
    layer = answer_layer(values)
    assert layer is None or 1 <= layer < len(values)


# -- frames: English and Chinese, dark and light, each with a tamper twin --------------------------------

def _squared(values: np.ndarray) -> np.ndarray:
    """Top-1 agreement squared: every layer below the top agrees less (the top stays 1)."""
    return values ** 2


globals().update(frame_matrix(LogitLens, "logit_lens", run=RunKey(GPT, 0), key="lens_top1", tamper=_squared))


# -- the claim on 5 seeds, and a held-out seed ----------------------------------------------------------

def _verdicts(trace) -> dict[str, bool | None]:
    return lens_verdicts(lens_row(trace, "lens_kl", -1), lens_row(trace, "lens_top1", -1))


@pytest.mark.slow
def test_the_trained_gpt_has_its_answer_on_the_stream_before_the_top():
    """The logit lens on the logit_lens runs (causal Pre-LN GPT, 4 layers, width 32, reverse task, 300 steps):
    after training, KL(p_L || p_l) at layer 3 is below a tenth of its value at the input, and some layer below
    the top already agrees with the final top-1 prediction on at least 90 % of the positions. Each on at
    least 4 of 5 seeds; the held-out seed gives the same verdicts."""
    t = cached_traces("logit_lens", seeds=",".join(map(str, SEEDS)))
    by_seed = {seed: _verdicts(at_seed(t, GPT, seed)) for seed in SEEDS}
    report = "\n".join(f"seed {seed}: {v}; top-1 {lens_row(at_seed(t, GPT, seed), 'lens_top1', -1).round(3)}"
                       for seed, v in by_seed.items())
    for claim in CLAIMS:
        held = sum(v[claim] is True for v in by_seed.values())
        assert held >= NEEDED, f"{claim} held on {held} of {len(SEEDS)} seeds:\n{report}"
    held_out = _verdicts(one_seed(cached_traces("logit_lens", seed=HELD_OUT_SEED))[GPT])
    assert held_out == dict.fromkeys(CLAIMS, True), f"held-out seed {HELD_OUT_SEED}: {held_out}"
