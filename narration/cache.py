"""The audio cache: each spoken line once, under ``$RESIDUAL_CACHE/voice/<sha256>.wav`` (torch- and manim-free).

Example::

    python -m narration --voice en-piper "A residual block adds its input back." line.wav

A line is keyed by (text, engine class, voice name, engine version), trimmed to its voiced part, levelled and
normalised before it is stored; a cached line is read back exactly as it was written (16-bit samples).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from narration.audio import VoiceError, level, normalize_track, read_wav, trim, write_wav
from narration.engines import get_voice

__all__ = ["cache_root", "speak"]


def cache_root() -> Path:
    from simulation.cache import cache_dir

    return cache_dir() / "voice"


def speak(text: str, voice: str) -> np.ndarray:
    """``text`` spoken by ``voice``: float32 mono at :data:`SAMPLE_RATE`, trimmed to its voiced part, at
    about -16 LUFS. Cached by (text, engine class, voice name, engine version)."""
    from simulation.atomic_io import atomic_write

    engine = get_voice(voice)
    key = json.dumps([text, type(engine).__name__, engine.name, engine.version()], ensure_ascii=False)
    path = cache_root() / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.wav"
    if path.is_file():
        return read_wav(path)
    audio = trim(engine.synthesize(text))
    if audio.size == 0:
        raise VoiceError(f"{voice} produced no sound for {text!r}")
    audio = normalize_track(level(audio))
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, suffix=".wav") as tmp:
        write_wav(tmp, audio)
    return read_wav(path)  # exactly what a cached run reads: 16-bit samples
