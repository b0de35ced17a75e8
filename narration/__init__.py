"""Offline narration: speech engines, Chinese text to pinyin, loudness, the audio cache and muxing.

Example::

    python render.py render IdentityHighway --voice en-piper
    python -m narration --voice zh-espeak "残差块把输入 x 加到 F(x) 上。" line.wav

Torch-free and manim-free: the command line, the scenes (``LectureScene.narrate``) and the tests share it.
:mod:`narration.text` (reading time, pinyin), :mod:`narration.audio` (samples, loudness, the track, checks),
:mod:`narration.engines` (voices), :mod:`narration.cache` (each line once), :mod:`narration.mux` (PyAV). The
scene records when each line starts (Manim's clock, which also runs through cached segments), and the track is
muxed into the finished video. Every public name of those modules is importable from here.

Two more modules, imported by name, hold what the scenes, the deck and the page share below cli/:
:mod:`narration.i18n` (the lecture's words: the gettext catalogs under locale/, the table of languages) and
:mod:`narration.beats` (the beat record ``<Scene>.beats.json``: a narration point per slide).
"""

from narration.audio import (LINE_GAP, PEAK_CEILING_DB, SAMPLE_RATE, TARGET_LUFS, VoiceError, alignment_problems,
                             build_track, loudness, normalize_track, read_audio, voiced_intervals)
from narration.cache import speak
from narration.engines import (VOICES, EspeakPinyinEngine, PiperEngine, SpeechEngine, default_voice, get_voice,
                               missing_voice)
from narration.mux import mux_audio, video_duration
from narration.text import (PHRASES, READING_RATE, chinese_number, cue_chars, reading_time, spoken_formula, split_zh,
                            to_pinyin)

__all__ = [
    "SAMPLE_RATE", "TARGET_LUFS", "PEAK_CEILING_DB", "READING_RATE", "VoiceError", "SpeechEngine",
    "PiperEngine", "EspeakPinyinEngine", "VOICES", "get_voice", "default_voice", "missing_voice",
    "reading_time", "cue_chars", "speak", "split_zh", "to_pinyin", "chinese_number", "spoken_formula",
    "PHRASES", "normalize_track", "build_track", "loudness", "voiced_intervals", "alignment_problems", "read_audio",
    "mux_audio", "video_duration", "LINE_GAP",
]
