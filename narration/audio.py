"""Samples of the narration: WAV files, trimming and levelling, loudness (ITU-R BS.1770), the clip's track and
the checks of a finished track against its subtitles (torch- and manim-free).

Example::

    python -c "import numpy as np; from narration.audio import loudness; print(loudness(np.ones(22050, 'f') * .1))"

Every clip's track is normalised to :data:`TARGET_LUFS` (``pyloudnorm``) under a peak ceiling of
:data:`PEAK_CEILING_DB`.
"""

from __future__ import annotations

import wave
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

__all__ = ["SAMPLE_RATE", "TARGET_LUFS", "PEAK_CEILING_DB", "LINE_GAP", "VoiceError", "read_wav", "write_wav",
           "resample", "frame_rms_db", "trim", "level", "loudness", "limit", "normalize_track", "build_track",
           "voiced_intervals", "alignment_problems", "read_audio"]

SAMPLE_RATE = 22050  # Hz: Piper's medium voices and espeak-ng both synthesise at this rate
TARGET_LUFS = -16.0  # integrated loudness of every clip (the usual target for speech published online)
PEAK_CEILING_DB = -1.5  # sample peak after limiting, dBFS; headroom for the AAC/Opus encoder's overshoot
LINE_GAP = 0.6  # s of quiet after a spoken line before the next may start
_SILENCE_DB = -40.0  # dB below a line's loudest 20 ms that counts as silence when trimming it
_FRAME = 0.02  # s: RMS analysis window


class VoiceError(RuntimeError):
    """A voice cannot be used (unknown, or its engine is not installed); the message is one line."""


# -- samples ------------------------------------------------------------------------------------

def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as wav:
        if wav.getsampwidth() != 2 or wav.getnchannels() != 1:
            raise VoiceError(f"{path}: expected 16-bit mono WAV")
        rate, frames = wav.getframerate(), wav.readframes(wav.getnframes())
    audio = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    return resample(audio, rate, SAMPLE_RATE)


