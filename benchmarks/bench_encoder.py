"""CPU time of held 1080p60 frames through Manim 0.22's segment encoder vs scenes/kit/encoder.py's write_frame.

Example::

    python -m benchmarks.bench_encoder            # 6 interleaved pairs of 4 held frames x 60 copies

Each pair encodes the same frames with Manim's method, then with ours (the order rotates), into one mp4
segment; CPU time (process, so x264's threads count) is compared as a ratio per pair, median and range printed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np


from manim._config.video_encoder import VideoEncoderSpec
from manim.scene import video_segment_encoder as segment

from scenes.kit import encoder

SPEC = VideoEncoderSpec("mp4", "libx264", "yuv420p", 1920, 1080, Fraction(60), (("crf", "23"),))


def held_frames(path: Path, write, holds: int = 4, copies: int = 60) -> float:
    """CPU seconds to encode ``holds`` different frames, each held for ``copies`` frames."""
    pixels = np.zeros((1080, 1920, 4), np.uint8)
    pixels[..., 3] = 255
    pixels[200:800, 300:900, :3] = 200
    enc = segment.VideoSegmentEncoder(target=path, spec=SPEC)
    started = time.process_time()
    for k in range(holds):
        frame = pixels.copy()
        frame[k, k, 0] = 255
        write(enc, frame, repeat=copies)
    enc.finish()
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    args = parser.parse_args()
    from benchmarks.yardstick import in_yardsticks, measure

    yard = measure()  # the machine index, in the same run as the figures below
    print(yard, flush=True)
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.pairs):
            order = [("manim", encoder._ORIGINAL), ("ours", encoder.write_frame)]
            times = {}
            for name, write in order if index % 2 == 0 else order[::-1]:
                times[name] = held_frames(Path(tmp) / f"{name}.mp4", write)
            ratios.append(times["ours"] / times["manim"])
            print(f"manim {in_yardsticks(times['manim'], yard)} CPU, ours {in_yardsticks(times['ours'], yard)} CPU")
    print(f"ours / manim: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f}, "
          f"n={len(ratios)})")


if __name__ == "__main__":
    main()
