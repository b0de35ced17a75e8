"""Beats, decks, the lecture page and the notebook, checked in a real headless browser (Debian's chromium).

The renders are the tiny scenes of tests/present_scenes.py and tests/cli_scenes.py (a few seconds in all);
the deck of a real lecture scene is in the slow test at the end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import av
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cli.deck import staged_dir
from render import cli

from browser import FAST_MEDIA, browser, open_logged, remote  # noqa: F401 (browser: a fixture)
from support import invoke, tiny_frames, write_clip

ROOT = Path(__file__).resolve().parent.parent
SCENES = ["present_scenes:TinyBeats", "present_scenes:TinyBeatsTwo"]
TINY = ["--set", "steps=20", "--set", "depth=3"]  # TinyTrace's chain_rule runs: well under a second
NARRATION = {"TinyBeats": ["one", "two", "two_more", "three", "end"], "TinyBeatsTwo": ["a", "b"]}  # in order


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The tiny scenes rendered once, with the html deck, the pptx, the pdf and the page; {name: folder}. Rendered
    here (--jobs 1): a render worker process per scene (render.py _worker; tests/test_jobs.py) would import Manim
    and the scenes again, ~1.5 CPU s each, for the same clips."""
    out = tmp_path_factory.mktemp("present")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RESIDUAL_CACHE", str(tmp_path_factory.mktemp("present-cache")))
        for fmt in ("html", "pptx", "pdf"):
            result = invoke("slides", *SCENES, "--jobs", "1", "--format", fmt, "-o", out)
            assert result.exit_code == 0, result.output
        result = invoke("page", *SCENES, "cli_scenes:TinyTrace", *TINY, "-o", out)
        assert result.exit_code == 0, result.output
    return out / "480p15" / "en"


def beat_count(folder: Path) -> int:
    """Beats of the deck's scenes, from their beat records."""
    return sum(len(json.loads((folder / f"{scene}.beats.json").read_text(encoding="utf-8"))["beats"])
               for scene in NARRATION)


def mp4_boxes(path: Path) -> list[str]:
    """Top-level ISO-BMFF box types of ``path``, in file order (read here, independently of PyAV)."""
    kinds = []
    with path.open("rb") as f:
        while header := f.read(8):
            size, kind = struct.unpack(">I4s", header)
            kinds.append(kind.decode("latin-1"))
            if size == 1:
                size = struct.unpack(">Q", f.read(8))[0] - 8
            elif size == 0:
                break
            f.seek(size - 8, 1)
    return kinds


def duration(path: Path) -> float:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return float(stream.frames / stream.average_rate)


# -- beats ------------------------------------------------------------------------------------

@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
def test_beats_follow_the_narration(rendered):
    record = json.loads((rendered / "TinyBeats.beats.json").read_text(encoding="utf-8"))
    beats = record["beats"]
    # Every narration line lands in exactly one beat, in order; a beat starts with a line.
    assert [key for b in beats for key in b["keys"]] == NARRATION["TinyBeats"]
    assert [b["keys"][0] for b in beats][:2] == ["one", "two"] and 3 <= len(beats) <= 5
    (with_number,) = [b for b in beats if b["numbers"]]
    assert "two_more" in with_number["keys"] and with_number["numbers"] == {"answer": 42.0}
    line = with_number["keys"].index("two_more")
    assert (with_number["narration"]["en"][line], with_number["narration"]["zh"][line]) == \
        ("with a number beside it", "旁边有一个数")
    assert beats[0]["start"] == 0.0
    assert all(a["end"] == b["start"] for a, b in zip(beats, beats[1:]))
    whole = duration(rendered / "TinyBeats.mp4")
    assert beats[-1]["end"] == pytest.approx(whole, abs=1 / 15)
    # Each beat's own video lasts as long as its stretch of the scene (to a frame), and they add up to the whole.
    parts = [duration(rendered / f"TinyBeats.beat-{b['index']:02d}.mp4") for b in beats]
    for beat, part in zip(beats, parts):
        assert part == pytest.approx(beat["end"] - beat["start"], abs=1 / 15 + 1e-6)
    assert sum(parts) == pytest.approx(whole, abs=1 / 15)


class FakeSection:
    def __init__(self) -> None:
        self.frames = 0

    def is_empty(self) -> bool:
        return self.frames == 0


