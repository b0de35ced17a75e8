"""residual_lecture.watch in a user's own loop: the recorded numbers against autograd, the hooks' lifetime, partial traces.

Example::

    pytest -n 0 tests/test_watch.py -q

Every loop here is written as a user would write it (autocast, gradient accumulation, a GradScaler, clipping), and
the reference numbers are computed beside it by the test itself: ``torch.autograd.grad`` of each micro-batch's
(unscaled) loss with respect to each block's output, the gradients in ``.grad`` read directly, the weights kept
before each update. Tolerances are stated where they are used.
"""

from __future__ import annotations

import copy
import json
import math
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from residual_lecture import plain_twin, watch
from simulation.core import watch as watch_module
from simulation.core.watch import WatchError
from simulation.core.residual_adds import Interceptor
from simulation.trace import Trace, parts_dir

from watch_models import Net, batches

ROOT = Path(__file__).resolve().parent.parent

# Recorded norms are float32 reductions of the same tensors the reference reduces in float64: relative 1e-5.
RTOL = 1e-5


def all_hooks(model: nn.Module) -> int:
    """Every hook of every module of ``model`` (forward, pre-forward, backward, with-kwargs and always-call tables)."""
    tables = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
              "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")
    return sum(len(getattr(m, t)) for m in model.modules() for t in tables)


def user_loop(model, path, *, steps=5, every=2, accumulation=4, autocast=None, scaler=None, unscale=True,
              clip=None, before_clip=False, eval_pass=False, lr=0.05):
    """A user's loop, recorded by watch, with the reference numbers of every recorded step computed beside it."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.5)
    blocks = list(model.blocks)
    weights = [[p for p in b.parameters() if p.ndim >= 2] for b in blocks]
    refs = {}
    with watch(model, path, every=every, update_ratio=True) as rec:
        for step, micro in enumerate(batches(steps, accumulation)):
            recorded = step % every == 0
            outputs, grad_sq, act_rows = [], np.zeros(len(blocks)), [[] for _ in blocks]
            if eval_pass:  # an evaluation pass inside a recorded step records nothing
                model.eval()
                with torch.no_grad():
                    model(micro[0][0])
                model.train()
            if recorded:  # the reference: an unwatched copy with the same weights (its tensors carry no hook of ours)
                reference = copy.deepcopy(model)
                for m in reference.modules():
                    m._forward_hooks.clear()
                    m._forward_pre_hooks.clear()
                handles = [b.register_forward_hook(lambda m, i, o: outputs.append(o)) for b in reference.blocks]
            losses = []
            for x, y in micro:
                with torch.autocast("cpu", dtype=autocast, enabled=autocast is not None):
                    loss = F.cross_entropy(model(x), y) / accumulation
                losses.append(float(loss.detach()))
                if recorded:  # dL/dh of this micro-batch's (unscaled) loss, by autograd
                    outputs.clear()
                    with torch.autocast("cpu", dtype=autocast, enabled=autocast is not None):
                        ref_loss = F.cross_entropy(reference(x), y) / accumulation
                    grads = torch.autograd.grad(ref_loss, outputs)
                    grad_sq += [float(torch.linalg.vector_norm(g.double())) ** 2 for g in grads]
                    for rows, h in zip(act_rows, outputs):
                        rows.append(torch.linalg.vector_norm(h.detach().double().flatten(1), dim=1))
                (scaler.scale(loss) if scaler is not None else loss).backward()
            if recorded:
                for handle in handles:
                    handle.remove()
            if scaler is not None and unscale:
                scaler.unscale_(opt)
            pre = [math.sqrt(sum(float(w.grad.double().norm()) ** 2 for w in ws)) for ws in weights]
            if clip is not None:
                if before_clip:
                    rec.before_clip()
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            rec.step(opt, scaler=scaler, loss=loss)
            if recorded:
                unscale_by = scaler.get_scale() if scaler is not None and not unscale else 1.0
                refs[step] = {
                    "out_grad_norm": np.sqrt(grad_sq),
                    "act_norm": np.array([float(torch.cat(rows).mean()) for rows in act_rows]),
                    "grad_norm": np.array([math.sqrt(sum(float(w.grad.double().norm()) ** 2 for w in ws))
                                           for ws in weights]) / unscale_by,
                    "grad_norm_before_clip": np.array(pre) / unscale_by,
                    "loss": losses[-1],
                }
                before_step = [[w.detach().clone() for w in ws] for ws in weights]
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            opt.zero_grad()
            if recorded:  # the update this step's optimiser step made
                refs[step]["update_ratio"] = np.array([
                    math.sqrt(sum(float((w.detach().double() - p.double()).norm()) ** 2 for w, p in zip(ws, ps)))
                    / math.sqrt(sum(float(p.double().norm()) ** 2 for p in ps)) for ws, ps in zip(weights, before_step)])
    return refs


def check_against(trace: Trace, refs: dict, before_clip: bool = False) -> None:
    assert trace["step"].tolist() == sorted(refs)
    for row, (step, ref) in enumerate(sorted(refs.items())):
        for key in ("out_grad_norm", "act_norm", "grad_norm"):
            np.testing.assert_allclose(trace[key][row], ref[key], rtol=RTOL, err_msg=f"{key} at step {step}")
        if before_clip:
            np.testing.assert_allclose(trace["grad_norm_before_clip"][row], ref["grad_norm_before_clip"], rtol=RTOL)
        assert trace["loss"][row] == pytest.approx(ref["loss"], rel=1e-6)
        # the update of the recorded step's own optimiser step
        np.testing.assert_allclose(trace["update_ratio"][row], ref["update_ratio"], rtol=1e-4)


@pytest.fixture(scope="module")
def bf16_run(tmp_path_factory):
    """bf16 autocast, 4 micro-batches per step, clip_grad_norm_ (rec.before_clip before it, rec.step after)."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("bf16") / "run.npz"
    refs = user_loop(Net(), path, autocast=torch.bfloat16, clip=0.05, before_clip=True)
    return Trace.load(path), refs


