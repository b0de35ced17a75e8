"""Renders on a real Dask cluster (a `dask scheduler` and two `dask worker` processes on 127.0.0.1, started
here): `render.py render --scheduler` gives clips that decode to the same frames as local renders, places
every file where a local render does (so the next run renders nothing), and a worker killed mid-render does
not lose its scene.

Marked slow: about a minute on 2 free cores (every task starts a `render.py _worker` process that imports
Manim). Frames are compared exactly: both renders run the same code on the same machine with the same
traces (the cluster's are trained there, bit-identical to local ones, see test_sweep.py) and the same
libx264 settings, so nothing is allowed to differ; a tolerance would only hide a scene drawing other numbers.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import av
import numpy as np
import pytest

from dask_cluster import Cluster, wait_for
from support import ROOT, CLI_TINY, invoke

pytestmark = pytest.mark.slow

SCENES = ["cli_scenes:TinySquare", "cli_scenes:TinyTrace"]  # one without traces, one that reads two runs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two workers that can import tests/cli_scenes.py; the test that kills one runs last."""
    c = Cluster(tmp_path_factory.mktemp("render-cluster"))
    try:
        yield c
    finally:
        c.stop()


def _frames(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def _names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_cluster_renders_match_local_ones_and_land_where_local_ones_do(cluster, tmp_path, monkeypatch):
    env = {"PYTHONPATH": str(ROOT / "tests")}
    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path / "local-cache"))
    local = invoke("render", *SCENES, *CLI_TINY, "--jobs", "1", "-o", tmp_path / "local", env=env)
    assert local.exit_code == 0, local.output
    # A cache of its own: the cluster trains the two runs too, then renders with their bytes.
    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path / "remote-cache"))
    remote = invoke("render", *SCENES, *CLI_TINY, "--scheduler", cluster.address, "-o", tmp_path / "remote", env=env)
    assert remote.exit_code == 0, remote.output
    here, there = tmp_path / "local" / "480p15" / "en", tmp_path / "remote" / "480p15" / "en"
    assert _names(here) == _names(there)  # clip, subtitles, numbers, beats, beat videos, record; no temporary file
    for name in ("TinySquare", "TinyTrace"):
        a, b = _frames(here / f"{name}.mp4"), _frames(there / f"{name}.mp4")
        assert a.shape == b.shape and len(a) > 3
        assert np.array_equal(a, b), f"{name}: frames differ"
        for suffix in (".srt", ".numbers.json", ".beats.json"):
            assert (here / f"{name}{suffix}").read_bytes() == (there / f"{name}{suffix}").read_bytes()
        record = json.loads((there / f"{name}.mp4.render.json").read_text())
        assert record["key"] == json.loads((here / f"{name}.mp4.render.json").read_text())["key"]
    assert json.loads((there / "TinyTrace.numbers.json").read_text())["values"]  # it showed a real number
    again = invoke("render", *SCENES, *CLI_TINY, "--scheduler", cluster.address, "-o", tmp_path / "remote", env=env)
    assert again.exit_code == 0 and "wrote: nothing" in again.stdout  # placed files count as rendered


def test_a_worker_killed_mid_render_does_not_lose_the_scene(cluster, tmp_path):
    """Runs last: it leaves the module's cluster with one worker."""
    env = {"PYTHONPATH": str(ROOT / "tests")}
    victims = []

    def render_in_progress():
        """The worker whose private render folder holds a segment Manim is writing, if any."""
        for index, proc in enumerate(cluster.workers):
            scratch = cluster.local_dirs[index]
            if proc.poll() is None and any(scratch.rglob("residual-render-*/out/*/*/.render-*/partial_movie_dir/*")):
                return proc
        return None

    def kill_mid_render() -> None:
        try:
            wait_for(lambda: render_in_progress() is not None, 120, "a render on a worker")
        except TimeoutError:
            return
        victim = render_in_progress()
        if victim is not None:
            victim.kill()  # SIGKILL: the worker dies with its task
            victims.append(victim)

    killer = threading.Thread(target=kill_mid_render, daemon=True)
    killer.start()
    result = invoke("render", "cli_scenes:TinyCircle", "--set", "TinyCircle.seconds=6", "--scheduler", cluster.address,
                    "-o", tmp_path / "out", env=env)
    killer.join(timeout=5)
    assert victims and victims[0].poll() is not None, "no worker was killed during the render"
    assert result.exit_code == 0, result.output
    folder = tmp_path / "out" / "480p15" / "en"
    frames = _frames(folder / "TinyCircle.mp4")
    assert len(frames) >= 6 * 15  # the whole animation, at 15 frames per second
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]