class FakeScene:
    """What BeatLog reads of a Manim scene: its clock, its language and its file writer's sections."""

    lang = "en"

    def __init__(self) -> None:
        self.time = 0.0
        self.renderer = type("Renderer", (), {})()
        self.renderer.file_writer = type("Writer", (), {"sections": [FakeSection()]})()

    def next_section(self, name: str) -> None:
        self.renderer.file_writer.sections.append(FakeSection())

    def animate(self, seconds: float) -> None:
        self.time += seconds
        self.renderer.file_writer.sections[-1].frames += round(seconds * 15)


def test_beat_rules_on_a_fake_scene():
    """The rules of scenes/kit/beats.py, one by one: a lead-in joins beat 0, lines with no frames between them are
    one beat, a last line after the last frame joins the beat before, numbers go to the beat they are shown in."""
    from scenes.kit.beats import BeatLog

    scene = FakeScene()
    log = BeatLog(scene)
    log.record_number("lead_in", 1.0)
    scene.animate(0.5)                                    # drawn before any narration
    log.begin("a", {"en": "A", "zh": "甲"})
    scene.animate(1.0)
    log.begin("b", {"en": "B", "zh": "乙"})
    log.begin("c", {"en": "C", "zh": "丙"})               # no frame since "b"
    log.record_number("x", 2.0)
    scene.animate(2.0)
    log.begin("d", {"en": "D", "zh": "丁"})               # nothing follows
    record = log.record()
    beats = record.beats
    assert [b.keys for b in beats] == [["a"], ["b", "c", "d"]]
    assert beats[1].narration == {"en": ["B", "C", "D"], "zh": ["乙", "丙", "丁"]}
    assert [b.numbers for b in beats] == [{"lead_in": 1.0}, {"x": 2.0}]
    assert [(b.start, b.end, b.section) for b in beats] == [(0.0, 1.5, 0), (1.5, 3.5, 1)] and record.duration == 3.5
    assert len(scene.renderer.file_writer.sections) == 3  # the last, empty one is the one Manim drops
    # No narration at all: one beat over the whole scene.
    silent = FakeScene()
    silent.animate(1.0)
    assert [(b.keys, b.start, b.end) for b in BeatLog(silent).record().beats] == [([], 0.0, 1.0)]


def test_a_scene_without_narration_is_one_beat(tmp_path):
    result = invoke("render", "present_scenes:TinySilent", "-o", tmp_path)
    assert result.exit_code == 0, result.output
    folder = tmp_path / "480p15" / "en"
    record = json.loads((folder / "TinySilent.beats.json").read_text(encoding="utf-8"))
    assert len(record["beats"]) == 1 and record["beats"][0]["keys"] == []
    assert duration(folder / "TinySilent.beat-00.mp4") == pytest.approx(duration(folder / "TinySilent.mp4"))


# -- web-ready videos -------------------------------------------------------------------------

@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
def test_deck_and_page_videos_put_the_index_before_the_media(rendered):
    copies = [*(rendered / "slides" / "media").glob("*.mp4"), *(rendered / "page" / "media").glob("*.mp4")]
    assert len(copies) == beat_count(rendered) + 3
    for path in copies:
        boxes = mp4_boxes(path)
        assert boxes.index("moov") < boxes.index("mdat"), (path, boxes)
    # The box reader can tell: Manim's own file has its index at the end.
    raw = mp4_boxes(rendered / "TinyBeats.mp4")
    assert raw.index("moov") > raw.index("mdat")


def test_beat_videos_in_the_deck_carry_their_stretch_of_the_sound(tmp_path):
    """Manim saves sections without sound; the deck's copy of each beat gets the clip's sound of that beat.
    TinyVoiced plays 440 Hz in beat 0 and 660 Hz in beat 1: the loudest frequency of each copy says which."""
    import numpy as np

    from cli.deck import sound_span

    result = invoke("slides", "present_scenes:TinyVoiced", "-o", tmp_path)
    assert result.exit_code == 0, result.output
    folder = tmp_path / "480p15" / "en"
    assert sound_span(folder / "TinyVoiced.beat-00.mp4", 0, 10) is None  # Manim's section: silent
    for index, pitch in ((0, 440), (1, 660)):
        copy = folder / "slides" / "media" / f"TinyVoiced.beat-{index:02d}.mp4"
        samples, rate, _ = sound_span(copy, 0, 10)
        mono = samples.mean(axis=0)
        assert len(mono) / rate == pytest.approx(duration(copy), abs=0.05)
        peak = np.fft.rfftfreq(len(mono), 1 / rate)[np.argmax(np.abs(np.fft.rfft(mono)))]
        assert peak == pytest.approx(pitch, abs=5)
        boxes = mp4_boxes(copy)
        assert boxes.index("moov") < boxes.index("mdat")


# -- html deck in a browser -------------------------------------------------------------------

