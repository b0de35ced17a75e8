"""The beat record (narration/beats.py): one type written by the scenes and read by the deck and the page.

A real record of main's render (tests/data/beats/IdentityHighway.beats.json, rendered at 2e5c8ad) reads and writes
back byte for byte; any record survives the round trip (Hypothesis); hostile JSON is refused with
BeatRecordError and nothing else; the deck and the page, built from the one loaded record, show its beats.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from narration.beats import BEATS_VERSION, Beat, BeatRecord, BeatRecordError

from support import tiny_frames, write_clip

DATA = Path(__file__).resolve().parent / "data" / "beats"

_text = st.text(alphabet="ab 残差,é\"\\\n", max_size=12)
_number = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["inf", "-inf"]))


@st.composite
def records(draw) -> BeatRecord:
    n = draw(st.integers(1, 4))
    starts = sorted(draw(st.lists(st.floats(0, 100, allow_nan=False), min_size=n, max_size=n)))
    beats = []
    for i, start in enumerate(starts):
        keys = draw(st.lists(st.text("abc_", min_size=1, max_size=5), max_size=3))
        beats.append(Beat(index=i, keys=keys, start=start, section=i,
                          end=starts[i + 1] if i + 1 < n else 100.0,
                          narration={lang: [draw(_text) for _ in keys] for lang in ("en", "zh")},
                          numbers=draw(st.dictionaries(st.text("xyz.", min_size=1, max_size=6), _number, max_size=3))))
    return BeatRecord(scene=draw(st.sampled_from(["IdentityHighway", "S"])), lang=draw(st.sampled_from(["en", "zh"])),
                      duration=100.0, beats=beats)


def test_mains_record_reads_and_writes_back_byte_for_byte(tmp_path):
    """The layout main's scenes wrote is the layout this code writes: the same bytes back."""
    source = DATA / "IdentityHighway.beats.json"
    record = BeatRecord.load(source)
    assert record.scene == "IdentityHighway" and len(record.beats) == 7 and record.version == BEATS_VERSION
    assert record.beats[1].numbers == {"projection.d_in": 32.0, "projection.d_out": 64.0, "projection.params": 2048.0}
    assert [b.section for b in record.beats] == list(range(7)) and record.beats[-1].end == record.duration
    assert record.write(tmp_path / "back.json").read_bytes() == source.read_bytes()


@given(records())
def test_any_record_survives_the_round_trip(record):
    text = json.dumps(record.to_dict(), ensure_ascii=False)
    assert BeatRecord.from_dict(json.loads(text)) == record


def test_writing_is_atomic_and_utf8(tmp_path, monkeypatch):
    monkeypatch.setenv("LC_ALL", "C")  # the file's encoding must not follow the locale
    record = BeatRecord("S", "zh", 1.0, [Beat(0, ["k"], {"en": ["x"], "zh": ["残差"]}, 0.0, {}, 0, 1.0)])
    path = record.write(tmp_path / "S.beats.json")
    assert "残差" in path.read_text(encoding="utf-8") and [p.name for p in tmp_path.iterdir()] == ["S.beats.json"]


_BEAT = {"index": 0, "keys": ["a"], "narration": {"en": ["A"], "zh": ["甲"]}, "start": 0.0, "numbers": {},
         "section": 0, "end": 1.0}
_RECORD = {"version": BEATS_VERSION, "scene": "S", "lang": "en", "duration": 1.0, "beats": [_BEAT]}


@pytest.mark.parametrize("change, says", [
    ({"version": 2}, "layout version 2"),
    ({"beats": "no"}, "beats must be list"),
    ({"duration": True}, "duration must be float"),
    ({"extra": 1}, "fields"),
    ({"beats": [{**_BEAT, "start": "0"}]}, "start must be float"),
    ({"beats": [{**_BEAT, "index": 1.5}]}, "index must be int"),
    ({"beats": [{**_BEAT, "keys": [1]}]}, "must be text"),
    ({"beats": [{**_BEAT, "narration": {"en": ["A"]}}]}, "one line per key"),
    ({"beats": [{**_BEAT, "narration": {"en": [], "zh": []}}]}, "one line per key"),
    ({"beats": [[]]}, "not an object"),
])
def test_a_bad_record_is_refused_saying_why(tmp_path, change, says):
    path = tmp_path / "S.beats.json"
    path.write_text(json.dumps({**_RECORD, **change}), encoding="utf-8")
    with pytest.raises(BeatRecordError, match=says):
        BeatRecord.load(path)
    assert BeatRecord.from_dict(_RECORD).beats[0].lines("zh") == ["甲"]  # the twin: the unchanged record reads


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=12)


