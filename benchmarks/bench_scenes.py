"""Per-frame render cost of every lecture scene next to a bare Manim scene of similar size.

Example::

    .venv/bin/python -m benchmarks.bench_scenes            # all scenes, 480p15
    .venv/bin/python -m benchmarks.bench_scenes ChainRuleProduct --quality m

For each scene: render it to a temporary folder (traces come from the cache; missing ones are trained
first and not timed), count frames and the mobjects on screen at the end, then render a bare scene with
the same number of plain VMobjects moving for the same number of frames. Prints frames per second of
both and the ratio of per-frame cost (target: at most 1.2), as the median of interleaved rounds with its
interquartile range (benchmarks.measure).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time


from manim import Scene, Square, VGroup, linear, tempconfig

from benchmarks.measure import Target, compare, format_table
from cli.params import QUALITIES
from scenes import SCENES_IN_ORDER, get_scene
from simulation.cache import get_traces
from cli.params import build_runs  # parses string values as --set does

import logging

logging.getLogger("simulation").setLevel(logging.WARNING)

TARGET = Target("<=", 1.2)


def bare_scene(n_objects: int, n_frames: int, fps: float) -> type[Scene]:
    """A Scene with ``n_objects`` small squares moving for ``n_frames`` frames."""

    class Bare(Scene):
        def construct(self) -> None:
            squares = VGroup(*[Square(0.1).move_to([(i % 40) * 0.3 - 6, (i // 40) * 0.3 - 3.5, 0])
                               for i in range(n_objects)])
            self.add(squares)
            self.play(squares.animate.shift([0.5, 0.2, 0]), run_time=n_frames / fps, rate_func=linear)

    return Bare


def timed_render(scene_cls: type[Scene], quality: str, media: str) -> tuple[float, Scene]:
    with tempconfig({"quality": QUALITIES[quality], "media_dir": media, "verbosity": "ERROR",
                     "progress_bar": "none", "disable_caching": True}):
        scene = scene_cls()
        start = time.perf_counter()
        scene.render()
        return time.perf_counter() - start, scene


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenes", nargs="*", help="scene names (default: the whole lecture)")
    parser.add_argument("--quality", choices=list(QUALITIES), default="l")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds at least")
    parser.add_argument("--max-rounds", type=int, default=7, help="interleaved rounds at most")
    args = parser.parse_args()
    from benchmarks.yardstick import measure

    yard = measure()  # the machine index, in the same run as the figures below
    print(yard, flush=True)
    scenes = [get_scene(name) for name in args.scenes] or list(SCENES_IN_ORDER)
    for scene in scenes:  # train first, outside the timing
        if scene.experiment:
            get_traces(list(build_runs(scene.experiment, dict(scene.params)).values()))

    rows = []
    for scene_cls in scenes:
        with tempfile.TemporaryDirectory() as media:
            # A first render (discarded: the warm-up) counts the frames and the objects on screen.
            _, scene = timed_render(scene_cls, args.quality, media)
            frames = scene.renderer.num_plays and round(scene.renderer.time * scene.camera.frame_rate)
            objects = len([m for m in scene.mobjects for _ in m.family_members_with_points()])
            bare = bare_scene(max(objects, 1), frames, scene.camera.frame_rate)
            # Same frame count on both sides: the ratio of render times is the ratio of per-frame cost.
            figs = compare({"bare": lambda: timed_render(bare, args.quality, media)[0],
                            "scene": lambda: timed_render(scene_cls, args.quality, media)[0]},
                           baseline="bare", targets={"scene": TARGET}, min_rounds=args.rounds,
                           max_rounds=args.max_rounds, warmup=0)
        rows.append((f"{scene_cls.__name__} ({frames} frames, {objects} objects) / bare", figs["scene"]))
        print(f"{scene_cls.__name__}: {frames / figs['bare'].median:.1f} bare fps", file=sys.stderr)
    print(format_table(rows, yard))

if __name__ == "__main__":
    main()