@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
def test_the_page_and_the_explorer_link_to_each_other(rendered):
    """`render.py page -o OUT` links to OUT/explore (`render.py explore -o OUT/explore`) once one is there, whose
    views link back to their clips on that page."""
    out = rendered.parent.parent
    page = rendered / "page" / "lecture.html"
    assert 'class="explore"' not in page.read_text(encoding="utf-8")  # no explorer yet: no link to it
    result = invoke("explore", "chain_rule", *TINY, "--set", "seeds=0", "-o", out / "explore")
    assert result.exit_code == 0, result.output
    again = invoke("page", *SCENES, "cli_scenes:TinyTrace", *TINY, "-o", out)  # the clips are up to date
    assert again.exit_code == 0, again.output
    hrefs = re.findall(r'<a class="explore" href="([^"#]+)#lang=en">', page.read_text(encoding="utf-8"))
    assert hrefs and {(page.parent / h).resolve() for h in hrefs} == {(out / "explore" / "index.html").resolve()}
    data = (out / "explore" / "data.js").read_text(encoding="utf-8")
    clips = json.loads(data.removeprefix("window.EXPLORE_DATA = ").rstrip().removesuffix(";"))["clips"]["en"]
    path, anchor = clips["chain"].split("#")
    assert (out / "explore" / path).resolve() == page.resolve() and anchor == "ChainRuleProduct"


CURRENT_VIDEO = """() => { const v = Reveal.getCurrentSlide().querySelector('video');
  return {src: v.getAttribute('src'), time: v.currentTime, duration: v.duration, paused: v.paused, ended: v.ended}; }"""


@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
@pytest.mark.slow  # the beats play in real time (at 4x): ~3 s of one core idle; CI runs it, the page's browser test is default
def test_deck_opens_offline_and_steps_through_the_beats(rendered, browser):
    deck = rendered / "slides" / "index.html"
    index = json.loads((rendered / "slides" / "beats.json").read_text(encoding="utf-8"))["slides"]
    page, requests, errors = open_logged(browser, deck.as_uri(), FAST_MEDIA)  # beats end at 4x: the stop is the same
    page.wait_for_function("typeof Reveal !== 'undefined' && Reveal.isReady()")
    assert page.evaluate("Reveal.getTotalSlides()") == beat_count(rendered) == len(index)
    # Notes hold the narration and the numbers of each beat.
    notes = page.evaluate("Array.from(document.querySelectorAll('.slides > section')).map(s => Reveal.getSlideNotes(s))")
    for note, beat in zip(notes, index):
        for line in beat["narration"]["en"]:
            assert line in note
    for note, beat in zip(notes, index):
        assert ("<code>answer</code> = 42" in note) == ("answer" in beat["numbers"])
    # -> advances; the beat's video plays from its start to its end and stops there.
    for key, expected in (("ArrowRight", 1), ("Space", 2)):
        page.keyboard.press(key)
        assert page.evaluate("Reveal.getIndices().h") == expected
        page.wait_for_function("Reveal.getCurrentSlide().querySelector('video').ended", timeout=10_000)
        state = page.evaluate(CURRENT_VIDEO)
        assert state["src"] == index[expected]["video"]
        assert state["paused"] and state["time"] == pytest.approx(state["duration"], abs=0.01)
        assert state["duration"] == pytest.approx(index[expected]["end"] - index[expected]["start"], abs=1 / 15 + 1e-6)
        page.wait_for_timeout(300)
        assert page.evaluate(CURRENT_VIDEO)["time"] == pytest.approx(state["duration"], abs=0.01)  # no loop
    page.keyboard.press("ArrowLeft")
    assert page.evaluate("Reveal.getIndices().h") == 1
    page.wait_for_function("Reveal.getCurrentSlide().querySelector('video').ended", timeout=10_000)
    assert errors == []
    assert requests and remote(requests) == []
    page.close()


@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
@pytest.mark.slow  # a second browser window; the deck's notes are also read by the deck test
def test_speaker_view_shows_the_beats_notes_offline(rendered, browser):
    context = browser.new_context()
    requests = []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    page.goto((rendered / "slides" / "index.html").as_uri())
    page.wait_for_function("typeof Reveal !== 'undefined' && Reveal.isReady()")
    with context.expect_page() as opened:
        page.keyboard.press("s")
    notes = opened.value
    notes.wait_for_function("document.querySelector('.speaker-controls-notes') &&"
                            " document.querySelector('.speaker-controls-notes').innerText.includes('first, a square')")
    page.keyboard.press("ArrowRight")
    notes.wait_for_function("document.querySelector('.speaker-controls-notes').innerText.includes('then a circle')")
    index = json.loads((rendered / "slides" / "beats.json").read_text(encoding="utf-8"))["slides"]
    (numbered,) = [i for i, beat in enumerate(index) if beat["numbers"]]
    for _ in range(numbered - 1):
        page.keyboard.press("ArrowRight")
    notes.wait_for_function("document.querySelector('.speaker-controls-notes').innerText.includes('answer = 42')")
    assert requests and remote(requests) == []
    context.close()