@given(_json, st.sampled_from(sorted(_RECORD)), st.sampled_from(sorted(_BEAT)), _json)
def test_hostile_json_is_a_beat_record_error_and_nothing_else(data, field, beat_field, value):
    """Any JSON at all, and the good record with one field (of the record or of its beat) set to any JSON value."""
    for candidate in (data, {**_RECORD, field: value}, {**_RECORD, "beats": [{**_BEAT, beat_field: value}]}):
        try:
            record = BeatRecord.from_dict(candidate)
        except BeatRecordError:
            continue
        text = json.dumps(record.to_dict())  # a NaN among the numbers is no equal of itself: compare the text
        assert json.dumps(BeatRecord.from_dict(json.loads(text)).to_dict()) == text


def test_missing_and_corrupt_files_say_which_file(tmp_path):
    with pytest.raises(BeatRecordError, match=r"S\.beats\.json is missing"):
        BeatRecord.load(tmp_path / "S.beats.json")
    (tmp_path / "S.beats.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(BeatRecordError, match="is unreadable"):
        BeatRecord.load(tmp_path / "S.beats.json")


# -- one type for the deck and the page ---------------------------------------------------------

def test_the_deck_and_the_page_hold_the_one_beat_type():
    from cli.deck import Clip, beat_notes
    from cli.page import subtitles_vtt

    assert typing.get_type_hints(Clip)["beats"] is BeatRecord
    assert typing.get_type_hints(beat_notes)["beat"] is Beat
    assert typing.get_type_hints(subtitles_vtt)["clip"] is Clip


def test_deck_and_page_show_the_beats_of_the_loaded_record(tmp_path):
    """A clip folder made here (tiny PyAV videos, no render): both outputs carry each beat of the one record."""
    from cli.deck import load_clip, write_html_deck
    from cli.page import write_page

    folder = tmp_path / "clips"
    folder.mkdir()
    beats = [Beat(0, ["a"], {"en": ["first line"], "zh": ["第一句"]}, 0.0, {"answer": 42.0}, 0, 0.2),
             Beat(1, ["b", "c"], {"en": ["second", ""], "zh": ["第二句", "第三句"]}, 0.2, {}, 1, 0.4)]
    BeatRecord("Tiny", "en", 0.4, beats).write(folder / "Tiny.beats.json")
    write_clip(folder / "Tiny.mp4", tiny_frames(6))
    for beat in beats:
        write_clip(folder / f"Tiny.beat-{beat.index:02d}.mp4", tiny_frames(3))
    (folder / "Tiny.numbers.json").write_text(json.dumps({"values": {"answer": 42.0}}), encoding="utf-8")
    (folder / "Tiny.mp4.render.json").write_text(json.dumps({"inputs": {}}), encoding="utf-8")
    clip = load_clip(folder / "Tiny.mp4", {"en": "Tiny title", "zh": "小标题"})
    assert clip.beats == BeatRecord.load(folder / "Tiny.beats.json") and clip.beats.beats == beats

    write_html_deck([clip], tmp_path / "slides", "zh")
    slides = json.loads((tmp_path / "slides" / "beats.json").read_text(encoding="utf-8"))["slides"]
    assert [(s["beat"], s["start"], s["end"], s["narration"], s["numbers"]) for s in slides] == [
        (b.index, b.start, b.end, b.narration, b.numbers) for b in beats]
    deck = (tmp_path / "slides" / "index.html").read_text(encoding="utf-8")
    assert "<p>第二句</p><p>第三句</p>" in deck and "<code>answer</code> = 42" in deck and "小标题 · 2 / 2" in deck

    write_page([clip], tmp_path / "page", "en")
    page = (tmp_path / "page" / "lecture.html").read_text(encoding="utf-8")
    assert 'data-start="0.000" title="first line">1. first line</button>' in page
    assert 'data-start="0.200" title="second">2. second</button>' in page and "<p>first line</p>" in page
