"""How many scenes render at once (cli/jobs.py) and the pipeline that renders each scene as soon as its traces
are cached (cli/pipeline.py), with a fake pool and trainer: no Manim, no torch, no timing."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from hypothesis import given, settings, strategies as st

from cli import jobs as cli_jobs
from cli.jobs import MAIN_MIB, MiB, WORKER_MIB, check_jobs, default_jobs, render_slots
from cli.media import RenderError, RenderJob
from cli.pipeline import run_pipeline
from simulation.config import ConfigError
from support import ROOT, cli_env, wait_for, files_under, invoke

GiB = 2**30


@settings(max_examples=200, deadline=None)
@given(quality=st.sampled_from("lmhk"), n_cores=st.integers(1, 256), budget=st.integers(0, 64 * GiB))
def test_the_default_is_the_cores_or_as_many_workers_as_fit(quality, n_cores, budget):
    n = default_jobs(quality, n_cores=n_cores, budget=budget)
    tree = lambda jobs: (MAIN_MIB + jobs * WORKER_MIB[quality]) * MiB  # the command and its workers
    assert 1 <= n <= n_cores
    assert n == 1 or tree(n) <= budget  # fits (one job always runs: it is what a serial render needs)
    assert n == n_cores or tree(n + 1) > budget  # and one more would not, unless the cores are all used


def test_on_two_cores_and_a_gibibyte_the_default_is_two_at_preview_and_one_at_1080p():
    assert default_jobs("l", n_cores=2, budget=GiB) == 2
    assert default_jobs("h", n_cores=2, budget=GiB) == 2  # 140 + 2 x 436 MiB = 1012 MiB fit
    assert default_jobs("h", n_cores=3, budget=GiB) == 2  # 140 + 3 x 436 MiB do not
    assert default_jobs("l", n_cores=16, budget=GiB) == 3  # memory, not the cores, caps it: 140 + 3 x 294
    assert default_jobs("h", n_cores=2, budget=1042 * MiB) == 2
    assert cli_jobs.tree_budget() <= cli_jobs.TREE_BUDGET


def test_the_measured_figures_are_the_ones_the_docstring_gives():
    assert (WORKER_MIB["l"], WORKER_MIB["h"]) == (294, 436)
    doc = " ".join(cli_jobs.__doc__.split())
    assert "294 MiB at ``-q l``" in doc and "436 MiB at ``-q h``" in doc


def test_fewer_renders_start_while_a_trainer_runs():
    trainer = 450 * MiB
    assert render_slots(2, "l", 0, explicit=False, budget=GiB) == 2
    assert render_slots(2, "l", trainer, explicit=False, budget=GiB) == 1  # 140 + 450 + 294 MiB fit, + 294 not
    assert render_slots(2, "h", 433 * MiB, explicit=False, budget=GiB) == 1  # 140 + 433 + 436 MiB fit
    assert render_slots(2, "h", trainer, explicit=False, budget=GiB) == 0  # 140 + 450 + 436 > 1024: it waits


def test_an_explicit_jobs_that_cannot_fit_is_refused(monkeypatch):
    monkeypatch.setenv("RESIDUAL_MEMORY_BUDGET", "2G")
    check_jobs(4, "h")  # 140 + 4 x 436 MiB fit in 2 GiB
    with pytest.raises(ConfigError, match=r"--jobs 5 at quality h would need about 2\.3 GiB .* use --jobs 4"):
        check_jobs(5, "h")


def test_the_command_line_refuses_it_before_any_work_and_says_the_default(tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv("RESIDUAL_MEMORY_BUDGET", "1G")
    env = {"PYTHONPATH": str(ROOT / "tests")}
    result = invoke("render", "cli_scenes:TinySquare", "cli_scenes:TinyTrace", "--jobs", "4", "-q", "h",
                    "-o", out, env=env)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]  # one line
    assert "--jobs 4 at quality h would need about" in result.stderr and files_under(out) == []
    monkeypatch.delenv("RESIDUAL_MEMORY_BUDGET")
    check = invoke("render", "cli_scenes:TinySquare", "cli_scenes:TinyTrace", "--check", "-o", out, env=env)
    assert check.exit_code == 0, check.output
    assert f"2 of 2 scenes would be rendered ({min(2, default_jobs('l'))} at once)" in check.stdout
    assert files_under(out) == []
    assert "capped so the command and its workers stay within 1 GiB" in " ".join(invoke("all", "--help").stdout.split())


# -- the pipeline, with a fake pool and a fake trainer ------------------------------------------

def _job(scene: str, *digests: str) -> RenderJob:
    return RenderJob(scene=scene, module="m", params={}, attrs={}, traces={f"run{i}": d for i, d in enumerate(digests)},
                     source="s", quality="l", lang="en", format="mp4", transparent=False, output="/nowhere")


class FakePool:
    slots = 2

    def __init__(self) -> None:
        self.started: list[str] = []
        self.running = self.most_during_training = 0
        self.training = True
        self.lock = threading.Lock()
        self.first_started = threading.Event()

    def limit(self, slots):
        self.limit_to = slots

    def unlimit(self):
        self.training = False

    def render(self, job):
        with self.lock:
            self.started.append(job.scene)
            self.running += 1
            if self.training:
                self.most_during_training = max(self.most_during_training, self.running)
        self.first_started.set()
        with self.lock:
            self.running -= 1
        if job.scene == "Broken":
            raise RenderError("Broken: a scene's own error")
        return [Path(f"/out/{job.scene}.mp4")]

    def stop(self, sig):
        self.stopped = sig

    def close(self):
        pass


class FakeTrainer:
    """Trains a, then waits until the pool has started a scene, then b (whose run fails) and c."""

    def __init__(self, pool):
        self.pool = pool

    def run(self, done):
        done("a", None)
        assert self.pool.first_started.wait(60), "no scene started while the training went on"
        self.seen_before_b = list(self.pool.started)
        done("b", "RuntimeError: diverged in a way nobody expected")
        done("c", None)

    def stop(self, sig):
        pass


def test_a_scene_starts_as_soon_as_its_traces_exist_and_a_failed_run_fails_only_its_scenes(monkeypatch, tmp_path):
    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path))
    pool = FakePool()
    trainer = FakeTrainer(pool)
    todo = [_job("NoTraces"), _job("First", "a"), _job("Second", "a", "b"), _job("Broken", "c"), _job("Third", "c")]
    notes = []
    written, failures = run_pipeline(todo, pool, trainer, 1, notes.append, lambda: 2)
    assert set(trainer.seen_before_b) <= {"NoTraces", "First"} and trainer.seen_before_b  # before the training ended
    assert pool.limit_to == 1
    assert written == [Path("/out/NoTraces.mp4"), Path("/out/First.mp4"), Path("/out/Third.mp4")]  # lecture order
    assert sorted(failures) == ["Broken: a scene's own error",
                                "Second: training run b failed: RuntimeError: diverged in a way nobody expected"]
    assert "Second" not in pool.started


@pytest.mark.slow  # two render workers and a trainer started by render.py; the default run stops a one-scene
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])  # render (test_cli.py)
def test_stopping_parallel_renders_stops_every_worker_and_leaves_no_final_file(tmp_path, isolated_cache, sig):
    out = tmp_path / "out"
    folder = out / "480p15" / "en"
    proc = subprocess.Popen([sys.executable, "render.py", "render", "cli_scenes:TinySlow", "cli_scenes:TinyTrace",
                             "--set", "steps=20", "--set", "depth=3", "--jobs", "2", "-o", str(out)],
                            cwd=ROOT, env=cli_env(isolated_cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # see test_cli
    wait_for(lambda: any(folder.glob(".render-*/partial_movie_dir/*.mp4")))  # a worker is writing TinySlow
    children = psutil.Process(proc.pid).children(recursive=True)
    assert children  # the render workers
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig]
    gone, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, [p.cmdline() for p in alive]
    assert not list(folder.glob("TinySlow*")) and not list(folder.glob(".render-*"))
    assert not [p for p in isolated_cache.rglob(".*") if p.is_file()]  # no half-written trace or cache entry


@pytest.mark.parametrize("slots", [1, 2])
def test_a_pooled_render_gets_no_environment_of_its_own(monkeypatch, slots):
    """A pool passes nothing that would make its renders differ from a lone render (Manim's segment cache is
    keyed on the encoder options, which cli/media.py sets the same for every render)."""
    from cli import pipeline

    seen = []
    monkeypatch.setattr(pipeline, "run_worker", lambda job, env=None, **kw: seen.append(env) or [])
    pipeline.LocalPool(slots).render(_job("A", "d1"))
    assert seen == [None]