@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
@pytest.mark.slow  # the twin of the deck test above, in the same run
def test_the_request_log_catches_a_deck_that_reaches_out(rendered, browser, tmp_path):
    """Tamper twin of the offline check: the same deck with one stylesheet from the network fails it."""
    deck = tmp_path / "slides"
    shutil.copytree(rendered / "slides", deck)
    html = (deck / "index.html").read_text(encoding="utf-8")
    (deck / "index.html").write_text(html.replace("</head>", '<link rel="stylesheet" href="http://127.0.0.1:9/x.css">\n</head>'),
                                     encoding="utf-8")
    page, requests, errors = open_logged(browser, (deck / "index.html").as_uri())
    page.wait_for_function("typeof Reveal !== 'undefined' && Reveal.isReady()")
    page.wait_for_timeout(300)
    assert remote(requests) == ["http://127.0.0.1:9/x.css"] and errors
    page.close()


@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
@pytest.mark.slow  # the twin waits out a beat in real time (CI runs it)
def test_the_stop_check_catches_a_deck_whose_beats_loop(rendered, browser, tmp_path):
    """Tamper twin of 'plays to its beat end and stops': with looping videos no beat ever ends."""
    deck = tmp_path / "slides"
    shutil.copytree(rendered / "slides", deck)
    html = (deck / "index.html").read_text(encoding="utf-8")
    (deck / "index.html").write_text(html.replace("<video playsinline", "<video loop playsinline"), encoding="utf-8")
    beat = json.loads((rendered / "slides" / "beats.json").read_text(encoding="utf-8"))["slides"][1]
    page, _, _ = open_logged(browser, (deck / "index.html").as_uri())
    page.wait_for_function("typeof Reveal !== 'undefined' && Reveal.isReady()")
    page.keyboard.press("ArrowRight")
    # the untampered deck's video ends after its beat's length: wait twice that (and 0.5 s for the page to start it)
    with pytest.raises(Exception, match="Timeout"):
        page.wait_for_function("Reveal.getCurrentSlide().querySelector('video').ended",
                               timeout=round(2_000 * (beat["end"] - beat["start"])) + 500)
    assert page.evaluate("Reveal.getCurrentSlide().querySelector('video').played.length") > 0  # it did play
    page.close()


@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
def test_deck_files_are_all_inside_the_folder(rendered):
    html = (rendered / "slides" / "index.html").read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html
    for path in (rendered / "slides" / "reveal").rglob("*.css"):
        text = path.read_text(encoding="utf-8", errors="replace")
        assert "url(http" not in text and "@import url(http" not in text, path


# -- pptx, pdf --------------------------------------------------------------------------------

@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
def test_pptx_has_a_slide_with_video_and_notes_per_beat(rendered):
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    index = json.loads((rendered / "slides" / "beats.json").read_text(encoding="utf-8"))["slides"]
    prs = Presentation(str(rendered / "slides.pptx"))
    assert len(prs.slides) == beat_count(rendered) == len(index)
    for slide, beat in zip(prs.slides, index):
        assert [s.shape_type for s in slide.shapes].count(MSO_SHAPE_TYPE.MEDIA) == 1
        notes = slide.notes_slide.notes_text_frame.text
        assert all(line in notes for line in beat["narration"]["en"])
    videos = [p for p in prs.part.package.iter_parts() if p.content_type == "video/mp4"]
    assert len(videos) == len(index)


@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
def test_pdf_has_a_page_per_beat(rendered):
    from pypdf import PdfReader

    assert len(PdfReader(str(rendered / "slides.pdf")).pages) == beat_count(rendered)


# -- the page in a browser --------------------------------------------------------------------

