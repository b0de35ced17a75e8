"""Sweeps on a real Dask cluster (a `dask scheduler` and two `dask worker` processes on 127.0.0.1, started
and stopped here) give the traces of the same sweep run locally; a lost worker and a diverging run. The cluster
tests are slow (CI runs them); the default run checks the local sweep, the size rule and the error paths."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dask_cluster import Cluster, free_port, wait_for
from simulation.config import RunConfig
from simulation.cache import run_sweep
from simulation.sweep import SweepError, run_to_bytes, scheduler_address
from simulation.trace import Trace

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for this file, its workers warmed up (torch imported). The test that kills a worker
    runs last."""
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        from distributed import Client

        with Client(c.address, timeout=20) as client:
            # A worker's first run also imports sklearn and initialises torch (seconds on a busy machine).
            warm_up = RunConfig(depth=2, width=4, steps=2).to_dict()
            client.run(run_to_bytes, warm_up)
            run_to_bytes(warm_up)  # and this process, for the local sweeps
        yield c
    finally:
        c.stop()


def _configs(steps: int = 30) -> list[RunConfig]:
    """Small but real runs: MLP and conv, plain and residual, two seeds."""
    out = [RunConfig(arch=arch, depth=4, width=16, steps=steps, seed=seed, record_every=10)
           for arch in ("plain", "residual") for seed in (0, 1)]
    out.append(RunConfig(model="conv", arch="residual", depth=8, width=4, activation="relu", norm="batchnorm",
                         steps=5, batch_size=16, record_every=2))
    return out


def _same(a: Trace, b: Trace) -> None:
    """Bit-identical: same metadata, same arrays (keys, dtypes, every bit). Only ``trained_with_seeds`` may differ:
    a local sweep trains the seeds of one config together (simulation.kinds.stacked), a cluster each run alone."""
    assert {**a.meta.to_dict(), "trained_with_seeds": None} == {**b.meta.to_dict(), "trained_with_seeds": None}
    assert sorted(a.arrays) == sorted(b.arrays)
    for key in a.arrays:
        x, y = a.arrays[key], b.arrays[key]
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert x.tobytes() == y.tobytes(), f"{key} differs"


def _sweep_in(cache: Path, monkeypatch, configs, **kwargs) -> list[Trace]:
    monkeypatch.setenv("RESIDUAL_CACHE", str(cache))
    return run_sweep(configs, progress=False, **kwargs)


@pytest.mark.xdist_group("sweep-cluster")  # one worker builds the module fixture, not both
@pytest.mark.slow  # a scheduler and two worker processes (the fixture: ~7 CPU s); CI runs it
def test_cluster_sweep_is_bit_identical_to_local_and_cached_runs_are_not_sent(cluster, tmp_path, monkeypatch):
    configs = _configs()
    local = _sweep_in(tmp_path / "local", monkeypatch, configs, scheduler="local")
    remote = _sweep_in(tmp_path / "remote", monkeypatch, configs, scheduler=cluster.address)
    for a, b in zip(local, remote):
        _same(a, b)
    assert len(list((tmp_path / "remote").glob("*.npz"))) == len(configs)
    assert not list((tmp_path / "remote").glob(".*"))  # no temporary file left behind

    # A second sweep finds everything cached and sends nothing: at an address where no scheduler listens
    # it would fail (see the next-but-one test) if it tried to send a run.
    again = _sweep_in(tmp_path / "remote", monkeypatch, configs, scheduler=f"tcp://127.0.0.1:{free_port()}")
    for a, b in zip(local, again):
        _same(a, b)