def test_bf16_accumulation_clipping_matches_autograd(bf16_run):
    """The recorded dL/dh is the norm of the accumulated step's gradient (sqrt of the micro-batches' summed
    squares), equal to torch.autograd.grad's; weight gradients before and after the clip equal .grad's."""
    trace, refs = bf16_run
    check_against(trace, refs, before_clip=True)
    assert trace["micro_batches"].tolist() == [4, 4, 4]
    assert trace.meta.watch["accumulation"] == 4 and trace.meta.watch["dtype"] == "bfloat16"
    assert trace.meta.watch["complete"] and trace.meta.layers == ["blocks.0", "blocks.1", "blocks.2"]
    assert (trace["grad_norm"] < trace["grad_norm_before_clip"]).all()  # the clip bit
    assert len(trace["loss_curve"]) == 5 and trace.meta.config["steps"] == 5


@pytest.mark.parametrize("unscale", [True, False], ids=["unscaled", "scaled"])
def test_grad_scaler_read_unscaled(tmp_path, unscale):
    """A GradScaler: gradients are recorded unscaled whether or not unscale_ ran before rec.step (the scaled ones
    divided by the scale, .grad left as it is); the scale is recorded."""
    torch.manual_seed(0)
    model = Net()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)
    refs = user_loop(model, tmp_path / "run.npz", scaler=scaler, unscale=unscale, accumulation=2, steps=3)
    trace = Trace.load(tmp_path / "run.npz")
    check_against(trace, refs)
    assert trace["scale"].tolist() == [2.0 ** 12] * 2 and trace["skipped"].tolist() == [0, 0]
    assert trace.meta.watch["scaler"]["init_scale"] == 2.0 ** 12


@pytest.mark.parametrize("key, factor", [("out_grad_norm", 2 ** 0.5), ("act_norm", 1.001), ("grad_norm", 0.999),
                                         ("grad_norm_before_clip", 1.001), ("update_ratio", 1.001)])
def test_numbers_tamper_twin(bf16_run, key, factor):
    """The comparison can fail: a reference off by a micro-batch counted twice (sqrt 2) or by 0.1 % does not match."""
    trace, refs = bf16_run
    bad = {s: {**r, key: r[key] * factor} for s, r in refs.items()}
    with pytest.raises(AssertionError):
        check_against(trace, bad, before_clip=True)


def test_watching_changes_nothing_and_close_restores(tmp_path):
    """Training under watch (its probe forward included: dropout's RNG, BatchNorm-free LayerNorm, buffers) gives
    the very same weights as without; no hook is left after close, none between recorded steps, and a second watch
    of the same model replaces the first instead of adding hooks."""
    def train(watched: bool):
        torch.manual_seed(0)
        model = Net(dropout=0.3)
        before = all_hooks(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        seen = []
        rec = watch(model, tmp_path / "a.npz", every=3) if watched else None
        for step, micro in enumerate(batches(7, 1)):
            x, y = micro[0]
            F.cross_entropy(model(x), y).backward()
            if rec:
                rec.step(opt)
                seen.append(all_hooks(model))
            opt.step()
            opt.zero_grad()
        if rec:
            rec.close()
            rec.close()  # idempotent
        assert all_hooks(model) == before
        return model.state_dict(), seen

    plain, _ = train(False)
    watched, seen = train(True)
    assert all(torch.equal(plain[k], watched[k]) for k in plain)
    # hooks exist only from the rec.step before a recorded step (2, 5) to the recorded step's rec.step (3, 6)
    assert [n > 0 for n in seen] == [False, False, True, False, False, True, False]

    torch.manual_seed(0)
    model = Net()
    first = watch(model, tmp_path / "1.npz", every=1)
    once = all_hooks(model)
    second = watch(model, tmp_path / "2.npz", every=1)
    assert first.closed and all_hooks(model) == once
    second.close()
    assert all_hooks(model) == 0


def test_eval_and_no_grad_passes_record_nothing(tmp_path):
    """An eval() / no_grad forward inside a recorded step changes no recorded number and counts no micro-batch."""
    torch.manual_seed(0)
    refs = user_loop(Net(), tmp_path / "a.npz", accumulation=2, steps=3, eval_pass=True)
    trace = Trace.load(tmp_path / "a.npz")
    check_against(trace, refs)
    assert trace["micro_batches"].tolist() == [2, 2]


def test_example_input_and_errors(tmp_path):
    """``example_input`` finds the blocks at once; a model with no residual addition is refused in one line."""
    torch.manual_seed(0)
    model = Net()
    with watch(model, tmp_path / "a.npz", every=1, example_input=torch.randn(2, 12)) as rec:
        assert rec.names == ["blocks.0", "blocks.1", "blocks.2"]
    plain = nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 5))
    rec = watch(plain, tmp_path / "b.npz")
    with pytest.raises(WatchError, match="no residual addition") as caught:
        plain(torch.randn(4, 12))
    assert "\n" not in str(caught.value)
    rec.close()
    assert not (tmp_path / "b.npz").exists() and not parts_dir(tmp_path / "b.npz").exists()
    with pytest.raises(WatchError, match="every"):
        watch(model, tmp_path / "c.npz", every=0)


