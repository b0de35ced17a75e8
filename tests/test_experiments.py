"""The simulation's mechanics: cache key, determinism, divergence, underflow, memory, new recordings.

Each test compares with an independent computation (autograd, a closed form, a hand-written forward
pass) or with a second run; the paper claims themselves are in test_claims.py.
"""

from __future__ import annotations

import dataclasses
import json
import math
import weakref

import numpy as np
import pytest
import torch

import simulation.config
from simulation.config import MAX_WIDTH, ConfigError, RunConfig
from simulation.data import load_dataset
from simulation.experiments import EXPERIMENTS
from cli.params import build_runs  # parses string values as --set does
from simulation.runkeys import RunKey, one_seed
from simulation.models import ResidualBlock, build_model
from simulation.core.record import STAT_KEYS, Recorder
from simulation.summary import autocorrelation, path_length_fraction, safe_log10, summarize, tail_mean
from simulation.trace import Trace
from simulation.kinds.mlp import input_gradient, lesion_test_errors, run

from autograd_ref import recorded_row

TINY = RunConfig(depth=4, width=8, steps=12, record_every=4)


# -- cache key ------------------------------------------------------------------------------------

def _another_value(name: str, value):
    """A valid value different from ``value`` for RunConfig field ``name``."""
    choices = {"arch": simulation.config.ARCHS, "activation": simulation.config.ACTIVATIONS,
               "norm": simulation.config.NORMS, "dataset": simulation.config.DATASETS,
               "optimizer": simulation.config.OPTIMIZERS, "shortcut": simulation.config.SHORTCUTS,
               "model": simulation.config.MODELS, "gate": simulation.config.GATES,
               "residual_init": simulation.config.RESIDUAL_INITS}
    if name in choices:
        return next(c for c in choices[name] if c != value)
    if name == "momentum":
        return 0.5
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.125
    raise AssertionError(f"no alternative value for {name}")


def test_digest_changes_with_every_field_and_the_source_hash(monkeypatch):
    base = RunConfig()
    original = base.digest()
    digests = {}
    for f in dataclasses.fields(RunConfig):
        extra = {"depth": 20} if f.name == "model" else {}  # a conv net has 6n + 2 layers
        if f.name in ("shortcut_scale", "gate", "residual_init"):  # each reshapes the residual addition
            extra = {"arch": "residual"}
        changed = base.replace(**{f.name: _another_value(f.name, getattr(base, f.name))}, **extra)
        digests[f.name] = changed.digest()
    assert len(set(digests.values())) == len(digests), "two fields map to the same digest"
    assert original not in digests.values()
    assert RunConfig().digest() == original
    monkeypatch.setattr(simulation.config, "source_hash", lambda root=None: "0" * 16)
    assert RunConfig().digest() != original


