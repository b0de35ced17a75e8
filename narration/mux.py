"""Muxing with PyAV: the finished video's stream copied, the narration encoded beside it (AAC or Opus).

Example::

    python -c "from narration.mux import video_duration; print(video_duration('media/480p15/en/IdentityHighway.mp4'))"

Manim's own ``add_sound`` is not used: it drops sounds added after a cached animation (manim issues #4005,
#4751).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from narration.audio import SAMPLE_RATE, VoiceError, read_audio, resample

__all__ = ["video_duration", "mux_audio", "write_muxed", "container_format"]


def video_duration(path: str | Path) -> float:
    """Seconds of the first video stream (frames / rate when the stream says its frame count)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        if stream.frames and stream.average_rate:
            return float(stream.frames / stream.average_rate)
        if stream.duration is not None:
            return float(stream.duration * stream.time_base)
        return float(container.duration / av.time_base)


def mux_audio(video: Path, track: np.ndarray, target: Path, rate: int = SAMPLE_RATE) -> None:
    """Write ``target``: ``video``'s video stream copied, plus ``track`` (mono float32 at ``rate``) encoded
    as AAC (mp4, mov) or Opus (webm) at 48 kHz, cut or padded to the video's length.

    The written file is decoded again: if the encoder pushed a peak to -0.3 dBFS or above (ffmpeg's AAC
    encoder overshoots on sharp onsets at 128 kbit/s), it is written again at a higher bit rate, then
    0.5 dB quieter, so the published sound never clips."""
    duration = video_duration(video)
    out_rate = 48000
    audio = resample(track, rate, out_rate)
    want = int(round(duration * out_rate))
    audio = np.pad(audio, (0, max(0, want - len(audio))))[:want].astype(np.float32)
    for bit_rate, gain_db in ((192000, 0.0), (256000, 0.0), (256000, -0.5), (256000, -1.0)):
        write_muxed(video, audio * np.float32(10 ** (gain_db / 20)), target, out_rate, bit_rate)
        decoded, _ = read_audio(target)
        if decoded.size == 0 or np.abs(decoded).max() < 10 ** (-0.3 / 20):
            return
    raise VoiceError(f"{target}: the audio encoder clips even 1 dB below the ceiling")


def write_muxed(video: Path, audio: np.ndarray, target: Path, out_rate: int, bit_rate: int) -> None:
    import av

    codec = "libopus" if video.suffix == ".webm" else "aac"
    with av.open(str(video)) as source, av.open(str(target), mode="w", format=container_format(video)) as sink:
        v_in = source.streams.video[0]
        v_out = sink.add_stream_from_template(template=v_in)
        if v_in.metadata.get("alpha_mode") == "1":  # VP9 with alpha: the muxer writes AlphaMode for yuva420p
            v_out.pix_fmt = "yuva420p"
        a_out = sink.add_stream(codec, rate=out_rate, layout="mono")
        a_out.bit_rate = bit_rate
        for packet in source.demux(v_in):
            if packet.dts is None:
                continue
            packet.stream = v_out
            sink.mux(packet)
        step = 960 if codec == "libopus" else 1024
        for offset in range(0, len(audio), step):
            chunk = np.ascontiguousarray(audio[offset: offset + step])
            frame = av.AudioFrame.from_ndarray(chunk.reshape(1, -1), format="flt", layout="mono")
            frame.sample_rate = out_rate
            frame.pts = offset
            frame.time_base = Fraction(1, out_rate)
            for packet in a_out.encode(frame):
                sink.mux(packet)
        for packet in a_out.encode(None):
            sink.mux(packet)


def container_format(video: Path) -> str:
    return {".webm": "webm", ".mov": "mov"}.get(video.suffix, "mp4")