def test_plain_twin(tmp_path):
    """plain_twin: a copy whose blocks return F(x) alone (computed here by hand), the original untouched; watched,
    its shortcut norms are 0."""
    torch.manual_seed(0)
    model = Net()
    twin = plain_twin(model)
    x = torch.randn(4, 12)
    expected = model.stem(x)
    for block in model.blocks:
        expected = block.mlp(block.norm(expected))
    expected = model.head(expected)
    torch.testing.assert_close(twin(x), expected)
    assert not torch.allclose(model(x), expected)  # the original keeps its shortcuts
    opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    with watch(twin, tmp_path / "twin.npz", every=1) as rec:
        F.cross_entropy(twin(x), torch.zeros(4, dtype=torch.long)).backward()
        rec.step(opt)
    trace = Trace.load(tmp_path / "twin.npz")
    assert trace.meta.watch["arch"] == "plain" and (trace["shortcut_norm"] == 0).all()
    assert np.isfinite(trace["out_grad_norm"]).all()



class BatchNormBlock(nn.Module):
    """h = x + BN(Linear(x)): in train mode BatchNorm also adds 1 to num_batches_tracked inside the block."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.linear, self.norm = nn.Linear(width, width), nn.BatchNorm1d(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.norm(self.linear(x))


def plain_by_hand(model: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``model``'s forward with every block returning F(x) alone, written out here (the twin's reference)."""
    for block in model:
        x = block.norm(block.linear(x))
    return x


@pytest.mark.parametrize("first", ["eval", "train"])
def test_plain_twin_first_called_in_eval_mode(tmp_path, first):
    """A plain twin whose first forward is an eval()/no_grad() check (BatchNorm's train-mode ``add_(1)`` absent then)
    stays plain in train mode and in eval mode after it, and its watch records every block."""
    torch.manual_seed(0)
    model = nn.Sequential(BatchNormBlock(), BatchNormBlock())
    twin = plain_twin(model)
    x = torch.randn(6, 8)
    with torch.no_grad():
        twin.train(first == "train")(x)
    twin.train()
    reference = copy.deepcopy(twin)  # its BatchNorm statistics as they are now, updated by the same forward below
    torch.testing.assert_close(twin(x), plain_by_hand(reference, x))
    assert not torch.allclose(model(x), plain_by_hand(copy.deepcopy(model), x))  # the check tells residual from plain
    twin.eval(), reference.eval()
    torch.testing.assert_close(twin(x), plain_by_hand(reference, x))
    twin.train()
    opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    with watch(twin, tmp_path / "twin.npz", every=1) as rec:
        twin(x).square().mean().backward()
        rec.step(opt)
    trace = Trace.load(tmp_path / "twin.npz")
    assert trace.meta.layers == ["0", "1"] and np.isfinite(trace["out_grad_norm"]).all()


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_watch_example_input_in_eval_mode(tmp_path, mode):
    """watch(..., example_input=x) of a BatchNorm model left in eval mode finds the blocks that its training
    forwards then pass (each record's ‖∂L/∂h‖ equals autograd's, within RTOL)."""
    torch.manual_seed(0)
    model = nn.Sequential(BatchNormBlock(), BatchNormBlock())
    x = torch.randn(6, 8)
    model.train(mode == "train")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, tmp_path / "a.npz", every=1, example_input=x) as rec:
        model.train()
        reference = copy.deepcopy(model)
        outputs = []
        handles = [b.register_forward_hook(lambda m, i, o: outputs.append(o)) for b in reference]
        expected = torch.autograd.grad(reference(x).square().mean(), outputs)
        for h in handles:
            h.remove()
        model(x).square().mean().backward()
        rec.step(opt)
    recorded = Trace.load(tmp_path / "a.npz")["out_grad_norm"][0]
    np.testing.assert_allclose(recorded, [g.double().norm().item() for g in expected], rtol=RTOL)