@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
def test_page_lists_every_clip_with_loading_videos_and_both_subtitle_tracks(rendered, browser):
    page, requests, errors = open_logged(browser, (rendered / "page" / "lecture.html").as_uri())
    clips = ["TinyBeats", "TinyBeatsTwo", "TinyTrace"]
    assert page.evaluate("Array.from(document.querySelectorAll('section.clip')).map(s => s.id)") == clips
    assert page.evaluate("Array.from(document.querySelectorAll('nav a')).map(a => a.getAttribute('href'))") == \
        [f"#{c}" for c in clips]
    page.wait_for_function("Array.from(document.querySelectorAll('video')).every(v => v.readyState >= 1)")
    assert page.evaluate("Array.from(document.querySelectorAll('video')).map(v => v.error)") == [None] * 3
    page.evaluate("document.querySelectorAll('video').forEach(v => Array.from(v.textTracks).forEach(t => t.mode = 'showing'))")
    page.wait_for_function("Array.from(document.querySelectorAll('track')).every(t => t.readyState === 2)")
    tracks = page.evaluate("""Array.from(document.querySelectorAll('video')).map(v =>
        Array.from(v.querySelectorAll('track')).map(t => [t.srclang, t.track.cues.length, t.track.cues[0].text]))""")
    assert [[t[0] for t in v] for v in tracks] == [["en", "zh"]] * 3
    import srt

    cues = len(list(srt.parse((rendered / "TinyBeats.srt").read_text(encoding="utf-8"))))
    assert tracks[0][0][1:] == [cues, "first, a square"] and tracks[0][1][1:] == [cues, "先画一个正方形"]
    # A cue shows while its time plays.
    page.evaluate("(() => { const v = document.getElementById('v-TinyBeats'); v.currentTime = 0.5; })()")
    page.wait_for_function("document.getElementById('v-TinyBeats').textTracks[1].activeCues.length > 0")
    assert page.evaluate("document.getElementById('v-TinyBeats').textTracks[1].activeCues[0].text") == "先画一个正方形"
    assert errors == []
    assert requests and remote(requests) == []
    page.close()


@pytest.mark.parametrize("fps", [15, 30, 60])
def test_other_language_cues_land_in_their_beats_at_frame_times(tmp_path, fps):
    """Beats start on frames (k / fps s); the .srt rounds to milliseconds, often just before the beat's start.
    Every Chinese cue must still take its own beat's line, for every frame index up to a minute."""
    import random

    import srt

    from narration.beats import Beat, BeatRecord
    from cli.deck import Clip
    from cli.page import subtitles_vtt

    rng = random.Random(fps)
    frames = sorted(rng.sample(range(1, 60 * fps), 40))
    starts = [0, *frames]
    beats = [Beat(index=i, section=i, keys=[f"k{i}"], start=k / fps,
                  end=(starts[i + 1] / fps if i + 1 < len(starts) else 61.0),
                  narration={"en": [f"line {i}"], "zh": [f"第{i}句"]}) for i, k in enumerate(starts)]
    cues = [srt.Subtitle(i, srt.timedelta(seconds=round(b.start, 3)), srt.timedelta(seconds=round(b.end, 3)),
                         f"line {i}") for i, b in enumerate(beats)]
    (tmp_path / "S.srt").write_text(srt.compose(cues), encoding="utf-8")
    clip = Clip("S", tmp_path / "S.mp4", BeatRecord("S", "en", 61.0, beats), {}, {}, tmp_path / "S.srt")
    vtt = subtitles_vtt(clip, "zh")
    assert [line for line in vtt.splitlines() if line.startswith("第")] == [f"第{i}句" for i in range(len(beats))]


def test_a_users_model_title_is_headed_with_the_models_name_as_on_screen(tmp_path):
    """ModelDoesItOnlyCopy shows "Does Net only learn to copy?" (its numbers record "model": "Net"); the page's chapter
    and heading and the deck's slide said "Does {model} only learn to copy?" (a new user's page). A built-in scene's
    title, without the field, is left as it is."""
    from cli.deck import Clip
    from cli.media import scene_title
    from narration.beats import BeatRecord
    from scenes.user_model import ModelDegradation, ModelDoesItOnlyCopy

    def clip(scene, numbers):
        return Clip(scene.__name__, tmp_path / "S.mp4", BeatRecord(scene.__name__, "en", 1.0, []), numbers, {}, None,
                    scene_title(scene))

    assert clip(ModelDoesItOnlyCopy, {"model": "Net"}).heading("en") == "Does Net only learn to copy?"
    assert clip(ModelDegradation, {"model": "resnet18"}).heading("en") == "resnet18 with and without its shortcuts"
    zh = clip(ModelDoesItOnlyCopy, {"model": "Net"}).heading("zh")
    assert "Net" in zh and "{model}" not in zh and "{" not in zh
    from scenes.highway import IdentityHighway

    assert clip(IdentityHighway, {}).heading("en") == IdentityHighway.string("title", "en")