@pytest.mark.parametrize("change, message", [
    ({"stages": 5, "depth": 4}, "stages must be between 1 and depth"),
    ({"stages": 0}, "stages must be between 1"),
    ({"width": MAX_WIDTH // 2 + 1, "stages": 2}, "width \\* 2\\*\\*\\(stages - 1\\)"),
    ({"shortcut": "identity"}, "shortcut must be one of"),
    ({"weight_decay": -1e-4}, "weight_decay must be a finite number >= 0"),
    ({"weight_decay": float("nan")}, "weight_decay must be a finite number >= 0"),
    ({"dataset": "mnist"}, "dataset must be one of"),
])
def test_new_fields_are_validated(change, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig(**change)


# -- determinism ------------------------------------------------------------------------------------

def test_same_parameters_and_seed_give_bit_identical_arrays():
    config = RunConfig(arch="residual", activation="relu", norm="batchnorm", depth=4, width=8, stages=2,
                       steps=15, record_every=5, weight_decay=1e-3)
    a, b = run(config), run(config)
    assert a.meta == b.meta
    assert sorted(a.arrays) == sorted(b.arrays)
    for key in a.arrays:
        assert a[key].dtype == b[key].dtype and a[key].tobytes() == b[key].tobytes(), key
    other = run(config.replace(seed=1))
    assert other["loss_curve"].tobytes() != a["loss_curve"].tobytes()


def test_torch_thread_count_is_restored():
    before = torch.get_num_threads()
    run(TINY)
    assert torch.get_num_threads() == before


# -- divergence -------------------------------------------------------------------------------------

EXPLODING = RunConfig(activation="relu", depth=8, width=16, init_gain=3.0, lr=0.05, steps=40, record_every=10,
                      lesion=True, input_sweep=True)


def _check_diverged(trace: Trace, config: RunConfig) -> int:
    meta, step = trace.meta, trace.meta.diverged_step
    assert meta.diverged is True and meta.diverged_pass in ("forward", "backward", "stem_or_head")
    # The stop is at the first step whose loss or gradient is not finite.
    bad = ~(np.isfinite(trace["loss_curve"]) & np.isfinite(trace["grad_norm_curve"]))
    assert step == int(np.flatnonzero(bad)[0])
    # It stopped cleanly: nothing after that step was run, and what came before is kept.
    assert np.isnan(trace["loss_curve"][step + 1:]).all() and np.isfinite(trace["loss_curve"][:step]).all()
    assert trace["step"][-1] == step and trace["grad_norm"].shape == (len(trace["step"]), config.depth)
    assert (trace["nonfinite"][:-1] == 0).all(), "records before the divergence saw only finite values"
    assert np.array_equal(trace["nonfinite"], trace["nonfinite_act"] + trace["nonfinite_grad"])
    layer = meta.diverged_layer
    if meta.diverged_pass == "forward":
        assert trace["nonfinite_act"][-1, layer] > 0 and (trace["nonfinite_act"][-1, :layer] == 0).all()
    elif meta.diverged_pass == "backward":
        assert trace["nonfinite_grad"][-1, layer] > 0 and (trace["nonfinite_grad"][-1, layer + 1:] == 0).all()
    assert np.isnan(trace["lesion_test_error"]).all() and np.isnan(trace["final_test_error"])
    assert np.isfinite(trace["input_grad"][0]).all() and np.isnan(trace["input_grad"][1]).all()  # at init only
    return step


def test_a_diverging_run_records_step_and_block_and_keeps_its_records(tmp_path):
    trace = run(EXPLODING)
    step = _check_diverged(trace, EXPLODING)
    assert step not in range(0, EXPLODING.steps, EXPLODING.record_every), "pick a config diverging between records"
    # The trace with its NaN and inf survives a save/load round trip and an allow_nan=False JSON summary.
    loaded = Trace.load(trace.save(tmp_path / "diverged.npz"))
    for key in trace.arrays:
        assert loaded[key].tobytes() == trace[key].tobytes(), key
    summary = summarize(loaded)
    json.dumps(summary.to_dict(), allow_nan=False)
    assert summary.diverged and summary.diverged_step == step
    assert summary.nonfinite_per_layer[trace.meta.diverged_layer] > 0


def test_a_divergence_on_a_recorded_step_is_recorded_once():
    config = EXPLODING.replace(record_every=1)
    trace = run(config)
    step = _check_diverged(trace, config)
    assert list(trace["step"]) == list(range(step + 1))


def test_a_finite_run_says_so():
    trace = run(TINY)
    assert trace.meta.diverged is False and trace.meta.diverged_step is None
    assert np.isfinite(trace["loss_curve"]).all() and (trace["nonfinite"] == 0).all()


# -- underflow --------------------------------------------------------------------------------------

def test_gradients_that_underflow_to_zero_keep_statistics_and_log_scales_usable():
    # A 56-block plain sigmoid net: the first blocks' float32 gradients are exactly 0 at step 0.
    trace = run(RunConfig(activation="sigmoid", depth=56, steps=1))
    grad = trace["grad_norm"][0]
    assert (grad == 0).any() and (grad > 0).any() and np.isfinite(grad).all()
    assert trace["grad_norm"].dtype == np.float64 and (trace["nonfinite"] == 0).all()
    summary = summarize(trace)
    json.dumps(summary.to_dict(), allow_nan=False)
    logs = summary.log10_grad_norm_step0
    assert [v is None for v in logs] == list(grad == 0)
    assert summary.grad_underflow_blocks_step0 == int((grad == 0).sum())
    finite = [v for v in logs if v is not None]
    assert min(finite) < -30, "the smallest nonzero gradients are kept in float64, below float32's normal range"


def test_safe_log10_and_autocorrelation_of_zero_inputs():
    assert safe_log10([100.0, 0.0, -1.0, float("nan"), float("inf")]) == [2.0, None, None, None, None]
    assert np.isnan(autocorrelation(np.zeros(16), 4)).all()
    assert np.isnan(autocorrelation([1.0, float("nan"), 2.0], 2)).all()
    with pytest.raises(ValueError, match="lags"):
        autocorrelation(np.ones(3), 4)


# -- memory ------------------------------------------------------------------------------------------

def test_recording_keeps_no_tensors_and_memory_does_not_grow_with_steps():
    torch.manual_seed(0)
    model = build_model("residual", 8, 8, 6, 3, "relu", "batchnorm", stages=2)
    x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
    seen: list[weakref.ref] = []  # every activation the recorder's hooks looked at

    def watch(module, inputs, output):
        seen.extend(weakref.ref(t) for t in (inputs[0], output))

    watchers = [m.register_forward_hook(watch) for b in model.blocks for m in (b, b.branch)]
    try:
        with Recorder(model) as rec:
            for _ in range(5):
                rec.arm()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                row = rec.collect()
                del loss  # no gc.collect(): freed by reference counting alone, no cycle through a hook
                assert all(ref() is None for ref in seen), "the recorder keeps activations alive"
                seen.clear()
    finally:
        for handle in watchers:
            handle.remove()
    assert all(isinstance(v, np.ndarray) and v.shape == (6,) for v in row.values())
    assert not any(isinstance(v, torch.Tensor) for v in vars(rec).values())


def test_trace_size_grows_only_with_per_step_curves():
    short, long = run(TINY.replace(steps=20, record_every=100)), run(TINY.replace(steps=200, record_every=100))
    per_step = {"loss_curve", "error_curve", "grad_norm_curve"}
    for key in short.arrays:
        if key in per_step:
            assert long[key].shape == (200,)
        elif key not in ("step", "loss", "error", "test_error") and key not in STAT_KEYS:
            assert long[key].shape == short[key].shape, key
    # Records: step 0 and the last step in both runs.
    assert list(short["step"]) == [0, 19] and list(long["step"]) == [0, 100, 199]


# -- recordings of the new experiments -----------------------------------------------------------------

def test_shortcut_norm_against_a_hand_written_forward_pass():
    torch.manual_seed(0)
    model = build_model("residual", 5, 4, 4, 3, "tanh", stages=2)  # block 2 doubles 4 -> 8
    assert [(b.width_in, b.width_out) for b in model.blocks] == [(4, 4), (4, 4), (4, 8), (8, 8)]
    x = torch.randn(7, 5)
    row = recorded_row(model, x)
    with torch.no_grad():
        h = model.stem(x)
        for i, block in enumerate(model.blocks):
            shortcut = h if block.width_in == block.width_out else h @ block.shortcut[0].weight.T
            assert row["shortcut_norm"][i] == pytest.approx(float(shortcut.norm(dim=1).mean()), rel=1e-6)
            assert row["input_norm"][i] == pytest.approx(float(h.norm(dim=1).mean()), rel=1e-6)
            h = shortcut + block.branch(h)
    assert row["shortcut_norm"][2] != pytest.approx(row["input_norm"][2], rel=1e-3)


@pytest.mark.parametrize("arch, shortcut", [("plain", "projection"), ("residual", "projection"),
                                            ("residual", "zero_pad")])
def test_recorded_output_gradients_match_autograd_with_width_changes(arch, shortcut):
    torch.manual_seed(1)
    model = build_model(arch, 6, 4, 5, 3, "relu", "batchnorm", stages=3, shortcut=shortcut)
    x, y = torch.randn(9, 6), torch.randint(0, 3, (9,))
    outputs = []
    handles = [b.register_forward_hook(lambda m, i, o: outputs.append(o)) for b in model.blocks]
    with Recorder(model) as rec:
        rec.arm()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        expected = torch.autograd.grad(loss, outputs, retain_graph=True)
        loss.backward()
        row = rec.collect()
    for handle in handles:
        handle.remove()
    for i, grad in enumerate(expected):
        assert row["out_grad_norm"][i] == pytest.approx(float(grad.double().norm()), rel=1e-6, abs=1e-12)
    if arch == "plain":
        assert (row["shortcut_norm"] == 0).all()


def test_zero_pad_shortcut_keeps_the_norm_and_has_no_parameters():
    model = build_model("residual", 3, 4, 2, 2, "relu", stages=2, shortcut="zero_pad")
    block = model.blocks[1]
    x = torch.randn(5, 4)
    padded = block.shortcut(x)
    assert padded.shape == (5, 8) and torch.equal(padded[:, :4], x) and not padded[:, 4:].any()
    assert list(block.shortcut.parameters()) == []


def test_lesion_test_errors_against_a_hand_written_forward_pass():
    torch.manual_seed(2)
    data = load_dataset("digits", seed=0)
    for arch in ("plain", "residual"):
        model = build_model(arch, 64, 8, 3, 10, "relu", "batchnorm")
        model.eval()
        got = lesion_test_errors(model, data)
        for skip in range(3):
            with torch.no_grad():
                h = model.stem(data.x_test)
                for i, block in enumerate(model.blocks):
                    if i != skip:
                        h = h + block.branch(h) if arch == "residual" else block.branch(h)
                expected = float((model.head(h).argmax(1) != data.y_test).float().mean())
            assert got[skip] == pytest.approx(expected, abs=1e-7)
    plain = build_model("plain", 64, 8, 3, 10, "relu", stages=2)  # block 1 doubles the width: no lesion
    assert np.isnan(lesion_test_errors(plain, data)).tolist() == [False, True, False]


def test_input_gradient_matches_per_point_autograd_and_restores_batchnorm_statistics():
    torch.manual_seed(3)
    t = torch.linspace(-2, 2, 32)
    # Without BatchNorm every point is its own example: compare with one autograd call per point.
    model = build_model("residual", 1, 16, 4, 2, "relu")
    got = input_gradient(model, t, torch.ones(1))
    for i in (0, 7, 31):
        ti = t[i:i + 1].clone().requires_grad_(True)
        z = model(ti[:, None])
        (g,) = torch.autograd.grad(z[0, 1] - z[0, 0], ti)
        assert got[i] == pytest.approx(float(g), rel=1e-5, abs=1e-7)
    # With BatchNorm the sweep is one batch; the running statistics must not change.
    model = build_model("plain", 1, 16, 4, 2, "relu", "batchnorm")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    input_gradient(model, t, torch.ones(1))
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_autocorrelation_against_numpy_correlate():
    g = np.random.default_rng(0).normal(size=100).cumsum()
    c = g - g.mean()
    full = np.correlate(c, c, mode="full")[len(c) - 1:] / (c @ c)
    np.testing.assert_allclose(autocorrelation(g, 10), full[:10], rtol=1e-12)
    assert autocorrelation(g, 10)[0] == pytest.approx(1.0)


def test_path_length_fraction_is_the_binomial_distribution():
    for depth in (1, 3, 10, 54):
        got = path_length_fraction(depth)
        assert got.shape == (depth + 1,) and got.sum() == pytest.approx(1.0, rel=1e-12)
        assert got[depth // 2] == pytest.approx(math.comb(depth, depth // 2) / 2 ** depth, rel=1e-12)
    assert np.isfinite(path_length_fraction(1000)).all()
    trace = run(TINY.replace(arch="residual"))
    np.testing.assert_array_equal(trace["path_length_fraction"], path_length_fraction(TINY.depth))
    assert "path_length_fraction" not in run(TINY).arrays


def test_the_lesion_test_and_the_input_sweep_are_recorded_only_where_asked_and_change_nothing_else():
    """``lesion`` and ``input_sweep`` (issue 21: record only what a scene reads) add their arrays and nothing else:
    every other array of the run is the same, bit for bit, and each flag is in the cache key."""
    bare = run(TINY.replace(arch="residual"))
    full = run(TINY.replace(arch="residual", lesion=True, input_sweep=True))
    passes = {"lesion_test_error", "input_sweep", "input_grad", "input_grad_autocorr"}
    assert set(full.arrays) - set(bare.arrays) == passes and not set(bare.arrays) - set(full.arrays)
    for key in bare.arrays:
        assert bare[key].tobytes() == full[key].tobytes(), key
    assert full["lesion_test_error"].shape == (TINY.depth,) and np.isfinite(full["input_grad"]).all()
    assert set(run(TINY.replace(lesion=True)).arrays) - set(run(TINY).arrays) == {"lesion_test_error"}
    summary = summarize(bare).to_dict()  # the summary leaves out what the run did not record
    assert not {"lesion_test_error", "lesion_mean_increase", "input_grad_autocorr_lag1"} & set(summary)
    json.dumps(summary, allow_nan=False)
    assert {"lesion_test_error", "lesion_mean_increase", "input_grad_autocorr_lag1"} <= set(summarize(full).to_dict())
    assert len({TINY.digest(), TINY.replace(lesion=True).digest(), TINY.replace(input_sweep=True).digest()}) == 3


def test_only_the_experiments_whose_readers_use_them_record_the_lesions_and_the_sweep():
    for name in EXPERIMENTS:
        for key, config in build_runs(name).items():
            assert getattr(config, "lesion", False) == (name in ("paths", "residual_response", "does_it_copy")), key
            assert getattr(config, "input_sweep", False) == (name == "shattered"), key


@pytest.mark.slow  # importing scikit-learn (scipy ...) costs ~1 CPU s of the worker; CI compares
def test_digits_are_scikit_learns():
    from sklearn.datasets import load_digits as sklearn_digits

    from simulation.data import load_digits

    (x, y), (x_ref, y_ref) = load_digits(), sklearn_digits(return_X_y=True)
    assert x.dtype == x_ref.dtype and x.tobytes() == x_ref.tobytes() and x.shape == (1797, 64)
    assert y.dtype == y_ref.dtype and np.array_equal(y, y_ref) and set(y.tolist()) == set(range(10))


@pytest.mark.xdist_group("torch-probes")  # the worker that holds the probe server (tests/forked.py)
def test_digits_are_read_without_importing_scikit_learn():
    from forked import run_forked

    code = ("import sys; from simulation.data import load_digits; x, y = load_digits(); "
            "print('sklearn' in sys.modules, x.shape, int(x.min()), int(x.max()), sorted(set(y.tolist())) == list(range(10)))")
    done = run_forked(code)  # a fresh child of an interpreter that imported only torch
    assert done.returncode == 0, done.stderr
    # the trainer never pays for importing scikit-learn (scipy.stats ...); 8x8 images of 0-16 gray levels, 10 digits
    assert done.stdout.strip() == "False (1797, 64) 0 16 True"


def test_bands_dataset_is_seeded_and_labelled_by_band():
    a, b = load_dataset("bands", seed=5), load_dataset("bands", seed=5)
    assert torch.equal(a.x_train, b.x_train) and a.n_features == 1 and a.n_classes == 2
    x = np.concatenate([a.x_train.numpy()[:, 0], a.x_test.numpy()[:, 0]])
    y = np.concatenate([a.y_train.numpy(), a.y_test.numpy()])
    assert x.min() >= -2 and x.max() <= 2
    expected = np.array([int((v + 2) // 0.5) % 2 for v in x.astype(np.float64)])
    assert (y == expected).mean() > 0.999  # float32 rounding at a band edge may differ
    assert not torch.equal(load_dataset("bands", seed=6).x_train, a.x_train)


def test_summary_of_an_old_trace_without_the_new_keys():
    trace = run(TINY)
    old = Trace(meta=trace.meta, arrays={k: v for k, v in trace.arrays.items()
                                         if k in ("step", "loss", "error", "test_error", "loss_curve", "act_mean",
                                                  "act_std", "act_norm", "input_norm", "branch_norm", "branch_std",
                                                  "grad_norm", "out_grad_norm", "nonfinite")})
    summary = summarize(old)
    assert summary.final_test_error == pytest.approx(float(trace["test_error"][-1]))
    assert "lesion_test_error" not in summary.to_dict() and summary.lesion_test_error is None


def test_tail_mean_stops_before_a_divergence():
    assert tail_mean(np.array([4.0, 3.0, 2.0, 1.0, np.inf, np.nan]), fraction=0.5) == pytest.approx(1.5)
    assert math.isnan(tail_mean(np.full(5, np.nan)))


# -- experiments -------------------------------------------------------------------------------------

EXPECTED_RUNS = {
    "vanishing": {f"{a}_{act}_d{d}" for a in ("plain", "residual") for act in ("sigmoid", "tanh") for d in (8, 20, 56)},
    "exploding": {"plain_gain1", "plain_gain2", "plain_gain3", "plain_large_lr"},
    "degradation": {f"{a}_d{d}" for a in ("plain", "residual") for d in (8, 20, 56)},
    "residual_response": {"plain", "residual"},
    "paths": {"plain", "residual"},
    "shattered": {f"{a}_d{d}" for a in ("plain", "residual") for d in (2, 24, 50)},
    "projection": {"plain", "residual", "residual_zero_pad"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_RUNS))
def test_experiment_run_names_and_overrides(name):
    runs = build_runs(name)
    assert runs == {RunKey(run, 0): c for run, c in one_seed(runs).items()}, "one run set, of seed 0"
    assert set(one_seed(runs)) == EXPECTED_RUNS[name]
    assert all(isinstance(c, RunConfig) for c in runs.values())
    assert all(c.seed == 7 and c.steps == 3 for c in build_runs(name, {"seed": "7", "steps": "3"}).values())
    with pytest.raises(ConfigError, match="unknown parameter 'depht'"):
        build_runs(name, {"depht": "3"})


def test_experiment_specific_parameters():
    assert set(one_seed(build_runs("degradation", {"depths": "4,4,6"}))) == {"plain_d4", "residual_d4", "plain_d6",
                                                                            "residual_d6"}
    runs = one_seed(build_runs("exploding", {"gains": "0.5,2.5", "large_lr": "3"}))
    assert set(runs) == {"plain_gain0p5", "plain_gain2p5", "plain_large_lr"}
    assert runs["plain_gain2p5"].init_gain == 2.5 and runs["plain_large_lr"].lr == 3.0
    projection = one_seed(build_runs("projection"))
    assert projection["residual_zero_pad"].shortcut == "zero_pad" and projection["residual"].shortcut == "projection"
    assert build_runs("paths") == build_runs("residual_response"), "E4 and E6 share their trained runs"
    for bad, message in [({"gains": "a,b"}, r"gains must be list\[float\]"), ({"gains": "-1"}, "gains must be a finite"),
                         ({"large_lr": "nan"}, "large_lr must be a finite"), ({"depths": ""}, "at least one"),
                         ({"depths": "0"}, "depths must be between"), ({"depths": "4,2.5"}, r"list\[int\]"),
                         ({"gains": "1e400"}, "gains must be a finite"), ({"large_lr": "1,2"}, "one float")]:
        name = "degradation" if "depths" in bad else "exploding"
        with pytest.raises(ConfigError, match=message):
            build_runs(name, bad)


def test_every_experiment_lists_its_parameters_with_types():
    for experiment in EXPERIMENTS.values():
        params = experiment.params()
        assert all(isinstance(t, str) and t for _, t in params.values()), experiment.name
    assert EXPERIMENTS["exploding"].params()["gains"] == ((1.0, 2.0, 3.0), "list[float]")
    assert EXPERIMENTS["degradation"].params()["depths"] == ((8, 20, 56), "list[int]")