# The killed runs of the tests below share one interpreter (a child of tests/forked.py's server, which imported
# torch): it imports watch once, then forks one child per run, which trains as a user's loop would and kills itself
# (SIGKILL) after step ``last``; the parent only imports, nothing of torch runs in it before the forks. Each child's stderr goes to a file of its own; the parent prints, per run, what
# subprocess.run would have returned (the exit status and the stderr).
KILLED = """
import json, os, signal, sys, traceback, torch
sys.path.insert(0, {tests!r})
from watch_models import Net, batches
from residual_lecture import watch
from simulation.core import watch as watch_module
import torch._dynamo  # what each child's first optimiser would import (~1 CPU s): imported once, before the forks
import torch.nn.functional as F

def loop(path, every, last, seconds):
    if seconds is not None:
        watch_module.PROGRESS_SECONDS = seconds
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = watch(model, path, every=every)
    for step, micro in enumerate(batches(9, 1)):
        loss = F.cross_entropy(model(micro[0][0]), micro[0][1])
        loss.backward()
        rec.step(opt, loss=loss)
        opt.step(); opt.zero_grad()
        if step == last:
            os.kill(os.getpid(), signal.SIGKILL)

done = {{}}
for name, (path, every, last, seconds) in {runs!r}.items():
    err = path + ".stderr"
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 2)
            loop(path, every, last, seconds)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(1)  # a child never goes on into the parent's loop
    status = os.waitpid(pid, 0)[1]
    done[name] = {{"returncode": os.waitstatus_to_exitcode(status), "stderr": open(err).read()}}
print(json.dumps(done))
"""

# name: (every, last, seconds between progress refreshes; None: watch's own PROGRESS_SECONDS)
KILLED_RUNS = {"every-2-killed-after-6": (2, 6, None), "progress-written": (5, 7, 0.0),
               "tamper-no-progress": (5, 7, 1e9)}


@pytest.fixture(scope="module")
def killed_runs(tmp_path_factory) -> dict[str, tuple[Path, subprocess.CompletedProcess]]:
    """{name: (trace path, the killed run's exit status and stderr)} of every run of KILLED_RUNS, a user's loop
    recording every ``every`` steps that kills itself (SIGKILL) after step ``last``."""
    folder = tmp_path_factory.mktemp("killed")
    runs = {name: (str(folder / name / "killed.npz"), *spec) for name, spec in KILLED_RUNS.items()}
    for path, *_ in runs.values():
        Path(path).parent.mkdir()
    from forked import run_forked

    script = KILLED.format(tests=str(ROOT / "tests"), runs=runs)
    done = run_forked(script)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    return {name: (Path(runs[name][0]), subprocess.CompletedProcess(script, found[name]["returncode"], "",
                                                                     found[name]["stderr"]))
            for name in KILLED_RUNS}


@pytest.mark.xdist_group("torch-probes")  # one worker forks them all (the fixture above; tests/forked.py)
def test_sigkill_keeps_every_recorded_step(killed_runs):
    """A run killed by SIGKILL after step 6 (records at 0, 2, 4, 6) leaves parts that Trace.load reads as a
    partial trace with all four records."""
    path, done = killed_runs["every-2-killed-after-6"]
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert not path.exists()
    trace = Trace.load(path)
    assert trace["step"].tolist() == [0, 2, 4, 6]
    assert trace.meta.watch["complete"] is False and trace.meta.watch["steps_recorded"] == 4
    assert np.isfinite(trace["out_grad_norm"]).all() and trace["out_grad_norm"].shape == (4, 3)
    # the twin: without the parts the killed run left nothing to read
    import shutil

    from simulation.trace import TraceError

    shutil.rmtree(parts_dir(path))
    with pytest.raises(TraceError, match="does not exist"):
        Trace.load(path)


@pytest.mark.xdist_group("torch-probes")
@pytest.mark.parametrize("name, steps", [("progress-written", 8), ("tamper-no-progress", 6)],
                         ids=["progress-written", "tamper-no-progress"])