@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
def test_page_tables_and_trace_summary(rendered):
    html = (rendered / "page" / "lecture.html").read_text(encoding="utf-8")
    assert "<code>answer</code></th><td>42</td>" in html  # TinyBeats' number
    summary = json.loads((rendered / "page" / "traces" / "TinyTrace.json").read_text(encoding="utf-8"))
    numbers = json.loads((rendered / "TinyTrace.numbers.json").read_text(encoding="utf-8"))
    assert set(summary["runs"]) == set(numbers["traces"])
    for name, run in summary["runs"].items():
        assert run["digest"] == numbers["traces"][name] and "final_loss" in run["summary"]
    assert 'href="traces/TinyTrace.json"' in html and "<code>steps</code></th><td>20</td>" in html  # typed (cli.params)


def chapter_titles(page_html: str) -> tuple[list[str], list[str]]:
    """(the chapter list's entries, the sections' headings without their numbers) of a lecture page."""
    import re

    nav = re.search(r"<nav>.*?</nav>", page_html, re.S).group(0)
    return (re.findall(r'<li><a href="#\w+">(.*?)</a></li>', nav),
            [re.sub(r"^\d+\. ", "", h) for h in re.findall(r'<section class="clip" id="\w+">\n<h2>(.*?)</h2>', page_html)])


def assert_shows_titles(page_html: str, deck_index: dict, scenes: list[type], lang: str) -> None:
    """The page's chapters and headings and the deck's slides carry each scene's on-screen title in ``lang``
    (its string "title"), never its class name."""
    import html as html_lib

    expected = [s.string("title", lang) for s in scenes]
    nav, headings = chapter_titles(page_html)
    assert [html_lib.unescape(t) for t in nav] == expected and [html_lib.unescape(t) for t in headings] == expected
    assert not {s.__name__ for s in scenes} & {*nav, *headings}, "a class name is used as a title"
    titles = {s.__name__: s.string("title", lang) for s in scenes}
    deck = {slide["scene"]: slide["title"] for slide in deck_index["slides"]}
    assert deck and deck == {name: titles[name] for name in deck}


def _titled_clips(folder: Path, names: list[str], titled: bool = True):
    from cli.deck import load_clip
    from cli.media import load_scene, scene_title

    scenes = [load_scene(*name.split(":")) for name in names]
    return scenes, [load_clip(folder / f"{s.__name__}.mp4", scene_title(s) if titled else None) for s in scenes]


@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
def test_page_and_deck_title_each_scene_as_on_screen_in_both_languages(rendered, tmp_path):
    """`page` and `slides` (the fixture, English) and the same clips written as a Chinese page and deck."""
    from cli.deck import write_html_deck
    from cli.page import write_page

    names = [*SCENES, "cli_scenes:TinyTrace"]
    scenes, clips = _titled_clips(rendered, names)
    deck = json.loads((rendered / "slides" / "beats.json").read_text(encoding="utf-8"))
    assert_shows_titles((rendered / "page" / "lecture.html").read_text(encoding="utf-8"), deck, scenes, "en")
    write_page(clips, tmp_path / "page", "zh")
    write_html_deck(clips[:2], tmp_path / "slides", "zh")
    deck = json.loads((tmp_path / "slides" / "beats.json").read_text(encoding="utf-8"))
    assert_shows_titles((tmp_path / "page" / "lecture.html").read_text(encoding="utf-8"), deck, scenes, "zh")
    assert "圆来了又走 · 1 / 2" in (tmp_path / "slides" / "index.html").read_text(encoding="utf-8")  # speaker notes


@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
def test_the_title_check_fails_on_class_names(rendered, tmp_path):
    """The twin: clips without their titles (the page falls back to class names) fail the check."""
    from cli.page import write_page

    names = [*SCENES, "cli_scenes:TinyTrace"]
    scenes, clips = _titled_clips(rendered, names, titled=False)
    write_page(clips, tmp_path / "page", "en")
    deck = json.loads((rendered / "slides" / "beats.json").read_text(encoding="utf-8"))
    with pytest.raises(AssertionError):
        assert_shows_titles((tmp_path / "page" / "lecture.html").read_text(encoding="utf-8"), deck, scenes, "en")


# -- the page on a 390 px phone ---------------------------------------------------------------

LONG_KEY = "residual_sigmoid_d20.step.199.first_over_last_out_grad_norm"  # GradientFlowOverTraining's longest


