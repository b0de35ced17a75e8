"""The highway run kind (simulation.kinds.highway; docs/developers/adding-a-kind-of-run.md), the worked example.

- the blocks against Srivastava et al. 2015's formulas written out here (eq. 1 and 3), b_T at ``gate_bias``;
- the recorder's ``gate_mean`` and ``out_grad_norm`` against a forward pass written here and ``torch.autograd.grad``;
- the kind is in the one table (config round trip, its trainer in the digest), its memory estimate counts exactly
  the parameters of the net it trains, and every array of its trace is in ``simulation.trace.ARRAY_AXES``;
- the claim (slow, seeds 0 and 1): plain one-layer ReLU blocks lose the gradient at depth 20, residual ones keep it,
  and highway ones carry it back through the carry path, attenuated by about prod(1 - T) (T ~ sigmoid(b_T)).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from simulation.config import HIGHWAY_ARCHS, ConfigError, HighwayConfig
from simulation.kinds.highway import HighwayBlock, HighwayNet, HighwayRecorder, run
from simulation.runs import KINDS, config_from_dict, estimate, kind_of, register_kind
from simulation.trace import ARRAY_AXES

TINY = dict(depth=3, width=5, steps=3, record_every=1, batch_size=8)


@pytest.mark.parametrize("arch", HIGHWAY_ARCHS)
def test_blocks_compute_the_papers_formulas(arch, one_thread):
    torch.manual_seed(0)
    block = HighwayBlock(arch, 6, "tanh", gate_bias=-2.0)
    x = torch.randn(4, 6)
    lin = block.branch[0]
    h = torch.tanh(x @ lin.weight.T + lin.bias)  # H(x), eq. 1
    if arch == "plain":
        expected = h
    elif arch == "residual":
        expected = x + h
    else:
        gate = block.gate[0]
        assert torch.equal(gate.bias, torch.full((6,), -2.0))  # b_T starts at gate_bias (§2.2)
        t = torch.sigmoid(x @ gate.weight.T + gate.bias)  # T(x), eq. 3
        expected = t * h + (1 - t) * x
    torch.testing.assert_close(block(x), expected)


def test_recorder_gate_and_gradients_against_autograd(one_thread):
    torch.manual_seed(1)
    config = HighwayConfig(depth=4, width=6, gate_bias=-1.0)
    net = HighwayNet(config, 64, 10)
    x, y = torch.randn(16, 64), torch.randint(0, 10, (16,))
    with HighwayRecorder(net) as rec:
        rec.arm()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        row = rec.collect()
    # The same forward written out: gate means and every block's output, then dL/dh_l by autograd.
    h, outputs, gates = net.stem(x), [], []
    for block in net.blocks:
        t = torch.sigmoid(block.gate[0](h))
        gates.append(float(t.detach().mean()))
        h = t * block.branch(h) + (1 - t) * h
        outputs.append(h)
    loss = torch.nn.functional.cross_entropy(net.head(h), y)
    grads = torch.autograd.grad(loss, outputs)
    np.testing.assert_allclose(row["gate_mean"], gates, rtol=1e-6)
    np.testing.assert_allclose(row["out_grad_norm"], [float(g.norm()) for g in grads], rtol=1e-5)


def test_plain_and_residual_blocks_record_no_gate(one_thread):
    trace = run(HighwayConfig(arch="plain", **TINY))
    assert np.isnan(trace["gate_mean"]).all() and trace["gate_mean"].shape == (len(trace["step"]), 3)


def test_the_kind_is_one_entry_of_the_table_and_its_trainer_is_in_the_digest():
    config = HighwayConfig(depth=7, arch="residual")
    kind = kind_of(config)
    assert kind is KINDS["highway"] and kind.trainer == "simulation.kinds.highway:run"
    assert config_from_dict(config.to_dict()) == config
    before = config.digest()
    try:
        register_kind(dataclasses.replace(kind, trainer="simulation.kinds.highway:main"))
        assert config.digest() != before
    finally:
        register_kind(kind)
    assert config.digest() == before


def test_bad_values_are_refused_with_one_line():
    with pytest.raises(ConfigError, match="^arch must be"):
        HighwayConfig(arch="dense")
    with pytest.raises(ConfigError, match="^gate_bias must"):
        HighwayConfig(gate_bias=math.nan)


@pytest.mark.parametrize("arch", HIGHWAY_ARCHS)
def test_memory_estimate_counts_the_parameters_of_the_net(arch):
    config = HighwayConfig(arch=arch, depth=5, width=12)
    net = HighwayNet(config, 64, 10)
    assert estimate(config).parameters == 4 * sum(p.numel() for p in net.parameters())


def test_every_array_of_a_trace_is_in_the_contract_with_its_axes(one_thread):
    trace = run(HighwayConfig(**TINY))
    assert type(trace.run_config) is HighwayConfig
    for key, values in trace.arrays.items():
        assert key in ARRAY_AXES, f"{key} is not in simulation.trace.ARRAY_AXES"
        assert trace.blank(key).shape == np.shape(values), key


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_claim_highway_carries_the_gradient_that_plain_blocks_lose(seed, one_thread):
    """Srivastava et al. 2015 (§2.2, Fig. 1): with b_T < 0 a highway net starts close to the identity, so deep
    stacks train where plain ones do not. Here (20 one-layer ReLU blocks, width 16, 200 SGD steps, ~5 CPU-s):"""
    traces = {arch: run(HighwayConfig(arch=arch, seed=seed)) for arch in HIGHWAY_ARCHS}
    first_over_last = {a: t["out_grad_norm"][0, 0] / t["out_grad_norm"][0, -1] for a, t in traces.items()}
    assert first_over_last["plain"] < 1e-5  # the gradient vanishes through plain blocks
    assert first_over_last["residual"] > 1  # and does not through residual ones
    gate = traces["highway"]["gate_mean"][0]
    assert np.all(np.abs(gate - 1 / (1 + math.exp(2))) < 0.02)  # T ~ sigmoid(b_T) = 0.119 at init
    carry = np.prod(1 - gate[1:])  # dh_l/dh_(l-1) ~ (1 - T) on the carry path: 0.88**19 ~ 0.09
    assert 0.5 < first_over_last["highway"] / carry < 2
    errors = {a: float(t["final_test_error"]) for a, t in traces.items()}
    assert errors["plain"] > 0.8 and errors["residual"] < 0.15 and errors["highway"] < 0.5