def test_a_run_killed_between_records_says_how_far_it_went(killed_runs, name, steps):
    """Killed after step 7 with records at 0 and 5: the metadata the writer refreshes (every PROGRESS_SECONDS; 0
    here: every step) says 8 steps ran, which the partial trace and render.py inspect report, and the loss curve
    written with it holds all 8 steps; the twin, whose writer never refreshed either, knows only the 6 steps its
    records and curves hold (the same losses: both runs start from one seed)."""
    from support import invoke

    path, done = killed_runs[name]
    assert done.returncode == -signal.SIGKILL, done.stderr
    trace = Trace.load(path)
    assert trace["step"].tolist() == [0, 5] and trace.meta.config["steps"] == steps
    curve = trace["loss_curve"]
    assert len(curve) == steps and np.isfinite(curve).all()
    assert curve[[0, 5]].tolist() == trace["loss"].tolist()  # the records' own losses, at their steps
    twin = Trace.load(killed_runs["tamper-no-progress"][0])["loss_curve"]
    np.testing.assert_array_equal(curve[:6], twin)
    result = invoke("inspect", path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["watch"]["steps_run"] == steps


class CheckpointedNet(Net):
    """Net whose blocks run under torch.utils.checkpoint (``reentrant`` True / False), or plainly (None)."""

    def __init__(self, reentrant: bool | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.reentrant = reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for block in self.blocks:
            h = block(h) if self.reentrant is None else checkpoint(block, h, use_reentrant=self.reentrant)
        return self.head(self.drop(h))


def checkpointed_trace(path: Path, reentrant: bool | None) -> Trace:
    torch.manual_seed(0)
    model = CheckpointedNet(reentrant)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, path, every=1) as rec:
        for micro in batches(2, 2):
            for x, y in micro:
                F.cross_entropy(model(x), y).backward()
            rec.step(opt)
            opt.step()
            opt.zero_grad()
    return Trace.load(path)


CHECKPOINT_KEYS = ("act_norm", "act_std", "input_norm", "branch_norm", "out_grad_norm", "in_grad_norm", "grad_norm",
                   "micro_batches")


@pytest.mark.parametrize("reentrant", [True, False], ids=["reentrant", "non-reentrant"])
def test_activation_checkpointing(tmp_path, reentrant, monkeypatch):
    """Under activation checkpointing every number is the one recorded without it (the recomputed forward during
    backward is neither counted twice nor missed: reentrant checkpointing's gradients exist only there). Tamper
    twin: without the interceptor's recompute numbering, reentrant checkpointing loses the gradients."""
    plain = checkpointed_trace(tmp_path / "plain.npz", None)
    trace = checkpointed_trace(tmp_path / "ckpt.npz", reentrant)
    for key in CHECKPOINT_KEYS:
        np.testing.assert_allclose(trace[key], plain[key], rtol=1e-6, err_msg=key)
    if reentrant:
        monkeypatch.setattr(watch_module._Interceptor, "_pre", Interceptor._pre)
        broken = checkpointed_trace(tmp_path / "broken.npz", reentrant)
        assert not np.allclose(broken["out_grad_norm"], plain["out_grad_norm"], rtol=1e-6, equal_nan=True)


DDP_RTOL = 1e-5  # float32 sums over 4 + 4 rows against 8: the reduction order differs


@pytest.mark.slow  # two processes that each import torch: ~10 s on an idle machine
def test_ddp_two_processes_match_one(tmp_path):
    """DistributedDataParallel on 2 CPU processes (gloo), each with half of every batch: one trace, written by rank
    0, equal to one process training on the whole batch (mean loss) within DDP_RTOL. dL/dh is that of the mean of
    the ranks' losses (sum of squares over ranks / world size squared), as DDP's averaged gradients define it."""
    import torch.multiprocessing as mp

    from watch_models import ddp_worker, train_steps

    torch.manual_seed(0)
    train_steps(Net(), tmp_path / "one.npz", [m[0] for m in batches(3, 1, batch=8)])
    ranks = mp.spawn(ddp_worker, args=(2, str(tmp_path / "ddp.npz"), str(tmp_path / "rendezvous")), nprocs=2,
                     join=False)
    # gloo's destroy_process_group hangs now and then after the trace is written (one run in nine in a user's
    # torchrun loop; pytorch/pytorch#75097, open): once rank 0 has written it, the ranks get 60 s to exit, then go
    written_at, started = None, time.monotonic()
    while not ranks.join(timeout=1):
        if written_at is None and (tmp_path / "ddp.npz").exists():
            written_at = time.monotonic()
        if (written_at is not None and time.monotonic() - written_at > 60) or time.monotonic() - started > 600:
            for process in ranks.processes:
                process.kill()
            assert written_at is not None, "the DDP ranks wrote no trace in 600 s"
            break
    one, ddp = Trace.load(tmp_path / "one.npz"), Trace.load(tmp_path / "ddp.npz")
    assert ddp.meta.watch["world_size"] == 2 and ddp.meta.watch["wrappers"] == ["DistributedDataParallel"]
    for key in ("act_norm", "act_mean", "act_std", "input_norm", "branch_norm", "out_grad_norm", "in_grad_norm",
                "grad_norm", "update_ratio", "loss", "loss_curve", "total_grad_norm"):
        np.testing.assert_allclose(ddp[key], one[key], rtol=DDP_RTOL, err_msg=key)
    # tamper twin: the per-rank dL/dh (what one rank alone would record) is off by far more than the tolerance
    assert not np.allclose(ddp["out_grad_norm"] * 2 ** 0.5, one["out_grad_norm"], rtol=DDP_RTOL)


def test_data_parallel_is_unwrapped(tmp_path):
    """nn.DataParallel (on CPU it calls its module): the same trace as the bare module."""
    from watch_models import train_steps

    torch.manual_seed(0)
    train_steps(Net(), tmp_path / "bare.npz", [m[0] for m in batches(2, 1)])
    torch.manual_seed(0)
    train_steps(nn.DataParallel(Net()), tmp_path / "dp.npz", [m[0] for m in batches(2, 1)])
    bare, dp = Trace.load(tmp_path / "bare.npz"), Trace.load(tmp_path / "dp.npz")
    assert dp.meta.watch["wrappers"] == ["DataParallel"]
    for key in ("act_norm", "out_grad_norm", "grad_norm"):
        np.testing.assert_array_equal(dp[key], bare[key])


@pytest.mark.slow  # torch.compile: tens of seconds of compiling
def test_torch_compile(tmp_path):
    """A torch.compile'd model: recorded steps run eagerly (torch.compiler.set_stance("force_eager") while armed), so
    the numbers are eager's and the compiled graph is compiled once and never sees a hook (no recompilation);
    the stance is restored after."""
    from torch._dynamo.eval_frame import _stance
    from torch._dynamo.utils import counters

    from watch_models import train_steps

    micro = [m[0] for m in batches(5, 1)]
    torch.manual_seed(0)
    train_steps(Net(), tmp_path / "eager.npz", micro, every=2)
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    train_steps(torch.compile(Net()), tmp_path / "compiled.npz", micro, every=2)
    assert counters["stats"]["unique_graphs"] == 1
    assert torch._dynamo.eval_frame._stance.stance == "default" and _stance is not None
    eager, compiled = Trace.load(tmp_path / "eager.npz"), Trace.load(tmp_path / "compiled.npz")
    assert compiled.meta.watch["wrappers"] == ["torch.compile"]
    for key in ("act_norm", "out_grad_norm", "grad_norm", "update_ratio", "loss"):
        np.testing.assert_allclose(compiled[key], eager[key], rtol=1e-5, err_msg=key)


def test_same_numbers_as_a_model_run(tmp_path):
    """On one step of a torchvision-style ResNet block stack (projection shortcuts, BatchNorm, in-place ReLU) watch
    records what ``--model``'s recorder (simulation.kinds.user_model.UserRecorder) records for the same batch: every
    key within 1e-5 relative (act_std: 1e-4, watch's std comes from float64 sums of float32 entries)."""
    from simulation.core.residual_adds import find_residual_adds
    from simulation.kinds.user_model import UserRecorder

    class Basic(nn.Module):
        def __init__(self, cin: int, cout: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)
            self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))
                               if cin != cout else None)

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            out += identity
            return self.relu(out)

    def build():
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), Basic(4, 4), Basic(4, 8), Basic(8, 8),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))

    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(6, 3, 8, 8, generator=g), torch.randint(0, 3, (6,), generator=g)
    model = build()
    adds = find_residual_adds(build(), (x[:2],)).adds
    from simulation.core.residual_adds import Interceptor as Plain

    with UserRecorder(model, adds, Plain(model, adds)) as recorder:
        recorder.arm()
        F.cross_entropy(model(x), y).backward()
        expected = recorder.collect()
    model = build()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, tmp_path / "w.npz", every=1) as rec:
        F.cross_entropy(model(x), y).backward()
        rec.step(opt)
    trace = Trace.load(tmp_path / "w.npz")
    assert trace.meta.layers == [a.name for a in adds] and trace.meta.shortcuts == ["identity", "projection", "identity"]
    for key in ("act_mean", "act_norm", "input_norm", "branch_norm", "branch_std", "shortcut_norm", "grad_norm",
                "out_grad_norm", "in_grad_norm", "nonfinite"):
        np.testing.assert_allclose(trace[key][0], expected[key], rtol=1e-5, atol=1e-7, err_msg=key)
    np.testing.assert_allclose(trace["act_std"][0], expected["act_std"], rtol=1e-4)