def long_keyed_page(folder: Path) -> Path:
    """The page of one tiny clip (PyAV frames, no render) whose number has a key as long as the lecture's longest:
    one unbroken word of 59 characters, wider than a phone's window in the table's monospace."""
    from narration.beats import Beat, BeatRecord
    from cli.deck import load_clip
    from cli.page import write_page

    clips = folder / "clips"
    clips.mkdir()
    BeatRecord("Tiny", "en", 0.4, [Beat(0, ["a"], {"en": ["a line"], "zh": ["一句"]}, 0.0, {}, 0, 0.4)]).write(
        clips / "Tiny.beats.json")
    write_clip(clips / "Tiny.mp4", tiny_frames(6))
    write_clip(clips / "Tiny.beat-00.mp4", tiny_frames(6))
    (clips / "Tiny.numbers.json").write_text(json.dumps({"values": {LONG_KEY: 0.9791}}), encoding="utf-8")
    (clips / "Tiny.mp4.render.json").write_text(json.dumps({"inputs": {"params": {"seeds": "0,1,2,3,4"}}}),
                                                encoding="utf-8")
    write_page([load_clip(clips / "Tiny.mp4", {"en": "Tiny", "zh": "小"})], folder / "page", "en")
    return folder / "page" / "lecture.html"


def test_the_page_links_to_the_explorer_only_when_there_is_one(tmp_path):
    """`render.py page -o OUT` links to OUT/explore/index.html only once `render.py explore` has written it: never
    to a folder nobody wrote (issue 34)."""
    from cli.deck import load_clip
    from cli.page import write_page

    page = long_keyed_page(tmp_path)
    clip = load_clip(tmp_path / "clips" / "Tiny.mp4", {"en": "Tiny", "zh": "小"})
    explorer = tmp_path / "explore" / "index.html"
    write_page([clip], tmp_path / "page", "en", explorer=explorer)
    assert 'class="explore"' not in page.read_text(encoding="utf-8")
    explorer.parent.mkdir()
    explorer.write_text("<!doctype html>", encoding="utf-8")
    write_page([clip], tmp_path / "page", "en", explorer=explorer)
    hrefs = re.findall(r'<a class="explore" href="([^"#]+)#lang=en">', page.read_text(encoding="utf-8"))
    assert hrefs and {(page.parent / h).resolve() for h in hrefs} == {explorer.resolve()}


def sideways(browser, page_file: Path) -> int:
    """By how many px the page is wider than a 390 px phone's window (0: it does not scroll sideways)."""
    page, _, errors = open_logged(browser, page_file.as_uri(), viewport={"width": 390, "height": 844})
    wide, seen = page.evaluate("[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]")
    page.close()
    assert errors == []
    return wide - seen


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_page_does_not_scroll_sideways_on_a_phone(browser, tmp_path):
    page_file = long_keyed_page(tmp_path)
    assert LONG_KEY in page_file.read_text(encoding="utf-8") and sideways(browser, page_file) == 0


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_sideways_check_catches_a_table_outside_its_scroll_box(browser, tmp_path):
    """The page as it was: the numbers table straight in the page, no scroll box of its own."""
    page_file = long_keyed_page(tmp_path)
    text = page_file.read_text(encoding="utf-8")
    assert ".table-wrap { max-width: 100%; overflow-x: auto;" in text
    page_file.write_text(text.replace(".table-wrap { max-width: 100%; overflow-x: auto;", ".table-wrap {"),
                         encoding="utf-8")
    assert sideways(browser, page_file) > 100


# -- bad input and atomic folders -------------------------------------------------------------

def test_slides_without_reveal_is_refused_before_any_render(tmp_path, monkeypatch):
    monkeypatch.setenv("RESIDUAL_REVEAL_DIR", str(tmp_path / "nowhere"))
    result = invoke("slides", *SCENES, "-o", tmp_path / "out")
    assert result.exit_code == 1 and "reveal.js is not installed" in result.output
    assert not (tmp_path / "out").exists()


def test_unknown_deck_format_is_a_usage_error(tmp_path):
    result = invoke("slides", *SCENES, "--format", "mp4", "-o", tmp_path)
    assert result.exit_code == 2 and not any(tmp_path.iterdir())


