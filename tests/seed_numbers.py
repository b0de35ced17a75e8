"""The per-seed numbers of the seed-spread claim scenes, recomputed straight from the trace arrays.

Example::

    from seed_numbers import SEED_NUMBERS, base_runs
    expected = SEED_NUMBERS["PathEnsemble"](traces)      # traces: {RunKey: Trace}, the first seed's first

Each function takes ``{RunKey: Trace}`` (the first seed's runs first, as ``build_runs`` orders them) and returns every ``...seed.<s>...`` value and every "k of n seeds" count its scene must
record, computed here without the scenes' helpers (numpy only), so a test comparing them can fail.
"""

from __future__ import annotations

import numpy as np

from simulation.runkeys import RunKey, by_seed
from simulation.trace import Trace

__all__ = ["SEED_NUMBERS", "base_runs", "by_seed"]


def base_runs(traces: dict[RunKey, Trace]) -> dict[str, Trace]:
    """The first seed's runs, ``{NAME: Trace}``."""
    return next(iter(by_seed(traces).values()))


def _count(out: dict, key: str, flags: list[bool]) -> None:
    out[f"{key}.seeds"], out[f"{key}.of"] = float(sum(flags)), float(len(flags))


def residual_response(traces: dict[RunKey, Trace]) -> dict[str, float]:
    """Trained ||F(x)|| / ||x|| and std of F(x) per block (other seeds), their means (every seed), counts."""
    groups = by_seed(traces)
    first, out, means = next(iter(groups)), {}, {}
    for seed, runs in groups.items():
        for name in ("plain", "residual"):
            t = runs[name]
            ratio = t["branch_norm"][-1].astype(np.float64) / t["input_norm"][-1].astype(np.float64)
            std = t["branch_std"][-1].astype(np.float64)
            if seed != first:
                out.update({f"{name}.seed.{seed}.block.{l}.ratio": r for l, r in enumerate(ratio)})
                out.update({f"{name}.seed.{seed}.block.{l}.branch_std": v for l, v in enumerate(std)})
            means[(name, seed, "ratio")], means[(name, seed, "branch_std")] = ratio.sum() / len(ratio), std.sum() / len(std)
            out[f"{name}.seed.{seed}.mean_ratio"] = means[(name, seed, "ratio")]
            out[f"{name}.seed.{seed}.mean_branch_std"] = means[(name, seed, "branch_std")]
    for claim in ("ratio", "branch_std"):
        _count(out, f"residual.smaller_{claim}",
               [means[("plain", s, claim)] > means[("residual", s, claim)] for s in groups])
    return out


def path_ensemble(traces: dict[RunKey, Trace]) -> dict[str, float]:
    """Lesion errors per block (other seeds), mean increase over the intact net (every seed), counts."""
    groups = by_seed(traces)
    first, out, increase = next(iter(groups)), {}, {}
    for seed, runs in groups.items():
        for name in ("plain", "residual"):
            lesion = runs[name]["lesion_test_error"].astype(np.float64)
            if seed != first:
                out.update({f"{name}.seed.{seed}.block.{l}.lesion_test_error": v for l, v in enumerate(lesion)})
            increase[(name, seed)] = lesion.sum() / len(lesion) - float(runs[name]["final_test_error"])
            out[f"{name}.seed.{seed}.mean_lesion_increase_pct"] = 100 * increase[(name, seed)]
    _count(out, "residual.more_robust", [increase[("plain", s)] > increase[("residual", s)] for s in groups])
    return out


def shattered_gradients(traces: dict[RunKey, Trace]) -> dict[str, float]:
    """The deepest pair's autocorrelation (other seeds, 16 lags), lag-1 value (every seed), counts."""
    groups = by_seed(traces)
    first, out = next(iter(groups)), {}
    base = groups[first]
    deepest = {arch: max((t.run_config.depth, n) for n, t in base.items() if t.run_config.arch == arch)[1]
               for arch in ("plain", "residual")}
    r1 = {}
    for seed, runs in groups.items():
        for arch, name in deepest.items():
            autocorr = runs[name]["input_grad_autocorr"][0].astype(np.float64)
            if seed != first:
                out.update({f"{name}.seed.{seed}.autocorr.{k}": v for k, v in enumerate(autocorr[:16])})
            r1[(arch, seed)] = autocorr[1]
            out[f"deepest.{arch}.seed.{seed}.autocorr_lag1"] = autocorr[1]
    _count(out, "residual.more_correlated", [r1[("residual", s)] > r1[("plain", s)] for s in groups])
    return out


def post_ln_vs_pre_ln(traces: dict[RunKey, Trace]) -> dict[str, float]:
    """FFN ||dL/dW^2|| at init per layer (other seeds), decoder last/first and final losses (every seed), counts."""
    groups = by_seed(traces)
    first, out, ratio, final = next(iter(groups)), {}, {}, {}
    for seed, runs in groups.items():
        for name in ("post_ln", "pre_ln"):
            t = runs[name]
            grads = t["init_ffn_grad_norm"].astype(np.float64).mean(axis=0)
            layers = t.meta.layers
            if seed != first:
                out.update({f"{name}.seed.{seed}.{layer}.init_ffn_grad_norm": g for layer, g in zip(layers, grads)})
            stack = "decoder" if t.run_config.arch == "encoder_decoder" else "encoder"
            index = [i for i, layer in enumerate(layers) if layer.startswith(stack + ".")]
            ratio[(name, seed)] = grads[index[-1]] / grads[index[0]]
            out[f"{name}.seed.{seed}.last_over_first"] = ratio[(name, seed)]
        for name in ("post_ln", "post_ln_warmup", "pre_ln"):
            curve = runs[name]["loss_curve"].astype(np.float64)
            window = max(1, int(round(len(curve) * 0.1)))
            final[(name, seed)] = curve[-window:].mean()
            out[f"{name}.seed.{seed}.final_loss"] = final[(name, seed)]
    _count(out, "post_ln.grad_rise", [ratio[("post_ln", s)] > 1.5 and ratio[("post_ln", s)] > ratio[("pre_ln", s)]
                                      for s in groups])
    _count(out, "warmup_helps", [final[("post_ln", s)] > final[("post_ln_warmup", s)] and
                                 final[("post_ln", s)] > final[("pre_ln", s)] for s in groups])
    return out


SEED_NUMBERS = {"ResidualResponse": residual_response, "PathEnsemble": path_ensemble,
                "ShatteredGradients": shattered_gradients, "PostLNvsPreLN": post_ln_vs_pre_ln}