def test_trace_writer_merges_and_keeps_each_record_once(tmp_path):
    """TraceWriter: 130 one-record parts (two merges of 64) read back as 130 records and curves in step order; a
    merge interrupted after writing its merged part (the merged parts still there) still gives each record once;
    close consolidates into one file and removes the parts."""
    from simulation.trace import MERGE_PARTS, TraceWriter, load_parts

    path = tmp_path / "w.npz"
    writer = TraceWriter(path, {"config": {"kind": "watch"}, "watch": {"schema": 1}})
    for step in range(130):
        writer.append({"step": np.array([step]), "loss": np.array([step / 2], np.float32),
                       "curve_step": np.array([step]), "loss_curve": np.array([step / 4], np.float32)})
    assert len(list(parts_dir(path).glob("part-*.npz"))) == 130 - 2 * MERGE_PARTS + 2
    trace = Trace.load(path)
    assert trace["step"].tolist() == list(range(130)) and trace["loss"].tolist() == [s / 2 for s in range(130)]
    assert trace["loss_curve"].tolist() == [s / 4 for s in range(130)] and not trace.meta.watch["complete"]
    # a merge killed between writing the merged part and removing the small ones: both sets on disk
    first = sorted(parts_dir(path).glob("part-*.npz"))[0]
    (parts_dir(path) / "part-000000001.npz").write_bytes(first.read_bytes())
    assert load_parts(path)["step"].tolist() == list(range(130))
    writer.close()
    assert not parts_dir(path).exists() and Trace.load(path).meta.watch["complete"]
    assert Trace.load(path)["step"].tolist() == list(range(130))