def test_slides_check_and_a_config_file_written_for_render(tmp_path):
    """--check writes nothing; a [render] table's format = "mp4" (render's) does not break slides."""
    config = tmp_path / "lecture.toml"
    config.write_text('[render]\nformat = "mp4"\nquality = "l"\n', encoding="utf-8")
    result = invoke("slides", *SCENES, "--config", config, "--check", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "check: the input is valid" in result.output and not (tmp_path / "out").exists()


def test_a_failed_build_leaves_the_previous_folder(tmp_path):
    target = tmp_path / "slides"
    with staged_dir(target) as stage:
        (stage / "index.html").write_text("first")
    with pytest.raises(RuntimeError):
        with staged_dir(target) as stage:
            (stage / "index.html").write_text("half")
            raise RuntimeError("stopped")
    assert (target / "index.html").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["slides"]
    # What a process killed mid-build (SIGKILL: no clean-up) leaves is removed by the next build; a live one's stays.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f".slides-{dead.pid}-abc").mkdir()
    (tmp_path / f".slides-{os.getpid()}-live").mkdir()
    with staged_dir(target) as stage:
        (stage / "index.html").write_text("second")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".slides-{os.getpid()}-live", "slides"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_built_folder_has_the_mode_of_a_folder_the_user_makes(tmp_path, umask):
    """Not mkdtemp's 0700: the deck, page and explorer folders are copied to web hosts as they are."""
    previous = os.umask(umask)
    try:
        (tmp_path / "made").mkdir()
        with staged_dir(tmp_path / "page") as stage:
            (stage / "index.html").write_text("page")
    finally:
        os.umask(previous)
    assert (tmp_path / "page").stat().st_mode & 0o777 == (tmp_path / "made").stat().st_mode & 0o777 == 0o777 & ~umask


# -- the notebook -----------------------------------------------------------------------------

@pytest.mark.slow  # a Jupyter kernel and a render.py process: ~11 CPU s, a tenth of this file's default run
def test_notebook_runs_headless_and_shows_a_video(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(ROOT / "notebooks" / "lecture.ipynb", as_version=4)
    (parameters,) = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    # Papermill's convention: a cell after the tagged one overrides its values (here: a tiny scene and run).
    override = nbformat.v4.new_code_cell('SCENE = "cli_scenes:TinyTrace"\nEXPERIMENT = "chain_rule"\n'
                                         f'SETS = {{"steps": 20, "depth": 3}}\nOUTPUT = {str(tmp_path)!r}')
    notebook.cells.insert(notebook.cells.index(parameters) + 1, override)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "plain" in text and "final loss" in text
    videos = [o for o in outputs if "<video" in o.get("data", {}).get("text/html", "")]
    assert len(videos) == 1 and "data:video/mp4;base64," in videos[0]["data"]["text/html"]
    assert (tmp_path / "480p15" / "en" / "TinyTrace.mp4").is_file()


# -- a real lecture scene ---------------------------------------------------------------------

@pytest.mark.xdist_group("present")  # one worker builds the module fixture, not both
@pytest.mark.slow
def test_real_scene_deck_in_the_browser(tmp_path, browser):
    result = invoke("slides", "IdentityHighway", "--set", "steps=30", "--quality", "l", "-o", tmp_path)
    assert result.exit_code == 0, result.output
    folder = tmp_path / "480p15" / "en"
    record = json.loads((folder / "IdentityHighway.beats.json").read_text(encoding="utf-8"))
    page, requests, errors = open_logged(browser, (folder / "slides" / "index.html").as_uri())
    page.wait_for_function("typeof Reveal !== 'undefined' && Reveal.isReady()")
    assert page.evaluate("Reveal.getTotalSlides()") == len(record["beats"]) >= 5
    page.keyboard.press("ArrowRight")
    page.wait_for_function("Reveal.getCurrentSlide().querySelector('video').ended", timeout=30_000)
    assert errors == [] and remote(requests) == []


@given(st.lists(st.text(alphabet="abcdé残差块,", min_size=1, max_size=14), max_size=16).map(" ".join)
       | st.text(alphabet="残差块的梯度", max_size=90), st.integers(min_value=8, max_value=80))
@example(text="a a ,,,aa", limit=8)  # found by the ci profile: the cut at the limit leaves separators to strip
def test_beat_labels_are_cut_at_a_word_and_marked(text, limit):
    """A beat button's label never exceeds the limit, is the text itself when it fits, and otherwise is a prefix
    of the (space-normalised) text ending at a space, or at the limit when the text has no space in its second half
    (less the spaces and separators the cut leaves at its end), followed by an ellipsis."""
    from cli.page import beat_label

    label, flat = beat_label(text, limit), " ".join(text.split())
    assert len(label) <= limit
    if len(flat) <= limit:
        assert label == flat
    else:
        assert label.endswith("…") and flat.startswith(label[:-1])
        if " " in flat[limit // 2:limit]:  # a word boundary in the second half: cut there, never mid-word
            assert flat[len(label) - 1] in " ,;:"
        else:  # cut at the limit, less the separators the cut left at its end ("a a ,,,aa" at 8: "a a…")
            assert label[:-1] == flat[:limit - 1].rstrip(" ,;:")
