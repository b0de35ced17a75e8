"""Paper claim on a fixed seed: sigmoid plain nets vanish, residual nets keep their gradients."""

from __future__ import annotations

from cli.params import build_runs  # parses string values as --set does
from simulation.runkeys import one_seed
from simulation.kinds.mlp import run


def test_vanishing_gradient_at_step_zero():
    runs = one_seed(build_runs("chain_rule", {"steps": "1", "seed": "0"}))
    plain, residual = run(runs["plain"]), run(runs["residual"])
    plain_ratio = plain["grad_norm"][0, 0] / plain["grad_norm"][0, -1]
    residual_ratio = residual["grad_norm"][0, 0] / residual["grad_norm"][0, -1]
    assert runs["plain"].activation == "sigmoid" and runs["plain"].depth >= 8
    assert plain_ratio < 1e-3, plain_ratio
    assert residual_ratio > 0.1, residual_ratio
