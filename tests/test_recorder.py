"""The Recorder against torch.autograd, and its hooks' lifetime."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from simulation.models import build_model
from simulation.core.record import Recorder

from autograd_ref import block_parts, manual_forward as _manual_forward, recorded_row


@pytest.mark.parametrize("arch", ["plain", "residual"])
@pytest.mark.parametrize("activation", ["sigmoid", "relu"])
def test_recorded_output_grads_match_autograd(arch, activation):
    torch.manual_seed(0)
    model = build_model(arch, n_in=12, width=16, depth=5, n_out=3, activation=activation).double()
    x, y = torch.randn(32, 12, dtype=torch.float64), torch.randint(0, 3, (32,))
    loss_fn = nn.CrossEntropyLoss()

    logits, outputs = _manual_forward(model, x)
    reference = torch.autograd.grad(loss_fn(logits, y), outputs)
    expected = [float(g.norm()) for g in reference]

    with Recorder(model) as rec:
        rec.arm()
        loss_fn(model(x), y).backward()
        row = rec.collect()
    assert row["out_grad_norm"] == pytest.approx(expected, rel=1e-6, abs=1e-12)

    # Weight gradients: the norm over both Linear weights of each block, against autograd.
    model.zero_grad()
    logits, _ = _manual_forward(model, x)
    weights = [[m.weight for m in block.modules() if isinstance(m, nn.Linear)] for block in model.blocks]
    grads = torch.autograd.grad(loss_fn(logits, y), [w for ws in weights for w in ws])
    per_block = [sum(float(g.pow(2).sum()) for g in grads[2 * i: 2 * i + 2]) ** 0.5 for i in range(len(weights))]
    assert row["grad_norm"] == pytest.approx(per_block, rel=1e-6)


def test_branch_and_input_norms_are_what_the_block_sees():
    torch.manual_seed(1)
    model = build_model("residual", n_in=8, width=8, depth=3, n_out=2, activation="tanh").double()
    x = torch.randn(16, 8, dtype=torch.float64)
    row = recorded_row(model, x)
    for i, (h, f, out) in enumerate(block_parts(model, x)):  # every shortcut here: the identity, out = h + f
        assert row["input_norm"][i] == pytest.approx(float(h.norm(dim=1).mean()), rel=1e-9)
        assert row["branch_norm"][i] == pytest.approx(float(f.norm(dim=1).mean()), rel=1e-9)
        assert row["act_norm"][i] == pytest.approx(float(out.norm(dim=1).mean()), rel=1e-9)


def _hook_count(model: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks) for m in model.modules())


def test_hooks_live_only_while_armed_and_none_remain_after_exit():
    model = build_model("residual", 8, 8, 4, 2, "relu")
    with Recorder(model) as rec:
        assert _hook_count(model) == 0  # lazy: an unrecorded step runs the bare model
        rec.arm()
        assert _hook_count(model) == 2 * 4
        rec.arm()  # arming twice adds no second set
        assert _hook_count(model) == 2 * 4
        model(torch.randn(4, 8)).sum().backward()
        rec.collect()
        assert _hook_count(model) == 0
        rec.arm()  # armed, never collected: the exit removes them
        assert _hook_count(model) == 2 * 4
    assert _hook_count(model) == 0
    with pytest.raises(RuntimeError, match="outside its with block"):
        rec.arm()
    assert _hook_count(model) == 0


def test_no_hooks_remain_after_exception():
    model = build_model("plain", 8, 8, 4, 2, "relu")
    with pytest.raises(RuntimeError, match="boom"):
        with Recorder(model) as rec:
            rec.arm()
            model(torch.randn(4, 8))
            raise RuntimeError("boom")
    assert _hook_count(model) == 0


def test_unarmed_steps_record_nothing():
    model = build_model("plain", 8, 8, 2, 2, "relu")
    with Recorder(model) as rec:
        model(torch.randn(4, 8)).sum().backward()  # not armed: hooks return at once
        with pytest.raises(RuntimeError, match="without arm"):
            rec.collect()


def test_hook_points_are_named_and_the_transformer_recorder_shares_the_base():
    from simulation.config import TransformerConfig
    from simulation.core.record import HookRecorder
    from simulation.kinds.transformer import TransformerRecorder, build_transformer

    model = build_model("residual", n_in=4, width=8, depth=3, n_out=2, activation="relu", stages=2)
    rec = Recorder(model)
    assert rec.names() == ["block.0", "block.1", "block.2"]
    assert rec.point("block.1.branch").module is model.blocks[1].branch
    assert rec.point("block.1.shortcut").module is model.blocks[1].shortcut  # the projection where the width doubles
    with pytest.raises(KeyError, match="no hook point 'block.0.shortcut'"):  # an identity shortcut needs no hook
        rec.point("block.0.shortcut")
    transformer = build_transformer(TransformerConfig(depth=2, width=8, heads=2, ffn_width=16))
    t_rec = TransformerRecorder(transformer)
    assert isinstance(t_rec, HookRecorder) and type(t_rec).__mro__[1] is HookRecorder is type(rec).__mro__[1]
    assert t_rec.names() == ["encoder.0", "encoder.1", "decoder.0", "decoder.1"]
    assert t_rec.point("decoder.1.ffn").module is transformer.decoder[1].ffn
    assert t_rec.point("decoder.0.cross_attn.ln").module is transformer.decoder[0].ln_2
    assert t_rec.names("branch")[-3:] == ["decoder.1.self_attn", "decoder.1.cross_attn", "decoder.1.ffn"]
    with pytest.raises(RuntimeError, match="TransformerRecorder.collect\\(\\) called without arm"):
        t_rec.collect()


def test_tiny_float32_statistics_are_recomputed_in_float64():
    """Activations and gradients of ~1e-21 square to below float32's range: the recorder recomputes those
    groups in float64 from the block tensors themselves (its float32 pass overwrites its own copy), so every
    statistic matches a float64 computation on the same float32 tensors (abs=0: pytest.approx's default
    absolute tolerance of 1e-12 would accept any value this small)."""
    torch.manual_seed(2)
    model = build_model("residual", n_in=6, width=8, depth=3, n_out=2, activation="relu")
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.bias.zero_()
    x = torch.randn(16, 6) * 1e-21
    row = recorded_row(model, x)
    for i, (x_in, f, out) in enumerate(block_parts(model, x)):
        x_in, f, out = x_in.double(), f.double(), out.double()
        assert 0 < float(out.abs().max()) < 1e-18  # the case this test is about
        assert row["act_mean"][i] == pytest.approx(float(out.mean()), rel=1e-9, abs=0)
        assert row["act_std"][i] == pytest.approx(float(out.std()), rel=1e-9, abs=0)
        assert row["act_norm"][i] == pytest.approx(float(out.norm(dim=1).mean()), rel=1e-9, abs=0)
        assert row["branch_std"][i] == pytest.approx(float(f.std()), rel=1e-9, abs=0)
        assert row["branch_norm"][i] == pytest.approx(float(f.norm(dim=1).mean()), rel=1e-9, abs=0)
        assert row["input_norm"][i] == pytest.approx(float(x_in.norm(dim=1).mean()), rel=1e-9, abs=0)
        weights = [m.weight.grad.double() for m in model.blocks[i].modules() if isinstance(m, nn.Linear)]
        expected = sum(float(g.pow(2).sum()) for g in weights) ** 0.5
        assert 0 < expected < 1e-15 and row["grad_norm"][i] == pytest.approx(expected, rel=1e-9, abs=0)