@pytest.mark.xdist_group("sweep-cluster")  # one worker builds the module fixture, not both
@pytest.mark.slow  # a scheduler and two worker processes (the fixture: ~7 CPU s); CI runs it
def test_a_run_that_diverges_on_a_worker_comes_back_as_a_diverged_trace(cluster, tmp_path, monkeypatch):
    diverging = RunConfig(activation="relu", depth=20, steps=60, lr=1.0, init_gain=2.0)
    finite = RunConfig(depth=3, steps=5)
    bad, good = _sweep_in(tmp_path / "remote", monkeypatch, [diverging, finite], scheduler=cluster.address)
    assert bad.meta.diverged is True and bad.meta.diverged_step is not None
    assert not good.meta.diverged
    (local,) = _sweep_in(tmp_path / "local", monkeypatch, [diverging], scheduler="local")
    _same(local, bad)


def test_no_scheduler_at_the_address_is_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(SweepError, match="cannot reach the Dask scheduler"):
        _sweep_in(tmp_path, monkeypatch, _configs(steps=2)[:2], scheduler=f"tcp://127.0.0.1:{free_port()}",
                  connect_timeout=0.3)  # refused at once; Dask retries until the timeout
    assert not list(tmp_path.iterdir())


def test_scheduler_address_comes_from_the_option_or_the_environment(monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://10.0.0.5:8786")
    assert scheduler_address(None) == "tcp://10.0.0.5:8786"
    assert scheduler_address("tcp://127.0.0.1:1") == "tcp://127.0.0.1:1"
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS")
    assert scheduler_address(None) is None
    with pytest.raises(ValueError, match="tcp://HOST:PORT"):
        scheduler_address("10.0.0.5")


@pytest.mark.xdist_group("sweep-cluster")  # one worker builds the module fixture, not both
@pytest.mark.slow  # a scheduler and two worker processes (the fixture: ~7 CPU s); CI runs it
def test_killing_a_worker_mid_sweep_still_completes_with_the_same_traces(cluster, tmp_path, monkeypatch):
    """Runs last: it leaves the module's cluster with one worker."""
    configs = [RunConfig(arch="residual", depth=6, width=32, steps=60, seed=seed) for seed in range(6)]
    cache = tmp_path / "remote"
    victim = cluster.workers[0]

    def kill_after_first_result() -> None:
        try:
            wait_for(lambda: any(cache.glob("*.npz")), 60, "the first trace")
        except TimeoutError:
            return
        victim.kill()  # SIGKILL: the worker dies with whatever it is running

    killer = threading.Thread(target=kill_after_first_result, daemon=True)
    killer.start()
    remote = _sweep_in(cache, monkeypatch, configs, scheduler=cluster.address)
    killer.join(timeout=5)
    assert victim.poll() is not None, "the worker was not killed before the sweep ended"
    local = _sweep_in(tmp_path / "local", monkeypatch, configs, scheduler="local")
    for a, b in zip(local, remote):
        _same(a, b)


def test_a_small_run_set_trains_in_this_process_and_a_large_one_is_sent(tmp_path, monkeypatch):
    import simulation.sweep as sweep

    small = [RunConfig(depth=2, width=4, steps=2, seed=s) for s in range(3)]
    assert sum(map(sweep.sweep_work, small)) < sweep.LOCAL_MAX_WORK
    assert sweep.runs_here(small)
    traces = _sweep_in(tmp_path, monkeypatch, small)
    assert [t.meta.seed for t in traces] == [0, 1, 2]
    large = [RunConfig(depth=56, steps=1000, seed=s) for s in range(2)]
    assert sum(map(sweep.sweep_work, large)) >= sweep.LOCAL_MAX_WORK
    assert not sweep.runs_here(large) and sweep.runs_here(large, "local") and sweep.runs_here(large, here=True)
    assert not sweep.runs_here(small, "tcp://127.0.0.1:1") and not sweep.runs_here(small, here=False)


def test_the_sweep_command_refuses_bad_input_with_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RESIDUAL_CACHE": str(tmp_path)}
    for args, message in ((["nosuch"], "unknown experiment"), (["vanishing", "--set", "seeds=1,1"], "distinct"),
                          (["vanishing", "--set", "depths"], "expected")):
        done = subprocess.run([sys.executable, "-m", "simulation.experiments", *args], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr)
    assert not list(tmp_path.iterdir())