def test_fsdp_is_refused_in_one_line(tmp_path):
    """FSDP (FullyShardedDataParallel and fully_shard) is refused with one line, on a one-process gloo group; the
    tamper twin: the same model under DDP is accepted."""
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        wrapped = [FullyShardedDataParallel(Net(), device_id=torch.device("cpu"))]
        sharded = Net()
        fully_shard(sharded)
        for model in (*wrapped, sharded):
            with pytest.raises(WatchError, match="does not support FSDP") as caught:
                watch(model, tmp_path / "fsdp.npz")
            assert "\n" not in str(caught.value)
        watch(nn.parallel.DistributedDataParallel(Net()), tmp_path / "ddp.npz").close()
    finally:
        dist.destroy_process_group()


HOST_READS = ("item", "tolist", "cpu", "__float__", "__int__", "__bool__", "__index__")


def test_one_host_copy_per_recorded_step_none_between(tmp_path, monkeypatch):
    """Every way a tensor's value reaches the host (.item(), .tolist(), .cpu(), float(), int(), bool()) is counted
    per step: 0 in a step that is not recorded (its forward, backward, rec.step and optimiser step), exactly one .cpu()
    in a recorded one. The tamper twin: a loop that logs float(loss) is seen by the same counter."""
    counts: dict[str, int] = {}
    for name in HOST_READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, __original=original, __name=name, **kwargs):
            counts[__name] = counts.get(__name, 0) + 1
            return __original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    per_step = []
    with watch(model, tmp_path / "a.npz", every=3, example_input=torch.randn(2, 12)) as rec:
        for step, micro in enumerate(batches(7, 2)):
            counts.clear()
            for x, y in micro:
                loss = F.cross_entropy(model(x), y)
                loss.backward()
            rec.step(opt, loss=loss)
            opt.step()  # a recorded step's copy comes here, in the post-hook that measures its update
            opt.zero_grad()
            per_step.append(dict(counts))
            if step == 6:
                counts.clear()
                float(loss)
                assert counts == {"__float__": 1}
    assert per_step == [{"cpu": 1}, {}, {}, {"cpu": 1}, {}, {}, {"cpu": 1}], per_step


def test_update_without_a_torch_optimiser_completes_at_the_next_step(tmp_path):
    """A hand-written update (no torch.optim optimiser, so no post-hook fires): each record completes at the next
    rec.step (or close) with the update made in between, equal to the one computed here; the global optimiser
    post-hook exists only while a record waits for its update."""
    from torch.optim.optimizer import _global_optimizer_post_hooks

    torch.manual_seed(0)
    model = Net()
    weights = [[p for p in b.parameters() if p.ndim >= 2] for b in model.blocks]
    expected, waiting = [], []
    with watch(model, tmp_path / "a.npz", every=2, update_ratio=True) as rec:
        for step, micro in enumerate(batches(5, 1)):
            x, y = micro[0]
            F.cross_entropy(model(x), y).backward()
            rec.step()
            waiting.append(len(_global_optimizer_post_hooks))
            before = [[w.detach().clone() for w in ws] for ws in weights]
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.1 * p.grad
                    p.grad = None
            if step % 2 == 0:
                expected.append([math.sqrt(sum(float((w.double() - b.double()).norm()) ** 2 for w, b in zip(ws, bs)))
                                 / math.sqrt(sum(float(b.double().norm()) ** 2 for b in bs))
                                 for ws, bs in zip(weights, before)])
    assert waiting == [1, 0, 1, 0, 1] and not _global_optimizer_post_hooks
    trace = Trace.load(tmp_path / "a.npz")
    np.testing.assert_allclose(trace["update_ratio"], expected, rtol=1e-4)
    with pytest.raises(AssertionError):  # the tamper twin: the update of the step after the record is not it
        np.testing.assert_allclose(trace["update_ratio"][:2], np.array(expected[1:]), rtol=1e-4)


