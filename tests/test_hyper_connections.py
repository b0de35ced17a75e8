"""Hyper-connections (issue 23, finding 6): Sinkhorn-Knopp, the composite mapping's gains, the claim.

Example::

    pytest tests/test_hyper_connections.py            # fast: against direct computations
    pytest tests/test_hyper_connections.py -m slow    # DeepSeek 2025's motivation on 5 seeds and a held-out one

- :func:`simulation.kinds.hyper.sinkhorn`: every row and column sums to 1 (Hypothesis over hostile logits);
- :func:`simulation.kinds.hyper.composite_gains` against a product written out here, and 1 for doubly stochastic ones;
- the block's forward pass against the update rule written out with loops;
- the config, the experiment, the scene's verdict function and its numbers (with a tamper twin).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation.config import ConfigError, HyperConfig
from cli.params import build_runs  # parses string values as --set does
from simulation.kinds.hyper import HyperBlock, composite_gains, run as run_hyper, sinkhorn
from simulation.runkeys import RunKey
from simulation.runs import config_from_dict
from simulation.trace import Trace

from data.make_traces import tiny_trace_files_with_seeds
from dry_run import built_scene, dry_run, scene_group
from seed_numbers import base_runs
from support import examples

from scenes.hyper_connections import GROWN, HELD, HyperConnections, final_gain, hyper_claim

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: one torch thread, as the trainers use


@settings(max_examples=examples(80), deadline=None)
@given(st.integers(1, 8), st.integers(0, 2**31 - 1), st.floats(0.1, 3.0))
def test_sinkhorn_is_doubly_stochastic(n, seed, scale):
    logits = torch.randn(n, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale
    m = sinkhorn(logits, iters=2000).numpy()
    assert np.all(m >= 0)
    np.testing.assert_allclose(m.sum(0), 1.0, atol=1e-9)  # columns: exact after the last round
    np.testing.assert_allclose(m.sum(1), 1.0, atol=1e-3)  # rows: within the iteration's error


def test_sinkhorn_check_can_fail():
    """exp(logits) normalised by rows only is row-stochastic, not column-stochastic: the check above sees it."""
    logits = torch.tensor([[3.0, 0.0], [3.0, 0.0]], dtype=torch.float64)
    rows_only = torch.exp(logits) / torch.exp(logits).sum(1, keepdim=True)
    assert not np.allclose(rows_only.sum(0).numpy(), 1.0, atol=1e-3)
    np.testing.assert_allclose(sinkhorn(logits, 200).sum(0).numpy(), 1.0, atol=1e-9)


def test_composite_gains_match_a_written_out_product():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(5, 3, 3))
    gains = composite_gains(m)
    product = np.eye(3)
    for l in range(5):
        product = m[l] @ product
        assert gains["row_gain"][l] == pytest.approx(max(sum(abs(product[i, j]) for j in range(3)) for i in range(3)))
        assert gains["col_gain"][l] == pytest.approx(max(sum(abs(product[i, j]) for i in range(3)) for j in range(3)))
        assert gains["sigma"][l] == pytest.approx(np.linalg.svd(product, compute_uv=False)[0])
    g = torch.Generator().manual_seed(1)
    ds = np.stack([sinkhorn(torch.randn(3, 3, dtype=torch.float64, generator=g) * 3, 2000).numpy() for _ in range(6)])
    for value in composite_gains(ds).values():
        np.testing.assert_allclose(value, 1.0, atol=1e-4)  # products of doubly stochastic matrices stay so


@pytest.mark.parametrize("mixing", ["hc", "mhc"])
def test_block_forward_is_the_update_rule(mixing):
    torch.manual_seed(0)
    block = HyperBlock(2, 3, 5, mixing, 20).double()
    with torch.no_grad():
        for p in (block.res, block.pre, block.post):
            p.add_(0.3 * torch.randn_like(p))
    h = torch.randn(4, 3, 5, dtype=torch.float64)
    res = block.res_matrix()
    pre = block.pre if mixing == "hc" else torch.sigmoid(block.pre)
    post = block.post if mixing == "hc" else 2 * torch.sigmoid(block.post)
    expected = torch.zeros_like(h)
    for b in range(4):
        x = sum(pre[k] * h[b, k] for k in range(3))
        f = block.branch(x)
        for i in range(3):
            expected[b, i] = sum(res[i, k] * h[b, k] for k in range(3)) + post[i] * f
    torch.testing.assert_close(block(h), expected)


def test_hc_starts_at_the_identity_and_the_trace_records_the_product():
    config = HyperConfig(mixing="hc", depth=4, width=8, steps=6, record_every=3)
    trace = run_hyper(config)
    assert trace["step"].tolist() == [0, 3, 6]
    assert trace["res_matrices"].shape == (3, 4, 4, 4)
    np.testing.assert_array_equal(trace["res_matrices"][0], np.broadcast_to(np.eye(4), (4, 4, 4)))
    np.testing.assert_array_equal(trace["composite_row_gain"][0], np.ones(4))
    again = composite_gains(trace["res_matrices"][-1])
    np.testing.assert_allclose(trace["composite_sigma"][-1], again["sigma"])
    assert np.array_equal(run_hyper(config)["res_matrices"], trace["res_matrices"]), "bit-identical on CPU"


@pytest.mark.parametrize(("bad", "message"), [({"mixing": "dense"}, "mixing"), ({"streams": 0}, "streams"),
                                               ({"sinkhorn_iters": 0}, "sinkhorn_iters")])
def test_bad_hyper_config_is_one_clear_error(bad, message):
    with pytest.raises(ConfigError, match=message) as info:
        HyperConfig(**bad)
    assert "\n" not in str(info.value)


def test_hyper_config_round_trips_and_the_experiment_has_both_mixings():
    config = HyperConfig(mixing="mhc", depth=3)
    assert config_from_dict(config.to_dict()) == config
    for change in ({"streams": 2}, {"sinkhorn_iters": 5}, {"mixing_lr": 0.1}, {"lr": 0.01}, {"seed": 1}):
        assert config.replace(**change).digest() != config.digest(), change
    runs = build_runs("hyper_connections", {"seeds": "0,3"})
    assert {k: (c.mixing, c.seed) for k, c in runs.items()} == {
        RunKey("hc", 0): ("hc", 0), RunKey("mhc", 0): ("mhc", 0), RunKey("hc", 3): ("hc", 3), RunKey("mhc", 3): ("mhc", 3)}


def gains_trace(final: float) -> dict[str, np.ndarray]:
    return {"composite_row_gain": np.array([[1.0, 1.0], [final * 0.5, final]])}


def test_hyper_claim():
    assert hyper_claim(gains_trace(GROWN * 2), gains_trace(1.0)) is True
    assert hyper_claim(gains_trace(1.1), gains_trace(1.0)) is False  # the free product did not grow
    assert hyper_claim(gains_trace(5.0), gains_trace(1.0 + 2 * HELD)) is False  # the projected one drifted
    assert hyper_claim(gains_trace(float("nan")), gains_trace(1.0)) is None


def hyper_numbers(runs: dict[RunKey, Trace]) -> dict[str, float]:
    """Every number HyperConnections must report, from the arrays."""
    out, traces = {}, base_runs(runs)
    for name in ("hc", "mhc"):
        g = traces[name]["composite_row_gain"].astype(np.float64)
        out.update({f"{name}.block.{l}.row_gain": v for l, v in enumerate(g[-1])})
        out[f"{name}.row_gain"] = g[-1, -1]
        out[f"{name}.col_gain"] = float(traces[name]["composite_col_gain"][-1, -1])
        out[f"{name}.row_gain_step0"] = g[0, -1]
        out[f"{name}.test_error_pct"] = 100 * float(traces[name]["final_test_error"])
    seeds = {}
    for key, t in runs.items():
        name, seed = key.name, key.seed
        out[f"{name}.seed.{seed}.row_gain"] = final_gain(t)
        seeds.setdefault(seed, {})[name] = t
    verdicts = [hyper_claim(runs["hc"], runs["mhc"]) for runs in seeds.values()]
    out["claim.seeds"], out["claim.of"] = sum(bool(v) for v in verdicts), len(verdicts)
    config = traces["hc"].run_config
    out.update({"streams": config.streams, "depth": config.depth, "width": config.width, "steps": config.steps})
    return out


def tiny_files() -> dict[RunKey, str]:
    files = tiny_trace_files_with_seeds("hyper_connections")
    assert files is not None, "run python tests/data/make_traces.py hyper_connections"
    return files


@pytest.mark.xdist_group(scene_group(HyperConnections, "en"))
def test_scene_numbers_equal_the_trace():
    files = tiny_files()
    shown = built_scene(HyperConnections, "en", files).numbers["values"]
    expected = hyper_numbers({k: Trace.load(v) for k, v in files.items()})
    assert set(shown) == set(expected), set(shown) ^ set(expected)
    for key, value in expected.items():
        assert shown[key] == pytest.approx(value, rel=1e-6, abs=1e-12), key


@pytest.mark.slow  # a twin (CI); the number twins of test_frames and test_shortcut_scale run by default
def test_scene_numbers_change_with_a_tampered_gain(tmp_path):
    files = dict(tiny_files())
    trace = Trace.load(files[RunKey("mhc", 0)])
    trace.arrays["composite_row_gain"] = trace.arrays["composite_row_gain"] * 3
    files[RunKey("mhc", 0)] = str(trace.save(tmp_path / "mhc.npz"))
    built = dry_run(type("HyperConnections", (HyperConnections,), {"trace_files": files, "lang": "en"}),
                    tmp_path / "media")
    untampered = hyper_numbers({k: Trace.load(v) for k, v in tiny_files().items()})
    assert built.numbers["values"]["mhc.row_gain"] != pytest.approx(untampered["mhc.row_gain"])
    assert built.numbers["values"] == pytest.approx(hyper_numbers({k: Trace.load(v) for k, v in files.items()}))


# -- the claim on 5 seeds and a held-out one (slow) ------------------------------------------------

# 12 blocks of width 16, 100 steps: ~3 s a run. Measured (seeds 0-5): HC gain 3.9-7.4, mHC 1.000-1.001.
CLAIM = {"depth": 12, "width": 16, "steps": 100}
CLAIM_SEEDS, HELD_OUT = (0, 1, 2, 3, 4), 5


def claim_on_seed(seed: int) -> bool | None:
    hc, mhc = (run_hyper(HyperConfig(mixing=m, seed=seed, **CLAIM)) for m in ("hc", "mhc"))
    return hyper_claim(hc, mhc)


@pytest.mark.slow
def test_free_mixing_grows_and_doubly_stochastic_stays_on_4_of_5_seeds_and_the_held_out_seed():
    verdicts = [claim_on_seed(seed) for seed in CLAIM_SEEDS]
    assert sum(bool(v) for v in verdicts) >= 4, verdicts
    assert claim_on_seed(HELD_OUT) is True


def test_the_run_summary_reads_only_what_the_kind_records():
    """`render.py train hyper_connections` (issue 34): the summary of a hyper-connections trace, which records no
    per-block norms: the composite gains of the last record are those of the written-out product of its H_res,
    the loss and error figures those of its curves; no gradient figure is made up."""
    from simulation.summary import summarize

    for key, path in tiny_files().items():
        trace = Trace.load(path)
        summary = summarize(trace).to_dict()
        product = np.eye(trace["res_matrices"].shape[-1])
        for h in trace["res_matrices"][-1]:  # H_res^1 first
            product = h @ product
        assert summary["composite_row_gain_final"] == pytest.approx(np.abs(product).sum(1).max(), rel=1e-12), key
        assert summary["composite_col_gain_final"] == pytest.approx(np.abs(product).sum(0).max(), rel=1e-12), key
        assert summary["final_loss"] == pytest.approx(float(trace["loss_curve"][-1]), rel=1e-7)
        assert summary["initial_loss"] == pytest.approx(float(trace["loss_curve"][0]), rel=1e-7)
        assert summary["final_test_error"] == pytest.approx(float(trace["final_test_error"]), rel=1e-7)
        assert summary["grad_norm_step0"] == [] and summary["grad_ratio_step0"] is None
        assert summary["final_step"] == trace.run_config.steps - 1
