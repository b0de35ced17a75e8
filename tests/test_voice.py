"""Narration (issue 9): engines, the pinyin path, the line cache, loudness, and real voiced renders whose
sound is checked against their subtitles, their video and a cached re-render.

Example::

    pytest tests/test_voice.py -k "pinyin or loud"

The render tests use the tiny scenes of tests/voice_scenes.py (a few seconds each with Piper); they are marked
slow (voice synthesis and real renders; CI runs them): the default run checks the engines, the line cache,
timing and loudness without synthesising.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import srt
from manim import Create, Square, tempconfig

from cli import media as cli_media
from render import cli
import narration as voice
import narration.cache
import narration.engines
import narration.mux
from scenes.kit.base import LectureScene

from dry_run import dry_run
from subtitles import RATE, as_srt_cues, chars, too_fast
from support import invoke

needs_piper = pytest.mark.skipif(bool(voice.VOICES["en-piper"].missing()), reason="piper-tts not installed")
needs_zh = pytest.mark.skipif(bool(voice.VOICES["zh-espeak"].missing()), reason="espeak-ng/pypinyin missing")
PINYIN_SYLLABLE = re.compile(r"^[a-zü]+[1-5]$")


# -- reading rate without a voice ----------------------------------------------------------------

class _LongLine(LectureScene):
    strings = {"n": {"en": "A line far too long to read in the half second the scene asks for it.",
                     "zh": "这一行字太长了，半秒钟根本读不完，画面必须等一等。"}}

    def construct(self) -> None:
        self.narrate("n", 0.5)
        self.play(Create(Square()), run_time=0.5)


class _Bypass(_LongLine):
    """The tamper twin: a subtitle added around narrate(), as the scenes did before issue 9."""

    def construct(self) -> None:
        self.add_subcaption(self.t("n"), duration=0.5)
        self.play(Create(Square()), run_time=0.5)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_line_stays_up_as_long_as_reading_takes_and_the_scene_waits(lang, tmp_path):
    scene = dry_run(type("_LongLine", (_LongLine,), {"lang": lang}), tmp_path)
    (start, end, text), = as_srt_cues(scene.renderer.file_writer.subcaptions)
    assert end - start == pytest.approx(chars(text, lang) / RATE[lang], abs=0.011)
    assert scene.renderer.time >= end - 1e-6, "the scene ended before its last line could be read"
    assert too_fast([(start, end, text)], lang) == []


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_rate_check_catches_a_line_that_bypasses_narrate(lang, tmp_path):
    scene = dry_run(type("_Bypass", (_Bypass,), {"lang": lang}), tmp_path)
    assert too_fast(as_srt_cues(scene.renderer.file_writer.subcaptions), lang)


def test_reading_time_is_characters_over_the_rate():
    assert voice.reading_time("x" * 34, "en") == pytest.approx(2.0)
    assert voice.reading_time("残差 网络" * 9, "zh") == pytest.approx(4.0)  # white space is not read
    assert {lang: voice.READING_RATE[lang] for lang in RATE} == RATE
    assert voice.reading_time("x" * 34, "es") == pytest.approx(2.0)  # a Latin alphabet reads like English


# -- Chinese: pinyin, numerals, Latin runs ---------------------------------------------------------

ZH_LINE = "残差网络 ResNet 对 y = x + F(x) 求导，得到 152 层。"


def test_zh_line_with_a_latin_word_and_a_formula_is_split_out():
    parts = voice.split_zh(ZH_LINE)
    assert parts == [("zh", "残差网络"), ("latin", "ResNet"), ("zh", "对"), ("latin", "y = x + F(x)"),
                     ("zh", "求导，得到一百五十二层。")]
    assert voice.spoken_formula("y = x + F(x)") == "y equals x plus F of x"


def test_powers_of_ten_on_screen_are_read_as_spoken():
    """What the screen writes (scenes.kit.style's formatter itself, not a copy of it) reaches the English voice as
    a lecturer says it; a plain 10 stays a number."""
    from narration.text import spoken_powers

    from scenes.kit.style import format_number, power_of_ten

    assert spoken_powers(f"grew to {format_number(1.3e20)}.") == "grew to 1.3 times ten to the 20."
    assert spoken_powers(f"{format_number(-4.1e-13)} and {power_of_ten(-3)}") == \
        "-4.1 times ten to the minus 13 and ten to the minus 3"
    assert spoken_powers("block 10, 2×10 grid") == "block 10, 2×10 grid"  # no superscript: not a power
    assert voice.to_pinyin("残差网络") == "can2 cha1 wang3 luo4"  # 差 chā here, not chà (pypinyin's guess)


def test_zh_engine_feeds_espeak_tone_numbered_pinyin_and_the_english_voice_the_rest(monkeypatch):
    class Recorder(voice.SpeechEngine):
        name, lang = "rec", "en"
        said: list[str] = []

        def synthesize(self, text):
            self.said.append(text)
            return np.sin(np.linspace(0, 800, voice.SAMPLE_RATE // 2)).astype(np.float32) * 0.3

    english = Recorder()
    engine = voice.EspeakPinyinEngine(english=english)
    fed = []
    real_espeak = engine._espeak

    def espeak(pinyin):
        fed.append(pinyin)
        return real_espeak(pinyin) if shutil.which("espeak-ng") else english.synthesize("x")

    monkeypatch.setattr(engine, "_espeak", espeak)
    audio = engine.synthesize(ZH_LINE)
    assert english.said == ["ResNet", "y equals x plus F of x"]
    assert len(fed) == 3
    for pinyin in fed:
        words = [w for w in pinyin.split() if w not in ",."]
        assert words and all(PINYIN_SYLLABLE.match(w) for w in words), pinyin
        assert not re.search(r"[\u4e00-\u9fff]", pinyin), "Chinese characters reached espeak-ng"
    assert fed[2].startswith("qiu2 dao3 , de2 dao4 yi4 bai3 wu3 shi2 er4 ceng2")  # 一 yì before 百
    assert len(audio) > voice.SAMPLE_RATE  # three Chinese runs and two English ones: over a second


@needs_zh
def test_espeak_is_run_with_the_pinyin_voice_not_cmn(monkeypatch):
    calls = []
    real_run = narration.engines.subprocess.run
    monkeypatch.setattr(narration.engines.subprocess, "run", lambda args, **kw: calls.append(args) or real_run(args, **kw))
    audio = voice.EspeakPinyinEngine()._espeak("can2 cha1")
    assert calls[0][:3] == ["espeak-ng", "-v", "cmn-latn-pinyin"]
    assert 0.3 < len(audio) / voice.SAMPLE_RATE < 3


def _chinese_to_int(text: str) -> int:
    """An independent reader of Chinese numerals (for integers): sections split at 亿 and 万."""
    digits = {c: i for i, c in enumerate("零一二三四五六七八九")}
    units = {"十": 10, "百": 100, "千": 1000}

    def section(part: str) -> int:
        total, digit = 0, None
        for ch in part:
            if ch in digits:
                digit = digits[ch]
            elif ch in units:
                total += (1 if digit is None else digit) * units[ch]
                digit = None
        return total + (digit or 0)

    total = 0
    for sep, scale in (("亿", 10**8), ("万", 10**4)):
        if sep in text:
            head, text = text.split(sep, 1)
            total += section(head) * scale
    return total + section(text)


def test_chinese_numerals_read_back_to_the_same_integer():
    rng = np.random.default_rng(9)
    values = [0, 10, 15, 100, 105, 1010, 10000, 100001, 20000000, 100000000] + \
        [int(v) for v in rng.integers(0, 10**12, 300)] + [int(10 ** rng.uniform(0, 12)) for _ in range(300)]
    for value in values:
        text = voice.chinese_number(str(value))
        assert _chinese_to_int(text) == value, (value, text)
        assert not text.startswith("一十") and "零零" not in text, text
    assert voice.chinese_number("0.05") == "零点零五"


# -- the line cache ------------------------------------------------------------------------------

class _Counting(voice.SpeechEngine):
    name, lang, calls, ver = "en-test", "en", 0, "1"

    def missing(self):
        return []

    def version(self):
        return self.ver

    def synthesize(self, text):
        type(self).calls += 1
        t = np.arange(int(0.8 * voice.SAMPLE_RATE)) / voice.SAMPLE_RATE
        return (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_lines_are_cached_by_text_engine_voice_and_version(monkeypatch):
    monkeypatch.setitem(voice.VOICES, "en-test", _Counting())
    _Counting.calls = 0
    first = voice.speak("hello", "en-test")
    assert np.array_equal(voice.speak("hello", "en-test"), first) and _Counting.calls == 1
    voice.speak("hello again", "en-test")
    assert _Counting.calls == 2
    monkeypatch.setattr(_Counting, "ver", "2")
    voice.speak("hello", "en-test")
    assert _Counting.calls == 3


# -- loudness ------------------------------------------------------------------------------------

def loudness_ok(audio: np.ndarray, rate: int) -> bool:
    peak = float(np.abs(audio).max())
    return abs(voice.loudness(audio, rate) - voice.TARGET_LUFS) <= 1.0 and 20 * np.log10(peak) < 0.0


def test_normalize_track_reaches_the_target_under_the_ceiling():
    rng = np.random.default_rng(0)
    rate = voice.SAMPLE_RATE
    for gain in (0.01, 0.3, 3.0):
        track = np.zeros(6 * rate, np.float32)
        track[rate: 3 * rate] = rng.normal(0, gain, 2 * rate)
        track[int(3.5 * rate)] = 8 * gain  # a lone spike the limiter must catch
        out = voice.normalize_track(track)
        assert voice.loudness(out) == pytest.approx(voice.TARGET_LUFS, abs=0.5)
        assert 20 * np.log10(np.abs(out).max()) <= voice.PEAK_CEILING_DB + 1e-3
        assert loudness_ok(out, rate) and not loudness_ok(out * 0.5, rate) and not loudness_ok(out * 4, rate)


# -- missing engine -------------------------------------------------------------------------------

def test_missing_engine_is_reported_before_any_work_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setattr(narration.engines.shutil, "which", lambda name: None if name == "espeak-ng" else shutil.which(name))
    out = tmp_path / "out"
    result = invoke("render", "cli_scenes:TinyTrace", "--lang", "zh", "--voice", "-o", out,
                    "--set", "steps=20", "--set", "depth=3")
    assert result.exit_code == 1
    assert "voice zh-espeak needs espeak-ng" in result.output
    assert "apt-get install -y --no-install-recommends espeak-ng" in result.output
    assert not out.exists(), "work started before the voice was checked"
    assert not list(Path(narration.cache.cache_root().parent).glob("traces/*.npz")), "a trace was trained"


def test_voice_options_are_checked():
    assert "speaks zh, not --lang en" in invoke("render", "cli_scenes:TinySquare", "--voice", "zh-espeak").output
    assert "unknown voice 'en-nobody'" in invoke("render", "cli_scenes:TinySquare", "--voice", "en-nobody").output
    assert "mp4 or webm, not png" in invoke("render", "cli_scenes:TinySquare", "--voice", "--format", "png").output


# -- real voiced renders ---------------------------------------------------------------------------

def cues_of(srt_path: Path) -> list[tuple[float, float]]:
    return [(s.start.total_seconds(), s.end.total_seconds()) for s in srt.parse(srt_path.read_text("utf-8"))]


def audio_duration_problem(video: Path) -> str | None:
    audio, rate = voice.read_audio(video)
    a, v = len(audio) / rate, voice.video_duration(video)
    return None if abs(a - v) <= 0.1 else f"audio {a:.3f} s, video {v:.3f} s"


@pytest.fixture(scope="module")
def voiced(tmp_path_factory):
    """Both tiny scenes rendered with --voice (English, mp4) into one output folder with its own cache."""
    root = tmp_path_factory.mktemp("voiced")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RESIDUAL_CACHE", str(root / "cache"))
        result = invoke("render", "voice_scenes:VoicedLines", "voice_scenes:VoicedTail", "--voice", "-o", root / "out")
    assert result.exit_code == 0, result.output
    return root


@pytest.mark.xdist_group("voiced")  # one worker builds the module fixture, not both
@pytest.mark.slow  # voice synthesis and real renders (the fixture: ~6 CPU s); CI runs them
@needs_piper
def test_clip_has_an_audio_stream_as_long_as_its_video(voiced, tmp_path):
    video = voiced / "out/480p15/en/VoicedLines.mp4"
    assert audio_duration_problem(video) is None
    # tamper twin: a track cut short is caught
    audio, rate = voice.read_audio(video)
    short = tmp_path / "short.mp4"
    narration.mux.write_muxed(video, audio[: len(audio) // 2], short, rate, 192000)
    assert audio_duration_problem(short) is not None


@pytest.mark.xdist_group("voiced")  # one worker builds the module fixture, not both
@pytest.mark.slow  # voice synthesis and real renders (the fixture: ~6 CPU s); CI runs them
@needs_piper
def test_every_cue_lies_in_speech_and_the_gaps_are_quiet_and_a_tampered_cue_fails(voiced):
    folder = voiced / "out/480p15/en"
    audio, rate = voice.read_audio(folder / "VoicedLines.mp4")
    cues = cues_of(folder / "VoicedLines.srt")
    assert len(cues) == 2 and cues[1][0] - cues[0][1] >= voice.LINE_GAP - 0.05
    assert voice.alignment_problems(audio, rate, cues) == []
    shifted = [cues[0], (cues[1][0] + 0.4, cues[1][1] + 0.4)]
    assert voice.alignment_problems(audio, rate, shifted)
    early_end = [(cues[0][0], cues[0][1] - 0.5), cues[1]]
    assert voice.alignment_problems(audio, rate, early_end)
    noisy = audio.copy()  # sound in a gap is caught too
    gap = slice(int((cues[0][1] + 0.2) * rate), int((cues[1][0] - 0.2) * rate))
    noisy[gap] = 0.05 * np.sin(np.arange(gap.stop - gap.start) * 0.3)
    assert voice.alignment_problems(noisy, rate, cues)


@pytest.mark.xdist_group("voiced")  # one worker builds the module fixture, not both
@pytest.mark.slow  # voice synthesis and real renders (the fixture: ~6 CPU s); CI runs them
@needs_piper
def test_clip_loudness_is_on_target_with_no_clipping(voiced):
    for name in ("VoicedLines", "VoicedTail"):
        audio, rate = voice.read_audio(voiced / f"out/480p15/en/{name}.mp4")
        assert voice.loudness(audio, rate) == pytest.approx(voice.TARGET_LUFS, abs=1.0)
        assert 20 * np.log10(np.abs(audio).max()) < 0.0
        assert loudness_ok(audio, rate) and not loudness_ok(audio * 0.7, rate)


@pytest.mark.xdist_group("voiced")  # one worker builds the module fixture, not both
@pytest.mark.slow  # voice synthesis and real renders (the fixture: ~6 CPU s); CI runs them
@needs_piper
def test_a_cached_re_render_keeps_the_same_sound(voiced, monkeypatch):
    """The record is removed, so the scene is rendered again; every segment comes from Manim's cache,
    including the static wait before the second line (where Manim's add_sound loses sound)."""
    monkeypatch.setenv("RESIDUAL_CACHE", str(voiced / "cache"))
    folder = voiced / "out/480p15/en"
    before, rate = voice.read_audio(folder / "VoicedLines.mp4")
    segments = cli_media.media_cache_dir() / "segments"
    cached = {p.name: p.stat().st_mtime_ns for p in segments.rglob("*.mp4")}  # a rewritten segment changes
    (folder / "VoicedLines.mp4.render.json").unlink()
    result = invoke("render", "voice_scenes:VoicedLines", "--voice", "-o", voiced / "out")
    assert result.exit_code == 0 and "1 to render" in result.output, result.output
    assert {p.name: p.stat().st_mtime_ns for p in segments.rglob("*.mp4")} == cached, "a segment was rendered again"
    after, _ = voice.read_audio(folder / "VoicedLines.mp4")
    assert len(after) == len(before) and np.array_equal(after, before)
    assert voice.alignment_problems(after, rate, cues_of(folder / "VoicedLines.srt")) == []


@pytest.mark.xdist_group("voiced")  # one worker builds the module fixture, not both
@pytest.mark.slow  # voice synthesis and real renders (the fixture: ~6 CPU s); CI runs them
@needs_piper
def test_concat_gives_one_continuous_track(voiced):
    out = voiced / "out"
    jobs = [cli_media.RenderJob(scene=name, module="voice_scenes", params={}, attrs={}, traces={}, source="s",
                                quality="l", lang="en", format="mp4", transparent=False, output=str(out),
                                voice="en-piper") for name in ("VoicedLines", "VoicedTail")]
    files, wrote = cli_media.concat_lecture(jobs)
    lecture = out / "480p15/en/lecture.mp4"
    assert wrote and lecture in files
    assert audio_duration_problem(lecture) is None
    audio, rate = voice.read_audio(lecture)
    cues = cues_of(lecture.with_suffix(".srt"))
    assert len(cues) == 3 and voice.alignment_problems(audio, rate, cues) == []
    assert loudness_ok(audio, rate)
    first = voice.video_duration(out / "480p15/en/VoicedLines.mp4")
    assert cues[2][0] >= first - 0.05, "the second clip's line starts inside the first clip"


@pytest.mark.slow
@needs_zh
@pytest.mark.parametrize("fmt", ["mp4", "webm"])
def test_a_chinese_voiced_render_is_aligned_and_on_target(fmt, tmp_path):
    alpha = ["--transparent"] if fmt == "webm" else []
    result = invoke("render", "voice_scenes:VoicedLines", "--lang", "zh", "--voice", "--format", fmt, *alpha,
                    "-o", tmp_path)
    assert result.exit_code == 0, result.output
    video = tmp_path / f"480p15/zh/VoicedLines.{fmt}"
    if alpha:  # the muxed copy keeps the transparent video's alpha channel
        import av

        with av.open(str(video)) as container:
            assert container.streams.video[0].metadata.get("alpha_mode") == "1"
    assert audio_duration_problem(video) is None
    audio, rate = voice.read_audio(video)
    assert voice.alignment_problems(audio, rate, cues_of(video.with_suffix(".srt"))) == []
    assert loudness_ok(audio, rate)


def test_list_names_the_voices_and_a_config_file_can_choose_one(tmp_path):
    import json

    listing = json.loads(invoke("list", "--json").output)
    assert set(listing["voices"]) == set(voice.VOICES)
    assert listing["voices"]["zh-espeak"]["lang"] == "zh" and "GPL" in listing["voices"]["zh-espeak"]["licence"]
    config = tmp_path / "lecture.toml"
    config.write_text('[render]\nvoice = "en-piper"\nlang = "zh"\n')
    result = invoke("render", "cli_scenes:TinySquare", "--config", config, "-o", tmp_path / "out")
    assert result.exit_code == 1 and "voice en-piper speaks en, not --lang zh" in result.output
    assert not (tmp_path / "out").exists()
