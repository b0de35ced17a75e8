"""He et al. 2015 §4.2 conv nets: shapes and parameter counts against closed forms, the recorder against
torch.autograd.grad, and the conv variants of the experiments."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from simulation.config import ConfigError, RunConfig
from simulation.kinds.conv import (ConvResidualBlock, OptionA, build_conv_net, conv_blocks_per_stage, conv_param_count,
                             conv_stage_widths)
from cli.params import build_runs  # parses string values as --set does
from simulation.core.record import Recorder
from simulation.runkeys import one_seed
from simulation.kinds.mlp import run

from autograd_ref import manual_forward as _manual_forward


@pytest.mark.parametrize("depth, n", [(8, 1), (20, 3), (56, 9), (110, 18)])
def test_depth_is_six_n_plus_two_weighted_layers(depth, n):
    assert conv_blocks_per_stage(depth) == n
    for arch in ("plain", "residual"):
        model = build_conv_net(arch, depth, 16, 10)
        weighted = [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))
                    and not (arch == "residual" and m.kernel_size == (1, 1) if isinstance(m, nn.Conv2d) else False)]
        assert len(weighted) == 6 * n + 2  # stem + 2 convs per block + head (option A adds no layer)
        assert len(model.blocks) == 3 * n


@pytest.mark.parametrize("depth", [7, 9, 21, 2])
def test_other_depths_are_refused(depth):
    with pytest.raises(ValueError, match="6n"):
        conv_blocks_per_stage(depth)
    with pytest.raises(ConfigError, match="6n"):
        RunConfig(model="conv", depth=depth)


@pytest.mark.parametrize("arch", ["plain", "residual"])
@pytest.mark.parametrize("shortcut", ["zero_pad", "projection"])
@pytest.mark.parametrize("depth, width", [(8, 16), (20, 16), (56, 16), (14, 5)])
def test_parameter_count_matches_the_closed_form(arch, shortcut, depth, width):
    model = build_conv_net(arch, depth, width, 10, shortcut=shortcut)
    assert sum(p.numel() for p in model.parameters()) == conv_param_count(arch, depth, width, 10, shortcut)


def test_resnet20_option_a_has_the_papers_parameter_count():
    """He et al. 2015, Table 6: ResNet-20 has 0.27M parameters. The widely used CIFAR reimplementation
    (akamaster/pytorch_resnet_cifar10, option A) counts 269,722 with 3 input channels; ours sees one grey
    channel, 2 x 9 x 16 fewer stem weights."""
    count = conv_param_count("residual", 20, 16, 10, "zero_pad")
    assert count + 2 * 9 * 16 == 269_722
    assert round(count / 1e6, 2) == 0.27


def test_widths_and_maps_per_stage_and_option_a_pads_zeros():
    model = build_conv_net("residual", 20, 16, 10, shortcut="zero_pad")
    shapes = []
    h = model.stem(torch.randn(2, 64))
    for block in model.blocks:
        h = block(h)
        shapes.append(tuple(h.shape[1:]))
    assert shapes == [(16, 8, 8)] * 3 + [(32, 4, 4)] * 3 + [(64, 2, 2)] * 3
    assert [b.width_out for b in model.blocks] == [c for c in conv_stage_widths(16) for _ in range(3)]
    assert RunConfig(model="conv", depth=20, width=16).block_widths() == [(b.width_in, b.width_out) for b in model.blocks]
    x = torch.randn(3, 16, 8, 8)
    out = OptionA(16, 32, 2)(x)
    assert out.shape == (3, 32, 4, 4)
    assert torch.equal(out[:, :16], x[:, :, ::2, ::2]) and not out[:, 16:].any()
    shortcuts = [type(b.shortcut).__name__ for b in model.blocks]
    assert shortcuts.count("OptionA") == 2 and shortcuts.count("Identity") == 7
    projection = build_conv_net("residual", 20, 16, 10, shortcut="projection")
    kinds = [b.shortcut[0].kernel_size for b in projection.blocks if not isinstance(b.shortcut, nn.Identity)]
    assert kinds == [(1, 1), (1, 1)]


@pytest.mark.parametrize("arch", ["plain", "residual"])
@pytest.mark.parametrize("shortcut", ["zero_pad", "projection"])
def test_recorded_conv_statistics_match_autograd(arch, shortcut):
    torch.manual_seed(0)
    model = build_conv_net(arch, 14, 4, 10, shortcut=shortcut).double()
    x, y = torch.randn(16, 64, dtype=torch.float64), torch.randint(0, 10, (16,))
    loss_fn = nn.CrossEntropyLoss()
    state = {k: v.clone() for k, v in model.state_dict().items()}  # BatchNorm running stats move each pass

    logits, outputs = _manual_forward(model, x)
    weights = [[p for p in b.parameters() if p.ndim >= 2] for b in model.blocks]
    flat = [w for ws in weights for w in ws]
    grads = torch.autograd.grad(loss_fn(logits, y), [*outputs, *flat])
    out_grads, weight_grads = grads[:len(outputs)], grads[len(outputs):]
    per_block, offset = [], 0
    for ws in weights:
        per_block.append(sum(float(g.pow(2).sum()) for g in weight_grads[offset:offset + len(ws)]) ** 0.5)
        offset += len(ws)
    with torch.no_grad():
        norms = [float(o.flatten(1).norm(dim=1).mean()) for o in outputs]

    model.load_state_dict(state)
    with Recorder(model) as rec:
        rec.arm()
        loss_fn(model(x), y).backward()
        row = rec.collect()
    assert row["out_grad_norm"] == pytest.approx([float(g.norm()) for g in out_grads], rel=1e-6, abs=1e-12)
    assert row["grad_norm"] == pytest.approx(per_block, rel=1e-6)
    assert row["act_norm"] == pytest.approx(norms, rel=1e-6)
    if arch == "plain":
        assert not row["shortcut_norm"].any()
    else:
        assert (row["shortcut_norm"] > 0).all()


def test_a_conv_run_records_per_block_statistics_with_the_usual_names():
    config = RunConfig(model="conv", arch="residual", depth=14, width=4, activation="relu", norm="batchnorm",
                       steps=4, batch_size=16, record_every=2, lesion=True)
    trace = run(config, progress=False)
    blocks = 3 * conv_blocks_per_stage(14)
    assert trace.meta.blocks == blocks == len(trace.meta.block_widths)
    for key in ("grad_norm", "out_grad_norm", "act_norm", "branch_norm", "shortcut_norm"):
        assert trace[key].shape == (3, blocks), key
    assert trace["lesion_test_error"].shape == (blocks,)
    assert trace["path_length_fraction"].shape == (blocks + 1,)


def test_model_conv_is_offered_where_it_makes_sense():
    runs = build_runs("degradation", {"model": "conv", "depths": "8,20"})
    assert {c.model for c in runs.values()} == {"conv"} and {c.width for c in runs.values()} == {16}
    assert one_seed(build_runs("paths", {"model": "conv"}))["residual"].depth == 20  # an MLP depth of 10 is not 6n + 2
    assert one_seed(build_runs("projection", {"model": "conv", "width": 8}))["plain"].width == 8
    with pytest.raises(ConfigError, match="no conv variant"):
        build_runs("shattered", {"model": "conv"})
    with pytest.raises(ConfigError, match="dataset must be digits"):
        RunConfig(model="conv", depth=20, dataset="bands")