def test_update_ratio_off(tmp_path):
    """update_ratio=False, the default: no copy of the weights, no optimiser hook, update_ratio NaN, the rest as
    with it."""
    from torch.optim.optimizer import _global_optimizer_post_hooks

    micro = [m[0] for m in batches(3, 1)]
    for flag in (True, None):
        torch.manual_seed(0)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with watch(model, tmp_path / f"{flag}.npz", every=1, **({} if flag is None else {"update_ratio": flag})) as rec:
            for x, y in micro:
                F.cross_entropy(model(x), y).backward()
                rec.step(opt)
                assert (rec._snapshot is not None) == bool(flag)
                assert len(_global_optimizer_post_hooks) == bool(flag)
                opt.step()
                opt.zero_grad()
    on, off = Trace.load(tmp_path / "True.npz"), Trace.load(tmp_path / "None.npz")
    assert np.isnan(off["update_ratio"]).all() and np.isfinite(on["update_ratio"][1:]).all()
    assert off.meta.watch["update_ratio"] is False
    np.testing.assert_array_equal(on["out_grad_norm"], off["out_grad_norm"])


def test_watch_a_twin_before_its_first_forward(tmp_path):
    """watch(plain_twin(model)) with no example input anywhere: the twin's first forward finds the additions once
    (its probe forward passes the watch's hook by), is recorded as the twin, and trains as the twin."""
    torch.manual_seed(0)
    twin = plain_twin(Net())
    opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    with watch(twin, tmp_path / "twin.npz", every=1) as rec:
        for micro in batches(2, 1):
            x, y = micro[0]
            F.cross_entropy(twin(x), y).backward()
            rec.step(opt)
            opt.step()
            opt.zero_grad()
    trace = Trace.load(tmp_path / "twin.npz")
    assert trace.meta.layers == ["blocks.0", "blocks.1", "blocks.2"] and trace["step"].tolist() == [0, 1]
    assert (trace["shortcut_norm"] == 0).all() and np.isfinite(trace["out_grad_norm"]).all()


def test_per_step_curves_far_between_records(tmp_path):
    """every far beyond the run's length allocates nothing in proportion to every; the loss curve of 2,500 steps
    (three buffer chunks of 1,024) comes back whole: step 0 recorded, the rest written at close."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, tmp_path / "a.npz", every=10 ** 12) as rec:
        x, y = batches(1, 1)[0][0]
        F.cross_entropy(model(x), y).backward()
        rec.step(opt, loss=torch.tensor(0.0))
        for step in range(1, 2500):
            rec.step(opt, loss=torch.tensor(float(step)) if step % 2 else float(step))  # a tensor or a number
    trace = Trace.load(tmp_path / "a.npz")
    assert trace["step"].tolist() == [0] and trace["loss_curve"].tolist() == list(range(2500))
    assert trace.meta.config["steps"] == 2500 and (trace["lr_curve"] == np.float32(0.1)).all()


def test_twin_of_a_watched_model(tmp_path):
    """plain_twin of a model whose watch is armed: the twin carries none of the watch's hooks (nor a copy of the
    watch), the original's recording goes on."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = batches(1, 1)[0][0]
    with watch(model, tmp_path / "a.npz", every=1, example_input=x[:2]) as rec:
        twin = plain_twin(model)
        assert all_hooks(twin) == 2  # its own first-forward hook (a pre-hook with keyword arguments) alone
        F.cross_entropy(model(x), y).backward()
        rec.step(opt)
        F.cross_entropy(twin(x), y)
    assert Trace.load(tmp_path / "a.npz")["step"].tolist() == [0]
    assert all_hooks(model) == 0 and all_hooks(twin) > 0  # the twin's interceptor, for its lifetime


@pytest.mark.parametrize("unscale", [True, False], ids=["unscaled", "scaled"])
def test_skipped_step_is_recorded(tmp_path, unscale):
    """A GradScaler step with an infinite gradient (step 1): skipped = 1 at its record, its non-finite gradients
    counted, and the scale curve halves at the next step (GradScaler's backoff), which is how every skipped step,
    recorded or not, reads in the trace."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    with watch(model, tmp_path / "a.npz", every=1) as rec:
        for step, micro in enumerate(batches(4, 1)):
            x, y = micro[0]
            loss = F.cross_entropy(model(x * (math.inf if step == 1 else 1.0)), y)
            scaler.scale(loss).backward()
            if unscale:
                scaler.unscale_(opt)
            rec.step(opt, scaler=scaler, loss=loss)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    trace = Trace.load(tmp_path / "a.npz")
    assert trace["skipped"].tolist() == [0, 1, 0, 0]
    assert trace["scale_curve"].tolist() == [1024.0, 1024.0, 512.0, 512.0]
    assert trace["nonfinite_grad"][1].sum() > 0 and trace["nonfinite_grad"][[0, 2, 3]].sum() == 0


def test_bench_watch_memory_run(tmp_path):
    """benchmarks/bench_watch.py's host-memory run works on a few steps (every step recorded and written): one RSS
    sample per tenth of the run, and the trace it wrote holds every step."""
    from benchmarks.bench_watch import memory

    samples = memory(20, tmp_path)
    assert [step for step, _ in samples] == list(range(2, 21, 2)) and all(rss > 0 for _, rss in samples)
    assert Trace.load(tmp_path / "memory.npz")["step"].tolist() == list(range(20))
