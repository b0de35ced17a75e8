"""Profile one scene's frame loop: wall seconds per video second and the functions that cost most.

Example::

    nice -n 10 .venv/bin/python -m benchmarks.bench_frames GradientFlowOverTraining --quality h
    .venv/bin/python -m benchmarks.bench_frames DepthSweep --quality h --upto 12 --top 15

Renders the scene in this process (traces from the cache; missing ones are trained first, not timed) to a
temporary folder with Manim's cache off, under cProfile, and prints: frames written, video seconds, wall
seconds, their ratio (the issue 11 target for the whole lecture at 1080p60 is <= 1.5 on 2 cores), and the
top functions by own time and by cumulative time. ``--upto N`` renders only the first N ``play``/``wait``
calls (Manim's ``-n 0,N``; the rest are skipped, not drawn) and ``--from M`` skips those before M, to profile
one part of a long scene in less time.
CPU seconds (this process and its threads: Manim's frame loop plus the video encoder) are printed beside the
wall seconds: on a shared, loaded machine they say more than the wall time. ``--no-profile`` times without
cProfile (its overhead inflates per-call Python costs ~1.3-2x).
Speed lives here, never in a test.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import logging
import os
import pstats
import tempfile
import time
from pathlib import Path


from manim import tempconfig
from manim.utils.exceptions import EndSceneEarlyException

from cli.params import QUALITIES
from scenes import get_scene
from simulation.cache import get_traces
from simulation.experiments import scene_runs

logging.getLogger("simulation").setLevel(logging.WARNING)

KEEP = Path(__file__).resolve().parent.parent / ".cache" / "bench_frames"


def render_counted(scene_cls, quality: str, media: str, upto: int | None, profile: cProfile.Profile | None,
                   start_at: int | None = None):
    """Render ``scene_cls``; returns (wall s, CPU s of this process and its threads, frames written, fps)."""
    settings = {"quality": QUALITIES[quality], "media_dir": media, "verbosity": "ERROR", "progress_bar": "none",
                "disable_caching": True,
                # LaTeX and Pango output kept between runs (as in a real media folder): not timed twice
                "tex_dir": str(KEEP / "Tex"), "text_dir": str(KEEP / "texts")}
    if upto is not None:
        settings["upto_animation_number"] = upto
    if start_at is not None:
        settings["from_animation_number"] = start_at
    with tempconfig(settings):
        from manim import config

        scene = scene_cls()
        writer = scene.renderer.file_writer if hasattr(scene.renderer, "file_writer") else None
        frames = [0]
        if writer is not None:
            original = writer.write_frame

            def counting(pixels, *args, repeat: int = 1, **kwargs):
                frames[0] += repeat
                return original(pixels, *args, repeat=repeat, **kwargs)

            writer.write_frame = counting
        start, cpu = time.perf_counter(), time.process_time()
        if profile is not None:
            profile.enable()
        try:
            scene.render()
        except EndSceneEarlyException:  # --upto: LectureScene.tear_down's last wait lies past the limit
            pass
        finally:
            if profile is not None:
                profile.disable()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return wall, cpu, frames[0], float(config.frame_rate)


def top_costs(profile: cProfile.Profile, key: str, n: int) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats(key).print_stats(n)
    lines = out.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return "\n".join(lines[start:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scene", help="scene name (render.py list)")
    parser.add_argument("--quality", choices=list(QUALITIES), default="h")
    parser.add_argument("--upto", type=int, default=None, help="render only the first N play/wait calls")
    parser.add_argument("--from", dest="start_at", type=int, default=None,
                        help="skip (do not draw) the play/wait calls before number N")
    parser.add_argument("--top", type=int, default=12, help="functions listed per table")
    parser.add_argument("--no-profile", action="store_true", help="time only (no cProfile overhead)")
    parser.add_argument("--lang", choices=("en", "zh"), default=None)
    args = parser.parse_args()
    from benchmarks.yardstick import in_yardsticks, measure

    yard = measure()  # the machine index, in the same run as the figures below
    print(yard, flush=True)
    scene_cls = get_scene(args.scene)
    if args.lang:
        scene_cls = type(scene_cls.__name__, (scene_cls,), {"lang": args.lang})
    if scene_cls.experiment:  # train first, outside the timing
        get_traces(list(scene_runs(scene_cls.experiment, scene_cls.experiment_defaults, scene_cls.params)[1].values()))
    profile = None if args.no_profile else cProfile.Profile()
    with tempfile.TemporaryDirectory() as media:
        wall, cpu, frames, fps = render_counted(scene_cls, args.quality, media, args.upto, profile,
                                                args.start_at)
    video = frames / fps
    ratio = (lambda s: s / video if video else float("nan"))
    print(f"{'scene':<26}{'quality':>8}{'frames':>8}{'video s':>9}{'wall s':>9}{'wall/video':>12}{'cpu s':>8}"
          f"{'cpu/video':>11}{'load':>6}{'wall yd':>9}{'cpu yd':>8}")
    print(f"{args.scene:<26}{args.quality:>8}{frames:>8}{video:>9.1f}{wall:>9.1f}{ratio(wall):>12.2f}{cpu:>8.1f}"
          f"{ratio(cpu):>11.2f}{os.getloadavg()[0]:>6.1f}{yard.of(wall):>9.1f}{yard.of(cpu):>8.1f}")
    if profile is not None:
        print(f"\ntop {args.top} by own time (tottime)\n" + top_costs(profile, "tottime", args.top))
        print(f"\ntop {args.top} by cumulative time\n" + top_costs(profile, "cumulative", args.top))


if __name__ == "__main__":
    main()
