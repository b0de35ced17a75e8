"""Issue 35's end to end: a training script the tests never saw records with the lines of `watch`, and
`render.py render GradientFlowOverTraining --trace FILE` renders its clip from that file (nothing trained).

The script is a user's own loop: bf16 autocast on CPU, gradient accumulation of 4, gradient clipping, run in a fresh
interpreter; the clip is checked by its metadata (size, a playable mp4) and its numbers record against the trace.
(That the recorded ∂L/∂h equals autograd's is tests/test_watch.py's and tests/test_callbacks.py's.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from simulation.trace import Trace

from support import ROOT, invoke

SCRIPT = textwrap.dedent("""
    import sys, torch
    from torch import nn
    from residual_lecture import watch

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16))

        def forward(self, x):
            return x + self.f(x)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), *[Block() for _ in range(5)], nn.Linear(16, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = torch.randn(256, 8), torch.randint(0, 3, (256,))
    with watch(model, sys.argv[1], every=4) as rec:
        for step in range(20):
            for micro in range(4):
                i = torch.randint(0, 256, (16,))
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = nn.functional.cross_entropy(model(x[i]), y[i]) / 4
                loss.backward()
            rec.before_clip()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            rec.step(optimizer, loss=loss * 4)
            optimizer.step()
            optimizer.zero_grad()
""")


@pytest.mark.slow  # a watched loop in a fresh interpreter and one real render at 480p15 (~25 CPU s)
def test_a_users_own_loop_renders_gradient_flow_from_its_trace(tmp_path):
    trace_file = tmp_path / "runs" / "mine.npz"
    trace_file.parent.mkdir()
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(trace_file)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    trace = Trace.load(trace_file)
    assert trace.meta.watch["accumulation"] == 4 and trace.meta.watch["dtype"] == "bfloat16"
    out = tmp_path / "media"
    result = invoke("render", "GradientFlowOverTraining", "--trace", trace_file, "-q", "l", "-o", out, "--jobs", "1")
    assert result.exit_code == 0, result.output
    assert "0 to train, 0 from the cache, 1 read from its file" in result.stderr
    folder = out / "480p15" / "en"
    clip = folder / "ModelGradientFlowOverTraining.mp4"
    assert clip.is_file() and clip.stat().st_size > 10_000
    import av

    with av.open(str(clip)) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height) == (854, 480) and float(stream.average_rate) == pytest.approx(15, abs=0.01)
    numbers = json.loads((folder / "ModelGradientFlowOverTraining.numbers.json").read_text())
    g = np.asarray(trace["out_grad_norm"], np.float64)
    for k, step in enumerate(trace["step"]):
        assert numbers["values"][f"residual.step.{int(step)}.block.0.out_grad_norm"] == float(g[k, 0])
    assert numbers["blocks"] == trace.meta.layers and numbers["model"] == "Sequential"
    # the counter's "step k of N": the loop's last step (20 steps: 19), not its last record (every 4: 16)
    assert int(trace["step"][-1]) == 16 and numbers["values"]["last_step"] == 19