def write_wav(path: Path, audio: np.ndarray) -> None:
    pcm = np.clip(np.round(audio * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(pcm.tobytes())


def resample(audio: np.ndarray, rate: int, target: int) -> np.ndarray:
    if rate == target or audio.size == 0:
        return audio.astype(np.float32)
    from scipy.signal import resample_poly

    g = np.gcd(rate, target)
    return resample_poly(audio, target // g, rate // g).astype(np.float32)


def frame_rms_db(audio: np.ndarray, rate: int = SAMPLE_RATE) -> np.ndarray:
    """RMS level in dBFS of consecutive :data:`_FRAME`-second windows."""
    n = max(1, int(_FRAME * rate))
    frames = audio[: len(audio) // n * n].reshape(-1, n).astype(np.float64)
    return 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)


def trim(audio: np.ndarray) -> np.ndarray:
    """Cut the leading and trailing silence (RMS more than 40 dB below the loudest window)."""
    if audio.size == 0:
        return audio
    db = frame_rms_db(audio)
    if db.size == 0:
        return audio
    loud = np.flatnonzero(db > db.max() + _SILENCE_DB)
    n = int(_FRAME * SAMPLE_RATE)
    return audio[loud[0] * n: (loud[-1] + 1) * n].astype(np.float32)


def level(audio: np.ndarray, target_db: float = -20.0) -> np.ndarray:
    """Scale to an RMS of ``target_db`` over the voiced windows (so the two engines' runs match)."""
    db = frame_rms_db(audio)
    voiced = db[db > db.max() + _SILENCE_DB] if db.size else db
    if voiced.size == 0:
        return audio
    level = 10 * np.log10(np.mean(10 ** (voiced / 10)))
    return (audio * 10 ** ((target_db - level) / 20)).astype(np.float32)


def loudness(audio: np.ndarray, rate: int = SAMPLE_RATE) -> float:
    """Integrated loudness in LUFS (ITU-R BS.1770-4, pyloudnorm); -inf for silence or < 0.4 s."""
    import pyloudnorm

    if len(audio) < int(0.4 * rate) + 1:
        return float("-inf")
    return float(pyloudnorm.Meter(rate).integrated_loudness(audio.astype(np.float64)))


def limit(audio: np.ndarray, ceiling_db: float = PEAK_CEILING_DB, rate: int = SAMPLE_RATE) -> np.ndarray:
    """A peak limiter: a smoothed gain (5 ms attack window, 50 ms release) keeps |sample| under the ceiling."""
    from scipy.ndimage import minimum_filter1d, uniform_filter1d

    ceiling = 10 ** (ceiling_db / 20)
    need = np.minimum(1.0, ceiling / np.maximum(np.abs(audio), 1e-9))
    if need.min() >= 1.0:
        return audio
    attack = max(1, int(0.005 * rate))
    gain = minimum_filter1d(need, size=2 * attack + int(0.05 * rate), mode="nearest")
    gain = np.minimum(uniform_filter1d(gain, size=attack, mode="nearest"), need)
    return np.clip(audio * gain, -ceiling, ceiling).astype(np.float32)


def normalize_track(audio: np.ndarray, target: float = TARGET_LUFS, rate: int = SAMPLE_RATE) -> np.ndarray:
    """Gain to ``target`` LUFS integrated, then the peak limiter; a few passes, as limiting lowers loudness."""
    out = audio.astype(np.float32)
    for _ in range(4):
        level = loudness(out, rate)
        if not np.isfinite(level):
            return out
        if abs(level - target) < 0.2 and np.abs(out).max() <= 10 ** (PEAK_CEILING_DB / 20) + 1e-6:
            break
        out = limit(out * np.float32(10 ** ((target - level) / 20)), rate=rate)
    return out


def build_track(lines: Iterable[tuple[float, np.ndarray]], duration: float) -> np.ndarray:
    """One mono track ``duration`` seconds long with each ``(start_s, samples)`` placed at its start,
    normalised to :data:`TARGET_LUFS` with peaks under :data:`PEAK_CEILING_DB`."""
    track = np.zeros(int(round(duration * SAMPLE_RATE)), np.float32)
    for start, audio in lines:
        begin = int(round(start * SAMPLE_RATE))
        end = min(len(track), begin + len(audio))
        if end > begin:
            track[begin:end] += audio[: end - begin]
    return normalize_track(track)


# -- checks -------------------------------------------------------------------------------------

def voiced_intervals(audio: np.ndarray, rate: int, threshold_db: float = -45.0,
                     bridge: float = 0.4) -> list[tuple[float, float]]:
    """Intervals (s) where the 20 ms RMS is above ``threshold_db`` dBFS, with pauses shorter than
    ``bridge`` seconds (between words, at commas) bridged."""
    db = frame_rms_db(audio, rate)
    out: list[list[float]] = []
    for index in np.flatnonzero(db > threshold_db):
        start, end = index * _FRAME, (index + 1) * _FRAME
        if out and start - out[-1][1] <= bridge:
            out[-1][1] = end
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def alignment_problems(audio: np.ndarray, rate: int, cues: Sequence[tuple[float, float]],
                       tolerance: float = 0.1) -> list[str]:
    """Where subtitle ``cues`` [(start_s, end_s)] and the sound disagree: a cue not inside one voiced
    interval (with ``tolerance`` seconds of slack at each end), or sound outside every cue."""
    voiced = voiced_intervals(audio, rate)
    problems = []
    for start, end in cues:
        if not any(a - tolerance <= start and end <= b + tolerance for a, b in voiced):
            problems.append(f"cue {start:.2f}-{end:.2f} s is not inside one voiced interval")
    for a, b in voiced:
        if not any(start - tolerance <= a and b <= end + tolerance for start, end in cues):
            problems.append(f"sound at {a:.2f}-{b:.2f} s lies outside every cue")
    return problems


def read_audio(path: str | Path) -> tuple[np.ndarray, int]:
    """The first audio stream of ``path`` as float32 mono samples and its rate; VoiceError if none."""
    import av

    with av.open(str(path)) as container:
        if not container.streams.audio:
            raise VoiceError(f"{path} has no audio stream")
        stream = container.streams.audio[0]
        rate = stream.rate
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        parts = []
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                parts.append(out.to_ndarray().reshape(-1))
        for out in resampler.resample(None):
            parts.append(out.to_ndarray().reshape(-1))
    return (np.concatenate(parts) if parts else np.zeros(0, np.float32)), rate
