"""A repeated frame converted to the video's pixel format once, not once per copy.

Manim 0.22 writes a frame that stays on screen (a ``wait``, a frozen frame between animations) as one
``write_frame(pixels, repeat=n)``; :class:`manim.scene.video_segment_encoder.VideoSegmentEncoder` then builds a
new RGBA ``av.VideoFrame`` and lets PyAV convert it to the codec's format (yuv420p) for every one of the ``n``
copies. At 1080p that conversion is most of the cost of a held frame, and the lecture holds frames for as
long as a line of narration takes (docs/developers/speed.md).

:func:`install` replaces ``write_frame`` with one that converts the frame once, exactly as PyAV's encoder
would (same reformatter defaults: size, format, the codec's thread count), and sends that frame ``n`` times
with consecutive timestamps: the encoder gets the same pixels and writes the same packets
(tests/test_encoder.py compares the files byte for byte). A single frame (``repeat == 1``) goes through
Manim's own method. ``install`` refuses a Manim whose encoder it was not written for: it checks the
method it replaces is the one of Manim 0.22 (by its code), and leaves the encoder alone otherwise.
"""

from __future__ import annotations

import ctypes
import hashlib
from fractions import Fraction

import av

from manim.scene import video_segment_encoder as _segment

__all__ = ["install", "installed", "write_frame", "finish", "video_options", "queue_size", "function_fingerprint", "LOOKAHEAD",
           "QUEUE"]

_ORIGINAL = _segment.VideoSegmentEncoder.write_frame
_FINISH = _segment.VideoSegmentEncoder.finish
# co_code of Manim 0.22.0's VideoSegmentEncoder.write_frame (what this module was checked against).
_KNOWN = {"f8be085ba027c0e7"}


LOOKAHEAD = 3  # libx264 rc-lookahead (frames) at -q m, h and k; Manim's default (preset medium) is 40
REDUCED = ("m", "h", "k")  # the lean encoder (and, in cli/media.py, one x264 thread); -q l keeps Manim's


def video_options(quality: str, threads: int | None = None) -> dict[str, str]:
    """Manim ``video_encoder_options`` for a render at ``quality`` (l | m | h | k), libx264 (mp4).

    ``threads``: libx264 encoder threads (None: x264 chooses, 1.5 per core). Manim's ``crf`` 23 stays.
    A shorter look-ahead changes the encoded bytes, not the frames drawn (the mp4 stays H.264 yuv420p):
    x264's macroblock-tree rate control sees LOOKAHEAD (3) frames ahead instead of 40 (docs/developers/speed.md gives the
    file sizes and CPU). The options are libx264's: cli/media.py passes them for mp4 segments only."""
    if quality not in ("l", "m", "h", "k"):
        raise ValueError(f"quality must be one of l, m, h, k; got {quality!r}")
    options = {"rc-lookahead": str(LOOKAHEAD)} if quality in REDUCED else {}
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive int; got {threads!r}")
        options["threads"] = str(threads)
    return options


QUEUE = 2  # frames waiting for the encoder at -q m, h and k; Manim's default encoder_queue_size is 8


def queue_size(quality: str) -> int | None:
    """Manim ``encoder_queue_size`` for a render at ``quality``: :data:`QUEUE` from 720p up (a 1080p RGBA frame
    is 7.9 MiB, and with one x264 thread the queue fills: 8 frames held 63 MiB), None (Manim's 8) at -q l.
    The queue only bounds how far drawing runs ahead of encoding: the frames and bytes are the same."""
    if quality not in ("l", "m", "h", "k"):
        raise ValueError(f"quality must be one of l, m, h, k; got {quality!r}")
    return QUEUE if quality in REDUCED else None


def function_fingerprint(func) -> str:
    """16 hex chars of SHA-256 over a function's bytecode and names: which version of a library function a patch of
    ours was checked against (this module's, scenes/kit/segment_key.py's)."""
    code = func.__code__
    return hashlib.sha256(code.co_code + repr(code.co_names).encode()).hexdigest()[:16]


def write_frame(self, pixels, *, repeat: int = 1) -> None:
    """``VideoSegmentEncoder.write_frame`` that converts a repeated frame once.

    ``pixels``: (height, width, 4) uint8 RGBA, C-contiguous; ``repeat``: copies, a positive int. Raises
    what Manim's method raises (ValueError/TypeError on a bad frame, RuntimeError on an encoder error)."""
    if repeat == 1:
        return _ORIGINAL(self, pixels, repeat=repeat)
    self._validate_frame(pixels, repeat)
    time_base = Fraction(self.spec.frame_rate.denominator, self.spec.frame_rate.numerator)
    try:
        context = self._stream.codec_context
        frame = av.VideoFrame.from_ndarray(pixels, format="rgba")
        if frame.format.name != context.pix_fmt or frame.width != context.width or frame.height != context.height:
            frame = frame.reformat(width=context.width, height=context.height, format=context.pix_fmt,
                                   threads=context.thread_count)
        frame.time_base = time_base
        for _ in range(repeat):
            frame.pts = self._next_pts
            self._next_pts += 1
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
    except BaseException as error:
        raise self._operation_error("encode", error) from error


def _libc():
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _libc()


def finish(self) -> None:
    """``VideoSegmentEncoder.finish``, then glibc's ``malloc_trim(0)``: libx264 frees its frame buffers
    when a segment closes, but glibc keeps freed heap pages resident (its mmap threshold rises after the
    first large free, so later buffers come from the heap); trimming returns them before the next segment
    allocates its own (measured: a 1080p render's peak falls by ~20 MiB, docs/developers/speed.md)."""
    try:
        _FINISH(self)
    finally:
        if _LIBC is not None:
            _LIBC.malloc_trim(0)


def installed() -> bool:
    """Whether Manim's segment encoder uses :func:`write_frame` and :func:`finish` now."""
    return (_segment.VideoSegmentEncoder.write_frame is write_frame
            and _segment.VideoSegmentEncoder.finish is finish)


def install() -> bool:
    """Use :func:`write_frame` for every video segment from now on (idempotent). Returns whether it is in
    use: False where this Manim's ``write_frame`` is not the one this module was checked against."""
    if installed():
        return True
    if function_fingerprint(_ORIGINAL) not in _KNOWN:
        return False
    _segment.VideoSegmentEncoder.write_frame = write_frame
    _segment.VideoSegmentEncoder.finish = finish
    return True
