"""Seeds trained together as one stacked model (simulation.kinds.stacked, simulation.kinds.mlp.run_together) give the
traces of training each seed alone: every recorded array equal, bit for bit, for each kind of MLP the lecture
trains, a run that diverges included; and the trainer's groups, stream and pipeline hand them out as one."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

from simulation.cache import stream, trace_path
from simulation.config import RunConfig
from cli.params import build_runs  # parses string values as --set does
from simulation.models import build_model
from simulation.runs import GROUP_RUNS, estimate, seed_groups
from simulation.kinds.stacked import stack_models, stackable
from simulation.trace import Trace
from simulation.kinds.mlp import run, run_together
from support import (assert_diverged_between_records, assert_same_trace, seeds_diverging_between_records,
                     together_as_alone)

TINY = dict(depth=3, width=16, steps=14, record_every=5, batch_size=32, lr=0.05)  # records 0, 5, 10, 13
SEEDS = (0, 1, 2)

# The kinds of MLP of the lecture's experiments that train several seeds, at a tiny size.
VARIANTS = {
    "plain_bn": dict(arch="plain", activation="relu", norm="batchnorm"),
    "residual_bn_projection": dict(arch="residual", activation="relu", norm="batchnorm", stages=2, weight_decay=2e-3),
    "residual_sigmoid_zero_pad": dict(arch="residual", activation="sigmoid", stages=2, shortcut="zero_pad",
                                      momentum=0.9),
    "plain_tanh_adam": dict(arch="plain", activation="tanh", optimizer="adam", lr=0.01),
    "scaled_shortcut": dict(arch="residual", activation="relu", shortcut_scale=0.5),
    "gate_exclusive": dict(arch="residual", activation="relu", gate="exclusive"),
    "rezero": dict(arch="residual", activation="relu", residual_init="rezero", init_gain=6 ** 0.5),
    "fixup": dict(arch="residual", activation="relu", residual_init="fixup", init_gain=6 ** 0.5),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_seeds_trained_together_give_each_seeds_trace_alone(variant):
    configs = [RunConfig(**{**TINY, **VARIANTS[variant]}, seed=s) for s in SEEDS]
    together = together_as_alone(run, run_together, configs)
    # not three copies of one run: the seeds' numbers differ, and training moved them
    assert not np.array_equal(together[0]["loss_curve"], together[1]["loss_curve"])
    assert together[0]["loss_curve"][0] != together[0]["loss_curve"][-1]


def test_a_seed_that_diverges_stops_where_it_would_alone_the_others_go_on():
    """Plain ReLU nets at a large learning rate: seeds diverge at their own steps, between records too."""
    base = RunConfig(**{**TINY, "depth": 6, "steps": 30, "record_every": 10}, arch="plain", activation="relu",
                     init_gain=2.0)
    configs = seeds_diverging_between_records(run, base, lrs=(0.2, 0.15, 0.25, 0.3))
    together = together_as_alone(run, run_together, configs)
    assert_diverged_between_records(together, 10)


def test_the_stacked_step_is_what_makes_it_fast_not_a_copy_of_run():
    """Tamper twin: a stacked model whose one row's weight is nudged gives that row other numbers (the stacked
    forward really runs on the rows), while the other rows keep theirs."""
    models = []
    for seed in SEEDS:
        torch.manual_seed(seed)
        models.append(build_model("residual", 64, 16, 3, 10, "relu", "batchnorm"))
    template, stacked, flat = stack_models(models)
    x = torch.randn(len(SEEDS), 32, 64)
    with torch.no_grad():
        before = template(x)
        for row, model in enumerate(models):  # each row is its model's output (training mode, as in a step)
            assert torch.equal(model(x[row]), before[row])
        stacked[0][1, 0, 0] += 1.0  # the stem weight of row 1 only
        after = template(x)
    assert torch.equal(after[0], before[0]) and torch.equal(after[2], before[2])
    assert not torch.equal(after[1], before[1])
    assert float(models[1].stem.weight.detach()[0, 0]) == float(stacked[0].detach()[1, 0, 0])  # the model's weight is the row
    # ... and a column of the flat tensor's row
    assert float(flat.detach()[1, 0]) == float(stacked[0].detach()[1, 0, 0])


def test_what_cannot_be_stacked_bit_for_bit_is_refused():
    torch.manual_seed(0)
    digits = build_model("plain", 64, 16, 3, 10, "relu", "batchnorm")
    bands = build_model("plain", 1, 16, 3, 2, "relu", "batchnorm")  # a scalar input: a matrix-vector product
    assert stackable(digits, 32) and not stackable(bands, 32)
    assert not stackable(digits, 1)  # tiny products: torch's own small-matrix kernel
    with pytest.raises(ValueError, match="differ only in their seed"):
        run_together([RunConfig(**TINY, seed=0), RunConfig(**TINY, seed=1).replace(lr=0.1)])
    # a bands group still trains, each seed alone, and says so
    configs = [RunConfig(**{**TINY, "steps": 3}, dataset="bands", seed=s) for s in (0, 1)]
    assert [t.meta.trained_with_seeds for t in run_together(configs)] == [None, None]


def test_groups_are_the_seeds_of_one_config_in_first_seen_order_within_the_limits():
    runs = build_runs("degradation", {"seeds": "0,1,2"})
    groups = seed_groups(list(runs.values()))
    assert [len(g) for g in groups] == [3] * 6
    assert [g[0] for g in groups] == [runs[k] for k in runs if k.seed == 0]  # the first seed's order
    assert all(len({json.dumps({**c.to_dict(), "seed": 0}) for c in g}) == 1 for g in groups)
    many = [RunConfig(**TINY, seed=s) for s in range(12)]
    assert [len(g) for g in seed_groups(many)] == [GROUP_RUNS, GROUP_RUNS, 12 - 2 * GROUP_RUNS]
    size = estimate(many[0]).total
    assert [len(g) for g in seed_groups(many[:4], max_bytes=2 * size)] == [2, 2]
    transformers = list(build_runs("layernorm", {"seeds": "0,1"}).values())
    assert [len(g) for g in seed_groups(transformers)] == [2, 2, 2]  # simulation.kinds.transformer.run_together's


def test_stream_trains_a_group_at_once_and_answers_one_line_per_run(tmp_path, monkeypatch):
    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path))
    configs = [RunConfig(**TINY, seed=s) for s in SEEDS]
    out = io.StringIO()
    stream([configs[:1], configs], out=out)  # the first seed alone, then the group (its first seed cached)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines == [{"digest": c.digest()} for c in (configs[0], *configs)]
    seeds = [Trace.load(trace_path(c)).meta.trained_with_seeds for c in configs]
    assert seeds == [None, [1, 2], [1, 2]]  # only the missing seeds trained, together
    assert_same_trace(run(configs[2]), Trace.load(trace_path(configs[2])), (1, 2))


# A deep plain sigmoid net: at step 0 the gradients of its first blocks are denormal floats (~1e-40), which the
# steps no recorder sees flush to zero (simulation.kinds.mlp.denormals_flushed) and the recorded steps keep.
DENORMAL = dict(arch="plain", activation="sigmoid", depth=56, width=16, steps=4, record_every=3, batch_size=32,
                lr=0.02)  # records steps 0 and 3


def test_flushing_denormals_in_unrecorded_steps_changes_no_recorded_number(monkeypatch):
    import contextlib

    from simulation.kinds import mlp as train_module

    configs = [RunConfig(**DENORMAL, seed=s) for s in (0, 1)]
    flush = torch.set_flush_denormal
    calls = []
    monkeypatch.setattr(torch, "set_flush_denormal", lambda on: calls.append(on) or flush(on))
    fast_alone, fast_together = [run(c) for c in configs], run_together(configs)
    assert calls.count(True) >= 3 * 2 * 2  # steps 1 and 2 of each run (and their updates) flushed ...
    assert (torch.tensor([1e-39]) * 0.5).item() > 0  # ... and denormals are kept again after the run
    monkeypatch.undo()
    tiny = fast_alone[0]["grad_norm"][0]
    assert ((tiny > 0) & (tiny < np.finfo(np.float32).tiny)).any()  # the recorded norms are denormal: flushing shows
    monkeypatch.setattr(train_module, "denormals_flushed", contextlib.nullcontext)
    monkeypatch.setattr(train_module.MLPTask, "unrecorded", lambda self: contextlib.nullcontext())
    for config, alone, together in zip(configs, fast_alone, fast_together):
        reference = run(config)  # every step with denormals as they are
        assert_same_trace(reference, together, seeds=(0, 1))
        for key in reference.arrays:
            assert np.array_equal(reference[key], alone[key], equal_nan=True), key


def test_flushing_denormals_in_a_recorded_step_would_change_its_gradient_norms(monkeypatch):
    """The tamper twin: flushing in every step (recorded ones too) zeroes the denormal gradient norms."""
    config = RunConfig(**DENORMAL, seed=0)
    reference = run(config)
    torch.set_flush_denormal(True)
    try:
        monkeypatch.setattr(torch, "set_flush_denormal", lambda on: True)  # keep it on throughout the run
        flushed = run(config)
    finally:
        monkeypatch.undo()
        torch.set_flush_denormal(False)
    assert not np.array_equal(reference["grad_norm"], flushed["grad_norm"])
    assert (flushed["grad_norm"][0] == 0).sum() > (reference["grad_norm"][0] == 0).sum()
