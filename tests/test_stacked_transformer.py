"""Transformer seeds trained together as one stacked model (simulation.kinds.stacked_transformer,
simulation.kinds.transformer.run_together) give the traces of training each seed alone: every recorded array equal, bit
for bit, for each kind of Transformer the lecture trains (encoder-decoder Post-LN and Pre-LN with warm-up, the
GPT, the attention-only stacks of rank collapse), a run that diverges between records included."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simulation.config import TransformerConfig
from cli.params import build_runs  # parses string values as --set does
from simulation.runs import seed_groups
from simulation.kinds.stacked_transformer import stack_transformers, transformer_stackable
from simulation.kinds.transformer import build_transformer, make_task, run, run_together
from support import assert_diverged_between_records, seeds_diverging_between_records, together_as_alone

TINY = dict(depth=2, width=16, heads=2, ffn_width=32, steps=8, record_every=4, batch_size=8, init_batches=2)
SEEDS = (0, 1, 2)

VARIANTS = {  # the lecture's kinds (experiments layernorm, conveyor_belt, logit_lens, rank_collapse), tiny
    "post_ln": dict(arch="encoder_decoder", norm="post_ln", warmup_steps=0),
    "pre_ln_warmup": dict(arch="encoder_decoder", norm="pre_ln", warmup_steps=3),
    "gpt": dict(arch="decoder_only", norm="pre_ln", warmup_steps=3, eval_every="final"),
    "san": dict(arch="encoder", norm="none", residual=False, ffn=False, lr=1e-3),
    "san_mlp_skip": dict(arch="encoder", norm="none", residual=True, ffn=True, lr=1e-3),
}


@pytest.mark.parametrize("variant", [v if v == "post_ln" else pytest.param(v, marks=pytest.mark.slow)
                                     for v in sorted(VARIANTS)])
def test_seeds_trained_together_give_each_seeds_trace_alone(variant):
    configs = [TransformerConfig(**{**TINY, **VARIANTS[variant]}, seed=s) for s in SEEDS]
    together = together_as_alone(run, run_together, configs)
    # not three copies of one run: the seeds' numbers differ, and training moved them
    assert not np.array_equal(together[0]["loss_curve"], together[1]["loss_curve"])
    assert together[0]["loss_curve"][0] != together[0]["loss_curve"][-1]


def test_a_seed_that_diverges_stops_where_it_would_alone_the_others_go_on():
    """An encoder at a learning rate near 10 (its edge of stability: seeds diverge at steps 2-9 or train on,
    depending on the CPU's rounding), three seeds of which one diverges between records and one trains on."""
    base = TransformerConfig(arch="encoder", norm="none", depth=2, steps=20, record_every=6, batch_size=8,
                             init_batches=1)
    configs = seeds_diverging_between_records(run, base, lrs=(10.0, 10.5, 11.0, 11.5, 12.0, 12.5, 13.0))
    together = together_as_alone(run, run_together, configs)
    assert_diverged_between_records(together, 6)


def test_the_stacked_step_runs_on_the_rows_not_a_copy_of_run():
    """Tamper twin: a stacked model whose one row's weight is nudged gives that row other numbers (the stacked
    forward really runs on the rows), while the other rows keep theirs."""
    config = TransformerConfig(**TINY)
    models = []
    for seed in SEEDS:
        torch.manual_seed(seed)
        models.append(build_transformer(config.replace(seed=seed)))
    template, stacked = stack_transformers(models)
    batches = [make_task("reverse", config.vocab, config.seq_len, 8, torch.Generator().manual_seed(s)) for s in SEEDS]
    src, tgt_in = (torch.stack([b[part] for b in batches]) for part in range(2))
    with torch.no_grad():
        before = template(src, tgt_in)
        for row, model in enumerate(models):  # each row is its model's output
            assert torch.equal(model(src[row], tgt_in[row]), before[row])
        stacked[0][1, 0, 0] += 1.0  # the embedding of row 1 only
        after = template(src, tgt_in)
    assert torch.equal(after[0], before[0]) and torch.equal(after[2], before[2])
    assert not torch.equal(after[1], before[1])
    assert float(models[1].embed.weight[0, 0].detach()) == float(stacked[0][1, 0, 0].detach())  # the row is its weight


def test_what_cannot_be_stacked_bit_for_bit_trains_alone_and_bad_groups_are_refused():
    tiny = TransformerConfig(arch="encoder", norm="none", width=2, heads=1, ffn_width=2, vocab=2, seq_len=2,
                             batch_size=1, depth=1, steps=3, init_batches=1)  # products below torch's small kernel
    assert not transformer_stackable(tiny) and transformer_stackable(TransformerConfig(**TINY))
    assert [t.meta.trained_with_seeds for t in run_together([tiny.replace(seed=s) for s in (0, 1)])] == [None, None]
    with pytest.raises(ValueError, match="differ only in their seed"):
        run_together([TransformerConfig(**TINY, seed=0), TransformerConfig(**TINY, seed=1, lr=0.1)])


def test_the_lectures_transformer_runs_are_grouped_by_seed():
    runs = build_runs("layernorm", {"seeds": "0,1,2"})
    groups = seed_groups(list(runs.values()))
    assert [len(g) for g in groups] == [3, 3, 3]
    assert [g[0] for g in groups] == [runs[k] for k in runs if k.seed == 0]  # the first seed's order
