"""`render.py inspect FILE` of a run watched in the user's own loop: what it recorded (simulation.summary.watch_summary).

The runs are real: a residual MLP trained here with ``residual_lecture.watch`` and a GradScaler on CPU, two of its
steps made to overflow (the loss times inf), which the scaler skips; and a run killed (``os._exit``) part-way, whose
trace is the parts it flushed. Each figure is compared with what this loop knows it did.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from support import ROOT, invoke

LOOP = textwrap.dedent("""
    import os, sys, torch
    from torch import nn
    from residual_lecture import watch

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))

        def forward(self, x):
            return x + self.f(x)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), Block(), Block(), Block(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
    overflow, kill = {int(s) for s in sys.argv[2].split(",") if s}, int(sys.argv[3])
    rec = watch(model, sys.argv[1], every=2)
    for step in range(12):
        if step == kill:
            os._exit(0)  # as SIGKILL would: no close, no flush
        for _ in range(2):  # two micro-batches per step
            x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
            loss = nn.functional.cross_entropy(model(x), y) * (float("inf") if step in overflow else 1.0)
            scaler.scale(loss / 2).backward()
        scaler.unscale_(opt)
        rec.step(opt, scaler=scaler, loss=loss.detach())
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    rec.close()
""")


def _run(tmp_path, overflow: str, kill: int = -1) -> dict:
    path = tmp_path / "run.npz"
    done = subprocess.run([sys.executable, "-c", LOOP, str(path), overflow, str(kill)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = invoke("inspect", path)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["watch"]


@pytest.mark.slow  # a real watched loop in a fresh interpreter (~4 CPU s)
def test_inspect_says_what_a_watched_run_recorded(tmp_path):
    watched = _run(tmp_path, overflow="3,6")
    assert watched["complete"] is True and watched["steps_run"] == 12
    assert (watched["steps_recorded"], watched["first_step"], watched["last_step"], watched["every"]) == (6, 0, 10, 2)
    assert watched["blocks"] == 3 and (watched["first_block"], watched["last_block"]) == ("1", "3")
    assert watched["accumulation"] == 2 and watched["micro_batches"] == [2, 2] and watched["world_size"] == 1
    assert watched["dtype"] == "float32" and watched["model"] == "Sequential"
    assert watched["scaler"] is True and watched["scaler_skips"] == 2  # steps 3 and 6 overflowed: each backs off
    assert watched["scaler_skips_recorded"] == 1  # of the records (0, 2, ... 10), step 6 was skipped
    assert watched["scale"] == [2.0 ** 6, 2.0 ** 8]  # 2**8 at 0, 2; halved after step 3 (4, 6), after 6 (8, 10)
    assert watched["nonfinite_records"] == 1


def test_inspect_reads_a_run_not_closed_as_partial(tmp_path):
    """A watched run killed before ``close`` leaves the parts its TraceWriter flushed (simulation.trace): inspect
    reads them, says ``complete: false`` and counts the records flushed (no torch here: the parts are written as
    watch writes them)."""
    from simulation.trace import TraceWriter

    layers = ["layer1.0", "layer1.1", "layer2.0"]
    meta = {"config": {"kind": "watch", "arch": "residual", "record_every": 2, "steps": 0, "model": "ResNet"},
            "layers": layers, "blocks": 3, "watch": {"schema": 1, "complete": False, "every": 2, "world_size": 1,
                                                       "accumulation": 1, "dtype": "float32", "model": "ResNet"}}
    writer = TraceWriter(tmp_path / "run.npz", meta)
    for step in (0, 2, 4):
        writer.append({"step": np.array([step]), "out_grad_norm": np.full((1, 3), 0.5 + step),
                       "nonfinite": np.zeros((1, 3), np.int64), "loss": np.array([1.0 / (step + 1)], np.float32),
                       "micro_batches": np.array([1]), "curve_step": np.arange(step, step + 2),
                       "loss_curve": np.ones(2, np.float32)})
    # no close(): as after SIGKILL
    assert not (tmp_path / "run.npz").exists()
    result = invoke("inspect", tmp_path / "run.npz")
    assert result.exit_code == 0, result.output
    watched = json.loads(result.output)["watch"]
    assert watched["complete"] is False and watched["steps_recorded"] == 3 and watched["last_step"] == 4
    assert watched["blocks"] == 3 and watched["loss"] == [1.0, pytest.approx(0.2)] and watched["model"] == "ResNet"


@pytest.mark.parametrize("update_ratio", [True, False], ids=["update", "default"])
def test_inspect_prints_the_update_ratio_only_when_recorded(tmp_path, update_ratio):
    """With ``update_ratio=True`` inspect prints each block's median update over its records (their median, the
    lowest and highest block by name), equal to a loop over the trace's columns here; by default (no copy of the
    weights, update_ratio NaN) it prints None, not a number."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    from residual_lecture import watch
    from simulation.trace import Trace

    class Block(nn.Module):
        def __init__(self, scale: float) -> None:
            super().__init__()
            self.f = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
            with torch.no_grad():
                for p in self.f.parameters():
                    p.mul_(scale)  # blocks of different weight sizes: different update ratios

        def forward(self, x):
            return x + self.f(x)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), Block(0.5), Block(1.0), Block(4.0), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = tmp_path / "run.npz"
    with watch(model, path, every=1, **({"update_ratio": True} if update_ratio else {})) as rec:
        for _ in range(5):
            F.cross_entropy(model(torch.randn(16, 4)), torch.randint(0, 2, (16,))).backward()
            rec.step(opt)
            opt.step()
            opt.zero_grad()
    result = invoke("inspect", path)
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)["watch"]["update_ratio"]
    if not update_ratio:
        assert printed is None
        return
    trace = Trace.load(path)
    ratio = np.asarray(trace["update_ratio"], np.float64)
    medians = [float(np.median(ratio[:, b])) for b in range(ratio.shape[1])]
    assert all(0 < m < 1 for m in medians)
    names = trace.meta.layers
    assert printed["median"] == pytest.approx(sorted(medians)[1])
    assert printed["lowest"] == [names[medians.index(min(medians))], pytest.approx(min(medians))]
    assert printed["highest"] == [names[medians.index(max(medians))], pytest.approx(max(medians))]
    assert printed["lowest"][0] != printed["highest"][0]
