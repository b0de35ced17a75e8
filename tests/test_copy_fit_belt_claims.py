"""The study note's answers as claims on 5 seeds (issue 13); each must hold on at least 4 of them.

Example::

    pytest -m slow tests/test_copy_fit_belt_claims.py

Each test states what it measures; where the run disagrees with the note, the test pins what was measured
(and says so), as the scene does. The figures are listed in docs/reference/claims.md. Slow: the five seeds of
``does_it_copy`` train in ~20 s, ``identity_fit`` in ~1 min, ``conveyor_belt`` (10 Transformers) in ~4 min.
"""

from __future__ import annotations

import numpy as np
import pytest


from support import SEEDS, at_seed, cached_traces, holds_on_most_seeds

from scenes.conveyor_belt import encoder_cos
from simulation.runkeys import one_seed
from scenes.does_it_copy import NEAR_ZERO, branch_ratios
from simulation.summary import ratio_course


SEEDS_SET = ",".join(str(seed) for seed in SEEDS)  # --set seeds=0,1,2,3,4


@pytest.mark.slow
def test_residual_branch_shrinks_toward_the_identity_and_does_not_grow_again():
    """The note: early in training a residual net finds the identity, then the gradient makes F(x) grow to
    capture what lowers the loss. Measured (E4's trained ReLU + BN residual net, 10 blocks): the mean over
    blocks of ||F(x)|| / ||x|| falls by more than 20 % from step 0 and does not rise again by more than 20 %
    above its lowest ("shrinks"), while the loss falls at least tenfold; F(x) never vanishes (lowest above
    NEAR_ZERO of ||x||). Pinned: the regrowth the note describes is not seen in this ratio."""
    t = cached_traces("does_it_copy", seeds=SEEDS_SET)

    def check(seed: int) -> tuple[bool, str]:
        trace = at_seed(t, "residual", seed)
        course = ratio_course(branch_ratios(trace).mean(1))
        loss = trace["loss"].astype(np.float64)
        ok = course["course"] == "shrinks" and course["low"] > NEAR_ZERO and loss[-1] < 0.1 * loss[0]
        return ok, (f"{course['course']}: start {course['start']:.3f} lowest {course['low']:.3f} (record "
                    f"{course['low_index']}) end {course['end']:.3f}; loss {loss[0]:.3g} -> {loss[-1]:.3g}")

    holds_on_most_seeds(check)


@pytest.mark.slow
def test_keeping_the_input_is_easy_for_a_residual_block_and_slow_for_a_plain_one():
    """He et al. 2015, §3.1 and the note: pushing F(x) to 0 is easier than fitting H(x) = x with nonlinear
    layers. Measured (one block, 64 digits features, ReLU, same initial weights, Adam lr 1e-3, full batch):
    the residual block's relative error ||h - x||^2 / ||x||^2 falls below 0.01 at least 10 times sooner than
    the plain block's (or the plain block never gets there in 1500 steps), and starts over 10 times lower."""
    def check(seed: int) -> tuple[bool, str]:
        t = one_seed(cached_traces("identity_fit", seed=seed))
        res, plain = int(t["residual"]["tolerance_step"]), int(t["plain"]["tolerance_step"])
        start = {name: float(trace["loss_curve"][0]) for name, trace in t.items()}
        ok = res >= 0 and (plain < 0 or plain >= 10 * max(res, 1)) and start["plain"] > 10 * start["residual"]
        return ok, (f"tolerance reached at step residual {res}, plain {plain}; step-0 error residual "
                    f"{start['residual']:.3g}, plain {start['plain']:.3g}")

    holds_on_most_seeds(check)


@pytest.mark.slow
def test_pre_ln_belt_keeps_more_of_the_input_than_post_ln():
    """The note's conveyor belt, measured in the E5 Transformer (6 + 6 layers, reverse task, same warm-up for
    both): the mean over tokens of cos(x_0, x_l) between a token's vector at the input of the encoder and after
    its last layer is higher with Pre-LN (a clean sum x + F(LN(x))) than with Post-LN (LN after every sum), at
    initialisation and after training; in both, less of the input survives the top layer than the first."""
    t = cached_traces("conveyor_belt", seeds=SEEDS_SET)

    def check(seed: int) -> tuple[bool, str]:
        pre, post = at_seed(t, "pre_ln", seed), at_seed(t, "post_ln", seed)
        c = {name: (encoder_cos(tr, 0), encoder_cos(tr, -1)) for name, tr in (("pre", pre), ("post", post))}
        ok = all(c["pre"][k][-1] > c["post"][k][-1] for k in (0, 1))
        ok &= all(c[name][k][-1] < c[name][k][1] for name in c for k in (0, 1))
        return ok, (f"top-layer cos at init pre {c['pre'][0][-1]:.3f} post {c['post'][0][-1]:.3f}; trained pre "
                    f"{c['pre'][1][-1]:.3f} post {c['post'][1][-1]:.3f}")

    holds_on_most_seeds(check)
