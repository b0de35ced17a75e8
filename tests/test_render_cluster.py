"""Renders on a real Dask cluster (a `dask scheduler` and two `dask worker` processes on 127.0.0.1, started
here with the commands of docs/how-to/cluster.md, the scheduler in an empty folder without the checkout): the page's
`render.py all --scheduler` line gives clips that decode to the same frames as a local render, places every
file where a local render does (so the next run renders nothing), and a worker killed mid-render does not lose
its scene.

Marked slow: about a minute on 2 free cores (every task starts a `render.py _worker` process that imports
Manim). Frames are compared exactly: both renders run the same code on the same machine with the same
traces (the cluster's are trained there, bit-identical to local ones, see test_sweep.py) and the same
libx264 settings, so nothing is allowed to differ; a tolerance would only hide a scene drawing other numbers.
"""

from __future__ import annotations

import json
import shlex
import threading
from pathlib import Path

import av
import numpy as np
import psutil
import pytest

import cli_scenes
import scenes
from dask_cluster import PAGES, Cluster, wait_for
from support import ROOT, CLI_TINY, invoke

pytestmark = pytest.mark.slow

SCENES = ["cli_scenes:TinySquare", "cli_scenes:TinyTrace"]  # one without traces, one that reads two runs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two workers started as docs/how-to/cluster.md says; the test that kills one runs last."""
    c = Cluster(tmp_path_factory.mktemp("render-cluster"), page=PAGES[0])
    try:
        yield c
    finally:
        c.stop()


def _frames(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def _names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def _documented_all(cluster) -> list[str]:
    """docs/how-to/cluster.md's `render.py all` line as render.py's arguments, at -q l (the page shows -q k)."""
    words = shlex.split(cluster.client_command)
    args = words[words.index("render.py") + 1:]
    assert args[0] == "all" and "--scheduler" in args, args
    return [("l" if previous == "-q" else word) for previous, word in zip([None, *args], args)]


def test_the_documented_render_gives_the_clips_of_a_local_one_where_a_local_one_puts_them(cluster, tmp_path,
                                                                                          monkeypatch):
    """The page's `render.py all --scheduler` line, with a lecture cut to two scenes so that it stays quick (a tiny
    one without traces, and SigmoidDerivative, which reads the chain_rule runs, at CLI_TINY's settings): the same
    files as `render.py all` here."""
    monkeypatch.setattr(scenes, "SCENES_IN_ORDER", [cli_scenes.TinySquare, scenes.SigmoidDerivative])
    args = _documented_all(cluster)
    local_args = [a for a in args if a != "--scheduler" and a != cluster.address]
    env = {"PYTHONPATH": str(ROOT / "tests")}
    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path / "local-cache"))
    local = invoke(*local_args, *CLI_TINY, "--jobs", "1", "-o", tmp_path / "local", env=env)
    assert local.exit_code == 0, local.output
    # A cache of its own: the cluster trains the two runs too, then renders with their bytes.
    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path / "remote-cache"))
    remote = invoke(*args, *CLI_TINY, "-o", tmp_path / "remote", env=env)
    assert remote.exit_code == 0, remote.output
    here, there = tmp_path / "local" / "480p15" / "en", tmp_path / "remote" / "480p15" / "en"
    assert _names(here) == _names(there)  # clip, subtitles, numbers, beats, beat videos, record; no temporary file
    for name in ("TinySquare", "SigmoidDerivative"):
        a, b = _frames(here / f"{name}.mp4"), _frames(there / f"{name}.mp4")
        assert a.shape == b.shape and len(a) > 3
        assert np.array_equal(a, b), f"{name}: frames differ"
        for suffix in (".srt", ".numbers.json", ".beats.json"):
            assert (here / f"{name}{suffix}").read_bytes() == (there / f"{name}{suffix}").read_bytes()
        record = json.loads((there / f"{name}.mp4.render.json").read_text())
        assert record["key"] == json.loads((here / f"{name}.mp4.render.json").read_text())["key"]
    assert json.loads((there / "SigmoidDerivative.numbers.json").read_text())["values"]  # it showed real numbers
    again = invoke(*args, *CLI_TINY, "-o", tmp_path / "remote", env=env)
    assert again.exit_code == 0 and "wrote: nothing" in again.stdout  # placed files count as rendered


def test_a_worker_killed_mid_render_does_not_lose_the_scene(cluster, tmp_path):
    """Runs last: it kills one of the module's workers (its nanny starts it again)."""
    env = {"PYTHONPATH": str(ROOT / "tests")}
    victims = []
    workers = cluster.worker_info()

    def render_in_progress():
        """The worker whose private render folder holds a segment Manim is writing, if any."""
        for worker in workers:
            scratch = Path(worker["local_directory"])
            if any(scratch.rglob("residual-render-*/out/*/*/.render-*/partial_movie_dir/*")):
                return psutil.Process(worker["pid"])
        return None

    def kill_mid_render() -> None:
        try:
            wait_for(lambda: render_in_progress() is not None, 120, "a render on a worker")
        except TimeoutError:
            return
        victim = render_in_progress()
        if victim is not None:
            victim.kill()  # SIGKILL: the worker dies with its task
            victim.wait(timeout=10)
            victims.append(victim)

    killer = threading.Thread(target=kill_mid_render, daemon=True)
    killer.start()
    result = invoke("render", "cli_scenes:TinyCircle", "--set", "TinyCircle.seconds=6", "--scheduler", cluster.address,
                    "-o", tmp_path / "out", env=env)
    killer.join(timeout=15)
    assert victims and not victims[0].is_running(), "no worker was killed during the render"
    assert result.exit_code == 0, result.output
    folder = tmp_path / "out" / "480p15" / "en"
    frames = _frames(folder / "TinyCircle.mp4")
    assert len(frames) >= 6 * 15  # the whole animation, at 15 frames per second
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]
