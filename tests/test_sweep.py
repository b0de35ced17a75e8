"""Sweeps on a real Dask cluster (a `dask scheduler` and two `dask worker` processes on 127.0.0.1, started
and stopped here with the commands of docs/how-to/sweeps.md, the scheduler without the checkout) give
the traces of the same sweep run locally; a lost worker and a diverging run. The cluster tests are slow (CI runs
them); the default run checks that every task graph the code sends unpickles without this project (as a scheduler
on another machine unpickles it), the local sweep, the size rule and the error paths."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from dask_cluster import PAGES, Cluster, free_port, unpickle_without_project, wait_for
from simulation.config import RunConfig
from simulation.cache import run_sweep
from simulation.sweep import SweepError, run_to_bytes, scheduler_address, sweep
from simulation.trace import Trace

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for this file, started as docs/how-to/sweeps.md says, its workers warmed up (torch imported).
    The test that kills a worker runs last."""
    c = Cluster(tmp_path_factory.mktemp("cluster"), page=PAGES[1])
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


@pytest.mark.xdist_group("sweep-cluster")
@pytest.mark.slow  # the documented sweep, on the cluster and here (~40 s on 2 busy cores)
def test_the_documented_sweep_command_gives_the_traces_of_a_local_run(cluster, tmp_path):
    """docs/how-to/sweeps.md's `render.py train ... --scheduler` line, run as the page shows it against the cluster
    the page starts (the scheduler without the checkout: the fixture), then without ``--scheduler``: the same runs,
    bit for bit. ``--set steps=40`` keeps the runs short."""
    line = cluster.client_command + " --set steps=40"
    assert "--scheduler tcp://127.0.0.1:" in line
    local_line = re.sub(r" --scheduler \S+", "", line)
    scheduler_python = subprocess.run(["/bin/bash", "-c", "python -c 'import simulation'"],
                                      cwd=cluster.scheduler_folder, env=cluster.scheduler_env, capture_output=True,
                                      text=True)
    assert "No module named 'simulation'" in scheduler_python.stderr  # the scheduler's Python lacks this project
    caches = {}
    for name, command in (("remote", line), ("local", local_line)):
        caches[name] = tmp_path / name
        env = {**os.environ, "RESIDUAL_CACHE": str(caches[name])}
        env.pop("PYTHONPATH", None)
        env.pop("DASK_SCHEDULER_ADDRESS", None)
        done = subprocess.run(["/bin/bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "traces: 8 trained, 0 from the cache" in done.stderr, done.stderr
        assert (f"({cluster.address})" in done.stderr) == (name == "remote"), done.stderr  # where they trained
    remote, local = (sorted(p.name for p in caches[n].glob("*.npz")) for n in ("remote", "local"))
    assert remote == local and len(remote) == 8
    for name in remote:
        _same(Trace.load(caches["remote"] / name), Trace.load(caches["local"] / name))


@pytest.mark.xdist_group("sweep-cluster")  # one worker builds the module fixture, not both
@pytest.mark.slow  # a scheduler and two worker processes (the fixture: ~7 CPU s); CI runs it
def test_killing_a_worker_mid_sweep_still_completes_with_the_same_traces(cluster, tmp_path, monkeypatch):
    """Runs last: it kills one of the module's workers (its nanny starts it again)."""
    configs = [RunConfig(arch="residual", depth=6, width=32, steps=60, seed=seed) for seed in range(6)]
    cache = tmp_path / "remote"
    victim = psutil.Process(cluster.worker_info()[0]["pid"])
    killed = []

    def kill_after_first_result() -> None:
        try:
            wait_for(lambda: any(cache.glob("*.npz")), 60, "the first trace")
        except TimeoutError:
            return
        victim.kill()  # SIGKILL: the worker dies with whatever it is running
        killed.append(victim.wait(timeout=10))

    killer = threading.Thread(target=kill_after_first_result, daemon=True)
    killer.start()
    remote = _sweep_in(cache, monkeypatch, configs, scheduler=cluster.address)
    killer.join(timeout=15)
    assert killed, "the worker was not killed before the sweep ended"
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
        done = subprocess.run([sys.executable, "-m", "cli.sweep", *args], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr)
    assert not list(tmp_path.iterdir())


# -- what the scheduler receives ----------------------------------------------------------------------------------


class _Sent(Exception):
    """Raised in place of sending a task graph to the scheduler: the test keeps the graph and sends nothing."""


@pytest.fixture
def sent_graphs(monkeypatch):
    """(address of a scheduler in this process with no workers, the list of task graphs clients send it): each
    ``update-graph`` message is kept (its ``expr_ser``, the pickled graph as the scheduler receives it) and raises
    :class:`_Sent` instead of reaching the scheduler."""
    from distributed import Client, LocalCluster

    graphs = []
    send = Client._send_to_scheduler

    def keep(self, msg):
        if msg.get("op") == "update-graph":
            graphs.append(msg["expr_ser"])
            raise _Sent
        return send(self, msg)

    monkeypatch.setattr(Client, "_send_to_scheduler", keep)
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=":0") as cluster:
        yield cluster.scheduler_address, graphs


def test_every_task_graph_a_sweep_or_a_render_sends_unpickles_without_this_project(sent_graphs, tmp_path):
    """The scheduler unpickles each graph (distributed >= 2023.4) and may run where nothing of this project is
    installed (docs/how-to/cluster.md): the graphs that a sweep and a cluster render send must name only the standard
    library, Dask and plain data. The twin: a graph that pickles the task function by reference (as the code did
    before, ``client.submit(run_to_bytes, ...)``) fails there with "No module named 'simulation'"."""
    from distributed import Client

    from cli.media import RenderJob
    from cli.pipeline import ClusterPool

    address, graphs = sent_graphs
    configs = [RunConfig(depth=2, width=4, steps=2, seed=s) for s in (0, 1)]
    with pytest.raises(_Sent):
        list(sweep(configs, scheduler=address, progress=False))
    pool = ClusterPool(address)
    job = RenderJob("TinySquare", "cli_scenes", {}, {}, {}, "0" * 16, "l", "en", "mp4", False, str(tmp_path / "out"))
    try:
        with pytest.raises(_Sent):
            pool.render(job)
    finally:
        pool.close()
    with Client(address) as client, pytest.raises(_Sent):
        client.submit(run_to_bytes, configs[0].to_dict(), pure=False)  # the twin: by reference
    assert len(graphs) == 3
    (tmp_path / "elsewhere").mkdir()
    sweep_graph, render_graph, twin = unpickle_without_project(graphs, tmp_path / "elsewhere")
    assert sweep_graph == "ok" and render_graph == "ok"
    assert twin.startswith("ModuleNotFoundError: No module named 'simulation"), twin


CLIENT_CALLS = re.compile(r"client\.(submit|map|compute|persist|run|run_on_scheduler|register_\w+|upload_file|get)\(")


def test_the_code_sends_tasks_only_through_submit_by_name():
    """Every task the project gives a Dask client goes through simulation.sweep.submit_by_name (which the test above
    checks), and no code asks a scheduler to run or register a function of ours."""
    hits = []
    for folder in ("cli", "simulation", "scenes", "narration", "residual_lecture"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            hits += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in CLIENT_CALLS.finditer(path.read_text())]
    hits += [f"render.py: {m.group(0)}" for m in CLIENT_CALLS.finditer((ROOT / "render.py").read_text())]
    assert hits == ["simulation/sweep.py: client.submit("], hits


def test_the_scheduler_is_installed_with_the_dask_version_the_project_pins():
    """docs/how-to/cluster.md's install line for a scheduler without the checkout names pyproject.toml's pin."""
    pin = re.search(r'"(dask\[distributed\]==[^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert f'pip install "{pin}"' in PAGES[0].read_text()


def test_a_sweep_of_trace_files_says_it_read_them(tmp_path, caplog):
    """``render.py render SCENE --trace FILE`` trains nothing: the sweep's log line says the run was read from its
    file (it said "1 runs trained in 0.0 s"); a sweep that trains says so (the line tells the two apart)."""
    import logging

    import torch

    from residual_lecture import watch
    from simulation.config import RecordedConfig
    from simulation.sweep import sweep_note
    from watch_models import Net, batches

    model, path = Net(), tmp_path / "mine.npz"
    with watch(model, path, every=1) as rec:
        x, y = batches(1, 1)[0][0]
        torch.nn.functional.cross_entropy(model(x), y).backward()
        rec.step(torch.optim.SGD(model.parameters(), lr=0.1))
    recorded = RecordedConfig(path=str(path))
    with caplog.at_level(logging.INFO, logger="simulation.sweep"):
        assert len(list(sweep([recorded], here=True))) == 1
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("sweep:"))
    assert line.startswith("sweep: 1 run read from its file in ") and "trained" not in line
    assert sweep_note([RunConfig(), recorded, recorded]) == "1 run trained, 2 runs read from their files"
    assert sweep_note([RunConfig()] * 2) == "2 runs trained"
