"""LectureScene: the base of every scene: language, traces, narration, numbers JSON, citations.

Example::

    manim -ql scenes/highway.py IdentityHighway          # English, dark theme, default parameters
    RESIDUAL_LANG=zh RESIDUAL_THEME=light manim -ql scenes/highway.py IdentityHighway

A subclass sets ``experiment`` (a name from :mod:`simulation.experiments`); its words are the catalog entries
``"<Class>.<key>"`` (``locale/``, :mod:`narration.i18n`), read with :meth:`LectureScene.t`. ``setup`` loads the
experiment's traces from the cache, training missing runs in a subprocess, so a scene never imports torch; a
variant that sets ``trace_files`` (``{RunKey or run name: path}``) reads those files instead (tests use small
committed traces). ``self.runs`` is
every run (``{RunKey: Trace}``), ``self.seed_traces`` the same as ``{seed: {name: Trace}}`` in the order of the
experiment's ``seeds``, and ``self.traces`` the first seed's ``{name: Trace}``. Every number drawn goes through
:meth:`LectureScene.number`, which records it; the record is written as ``<video>.numbers.json``.
:meth:`LectureScene.narrate` times each line: spoken with ``voice`` (:mod:`narration`), or held long
enough to read; the scene waits before the next line until the current one is over.
"""

from __future__ import annotations

import json
import math
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Mapping

import numpy as np
from manim import DOWN, DR, UL, UP, Mobject, Scene, Text, config

from simulation.cache import get_traces
from simulation.experiments import scene_runs
from simulation.runkeys import RunKey, by_seed, key_texts
from simulation.atomic_io import atomic_write
from simulation.trace import Trace

from narration import i18n
from narration.beats import BEAT_LANGS, jsonable
from scenes.kit.beats import BeatLog
import narration as speech
from narration.audio import build_track
from narration.mux import mux_audio, video_duration
from scenes.kit import encoder, segment_key
from scenes.kit.frame_cost import keep_renderer_bases, parse_each_path_once, share_svg_paths
from scenes.kit.helpers import compare, fill_missing_arrays, fill_required_arrays, is_missing, percent_value
from scenes.kit.fit import citation_room, fit_texts
from scenes.kit.layout import (EDGE_BUFF, MIN_GAP, adopt_text_sizes, bounding_box, layout_problems, line_width,
                               text_mobjects)
from scenes.kit.style import PALETTE, SIZE_SMALL, SIZE_TITLE, format_number, make_text, make_wrapped_text, set_language
from scenes.kit.theme import set_theme

__all__ = ["LectureScene"]


def _frames_of(scene) -> int:
    """Frames Manim's Cairo renderer writes for the scene's last ``play``: ``int(d / dt)`` for a static
    wait, one per ``np.arange(0, d, dt)`` step for an animation (``d`` its run time, ``dt`` = 1/fps)."""
    dt = 1 / config.frame_rate
    if scene.is_current_animation_frozen_frame():
        return int(scene.duration / dt)
    return len(np.arange(0, scene.duration, dt))


def _add_narration(scene) -> Path | None:
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


def _load_files(files: dict[RunKey | str, str]) -> dict[RunKey, Trace]:
    """``{RunKey: Trace}`` of ``trace_files``; a run name's key takes the seed its trace was trained with."""
    out = {}
    for key, path in files.items():
        trace = Trace.load(path)
        out[key if isinstance(key, RunKey) else RunKey(key, int(trace.meta.seed))] = trace
    return out


class LectureScene(Scene):
    """Base scene. Class attributes are the knobs; variants are subclasses that override them."""

    experiment: str | None = None  # simulation experiment whose traces this scene shows
    params: dict[str, Any] = {}  # typed overrides for that experiment (--set key=value, parsed by cli.params)
    experiment_defaults: dict[str, Any] = {}  # this scene's defaults for its experiment's parameters, under params
    lang: str | None = None  # "en" | "zh"; None: $RESIDUAL_LANG or "en"
    theme: str | None = None  # "dark" | "light" (scenes/kit/theme.py); None: $RESIDUAL_THEME or "dark"
    text_overrides: dict[str, str] = {}  # {"Owner.key": text} for this render (--text, [text.Owner] in --config)
    # bring texts that reach past the frame inside it (scenes.kit.fit); None: for words the layouts were not drawn
    # for (a language other than en and zh, or text_overrides), so that the English and Chinese frames stay as drawn
    fit_words: bool | None = None
    chapter: str | None = None  # an optional chapter (scenes.CHAPTERS) that `render.py all` renders only when asked
    check_layout: bool = False  # record texts outside the frame or over each other after every step
    # RunKey -> .npz path, used instead of the cache (tests); a run name stands for that run at its trace's seed
    trace_files: dict[RunKey | str, str] | None = None
    # arrays every run must hold for this scene (names of simulation.trace.ARRAY_AXES, which gives their axes);
    # one a trace lacks is filled with NaN and drawn as a gap (scenes.kit.helpers.fill_required_arrays)
    required_arrays: tuple[str, ...] = ()
    voice: str | None = None  # a name from narration.VOICES; None: $RESIDUAL_VOICE, or silent

    def setup(self) -> None:
        encoder.install()  # a held frame is converted to yuv420p once, not once per copy (scenes/kit/encoder.py)
        segment_key.install()  # each play's segment key in one pass, not Manim's JSON (scenes/kit/segment_key.py)
        share_svg_paths()  # a copied glyph shares its parsed SVG path (scenes/kit/frame_cost.py)
        parse_each_path_once()  # svgelements parses each glyph's path string once per process (same points)
        keep_renderer_bases()  # tempconfig's renderer, set again unchanged, leaves ~300 classes' bases alone
        self.lang = self.lang or os.environ.get("RESIDUAL_LANG", "en")
        set_language(self.lang)
        self.theme = set_theme(self.theme).name
        self.camera.background_color = PALETTE["background"]
        # values: key -> the number shown (null when missing); missing: keys shown as a gap, in order.
        self.numbers: dict[str, Any] = {"scene": type(self).__name__, "lang": self.lang, "values": {},
                                        "missing": []}
        if self.text_overrides:  # your own words (--text, [text.Owner]): the numbers JSON says which were shown
            self.numbers["texts"] = dict(sorted(self.text_overrides.items()))
        self.runs: dict[RunKey, Trace] = {}
        self.layout_log: list[str] = []
        self.fitted: list[str] = []  # what scenes.kit.fit did to texts that did not fit (one line each)
        if self.fit_words is None:
            self.fit_words = self.lang not in BEAT_LANGS or bool(self.text_overrides)
        self.beats = BeatLog(self)
        self.voice = self.voice or os.environ.get("RESIDUAL_VOICE") or None
        self.spoken: list[tuple[float, np.ndarray]] = []  # (start s, samples) of every line spoken
        self._line_end = 0.0  # scene time (s) before which the next line may not start
        if self.experiment and self.trace_files is not None:
            self.runs = _load_files(self.trace_files)
        elif self.experiment:
            self.params, runs = scene_runs(self.experiment, self.experiment_defaults, self.params)
            traces = get_traces(list(runs.values()), in_subprocess=True, log_hits=False)
            self.runs = dict(zip(runs, traces))
        self.seed_traces: dict[int, dict[str, Trace]] = by_seed(self.runs)
        self.traces: dict[str, Trace] = dict(next(iter(self.seed_traces.values()), {}))  # the first seed's
        self.run_texts = key_texts(self.runs)  # the keys as the numbers JSON writes them
        self._trace_has_nan = False
        if self.runs:
            absent = fill_missing_arrays(self.runs)  # drawn as gaps, like NaN
            for run, keys in fill_required_arrays(self.runs, self.required_arrays).items():
                absent.setdefault(run, []).extend(keys)  # what no sibling run could say was missing
            if absent:
                self.numbers["missing_arrays"] = {self.run_texts[run]: keys for run, keys in absent.items()}
            self._trace_has_nan = any(np.isnan(a).any() for t in self.runs.values() for a in t.arrays.values()
                                      if a.dtype.kind == "f")
        if self.experiment:
            self.numbers["experiment"] = self.experiment
            self.numbers["traces"] = {self.run_texts[key]: t.meta.digest for key, t in self.runs.items()}

    # -- text -------------------------------------------------------------------------------
    @classmethod
    def string(cls, key: str, lang: str = "en", overrides: Mapping[str, str] | None = None) -> str:
        """The unformatted text of ``key`` in ``lang``: looked up along the class's MRO (``Scene.key``, then its
        bases' ... ``LectureScene.key``), where an override ``"Owner.key"`` (``--text``), a class's own inline
        ``strings`` (a scene outside the lecture: tests, a user's module) or the catalogs (:mod:`narration.i18n`: the
        language's entry, else the English) answer first. KeyError if no owner has ``key``."""
        overrides = overrides or {}
        for owner in cls.__mro__:
            name = f"{owner.__name__}.{key}"
            if name in overrides:
                return overrides[name]
            inline = vars(owner).get("strings") or {}
            if key in inline:
                return inline[key].get(lang) or inline[key]["en"]
            if i18n.lookup([owner.__name__], key):
                return i18n.text(lang, [owner.__name__], key)
        raise KeyError(f"{cls.__name__} has no string {key!r}")

    def t(self, key: str, **fmt: Any) -> str:
        """The string ``key`` in the scene's language, formatted with ``fmt`` (plural forms: i18n.format_text)."""
        return i18n.format_text(self.string(key, self.lang, self.text_overrides), self.lang, **fmt)

    def text(self, key: str, size: float = 28, color=None, **fmt: Any) -> Text:
        return make_text(self.t(key, **fmt), size=size, color=color)

    def wrapped(self, key: str, size: float = 28, color=None, width: float | None = None, **fmt: Any):
        """The string ``key`` as lines no wider than ``width`` (default: the frame less its margins) at ``size``,
        never scaled down (scenes.kit.style.make_wrapped_text; the legibility floor of scenes/kit/layout.py)."""
        return make_wrapped_text(self.t(key, **fmt), line_width() if width is None else width, size=size, color=color)

    def heading(self, key: str, size: float = 28, color=None, share: int = 2, **fmt: Any):
        """The string ``key`` as one text if it fits its ``share`` of the line (the frame less its margins, less
        :data:`~scenes.kit.layout.MIN_GAP` between neighbours), else as lines that do (:meth:`wrapped`): a chart's
        heading beside another chart's, whatever the language. The lecture's own words fit: frame for frame."""
        text = self.text(key, size=size, color=color, **fmt)
        room = (line_width() - (share - 1) * MIN_GAP) / share
        return text if text.width <= room else self.wrapped(key, size=size, color=color, width=room, **fmt)

    def title(self, key: str, **fmt: Any) -> Text:
        return self.text(key, size=SIZE_TITLE, **fmt).to_edge(UP, buff=0.35)

    def cite(self, source: str) -> Text:
        """A citation in the bottom-right corner (paper, figure), inside the margin; added to the scene."""
        label = self.cite_label(source)
        self.add(label)
        return label

    def above_citation(self, mob: Mobject, source: str, gap: float = MIN_GAP) -> Mobject:
        """``mob`` (placed at the bottom of the frame, e.g. a verdict) raised until each of its texts that overlaps
        the citation ``source`` in x is at least ``gap`` (scene units) above it, where it is closer: the citation
        then never reads as one more line of the text (the layout check's rule). Returns ``mob``."""
        cite_left, _, _, cite_top = bounding_box(self._citation(source))
        lows = [bounding_box(text)[2] for text in text_mobjects([mob]) if bounding_box(text)[1] > cite_left]
        if lows and min(lows) < cite_top + gap:
            mob.shift(UP * (cite_top + gap - min(lows)))
        return mob

    def _citation(self, source: str) -> Text:
        """:meth:`cite_label` of ``source``, made once per scene (asked before every animation when words are fitted)
        and never added: where the citation will be."""
        made = self.__dict__.setdefault("_citations", {})
        if source not in made:
            made[source] = self.cite_label(source)
        return made[source]

    @staticmethod
    def cite_label(source: str) -> Text:
        """The citation :meth:`cite` adds, placed but not added (a layout measures the room it leaves)."""
        label = make_text(source, size=SIZE_SMALL, color=PALETTE["muted"]).to_corner(DR, buff=[EDGE_BUFF, 0.3, 0])
        label.citation = True  # the layout check keeps other texts at least MIN_GAP above and below it
        return label

    def narrate(self, key: str, duration: float = 2.0, **fmt: Any) -> None:
        """Subcaption (written to the .srt beside the video) starting now; the scene holds it at least
        ``duration`` seconds.

        With a voice the line is spoken and its cue is the spoken interval; without one the cue lasts
        as long as reading takes (``narration.READING_RATE``: 17 characters/s English, 9 Chinese ...).
        The line before is waited out first, so lines never overlap and never run faster than speech.
        Each call also starts a beat (a slide stop; see :mod:`scenes.kit.beats`)."""
        text = self.t(key, **fmt)
        self.finish_narration()
        self.beats.begin(key, {lang: i18n.format_text(self.string(key, lang, self.text_overrides if lang == self.lang
                                                                  else None), lang, **fmt)
                               for lang in dict.fromkeys((*BEAT_LANGS, self.lang))})
        if self.voice:
            audio = speech.speak(text, self.voice)
            shown = len(audio) / speech.SAMPLE_RATE
            self.spoken.append((self.time, audio))
            hold = max(duration, shown + speech.LINE_GAP)
        else:
            shown = hold = max(duration, speech.reading_time(text, self.lang))
        self.add_subcaption(text, duration=shown)
        self._line_end = self.time + hold

    def finish_narration(self) -> None:
        """Wait (whole frames) until the current line is spoken or readable; called before each line and at the end."""
        remaining = self._line_end - self.time
        if remaining > 1e-6:
            frames = math.ceil(remaining * config.frame_rate - 1e-6)
            self.wait(frames / config.frame_rate + 1e-6)

    # -- layout -----------------------------------------------------------------------------
    def play(self, *args: Any, **kwargs: Any) -> None:
        start = self.renderer.time
        if self.fit_words:
            self._fit(args)
        super().play(*args, **kwargs)
        # Manim's clock advances by the frames written, but by the run time when a segment comes from
        # its cache (or is skipped): set it to the frames either way, so subtitles and speech land on the
        # same frame in a fresh, a cached and a dry run.
        self.renderer.time = start + _frames_of(self) / config.frame_rate
        if self.check_layout:
            adopt_text_sizes(self.animations or ())  # a Transform's text takes its target's size (scenes/kit/layout.py)
        self._check_layout()

    def wait(self, *args: Any, **kwargs: Any) -> None:
        if self.fit_words:
            self._fit(())
        super().wait(*args, **kwargs)
        self._check_layout()

    def _fit(self, animations: tuple) -> None:
        """Texts that will be on screen once ``animations`` have run brought inside the frame and apart
        (scenes.kit.fit.fit_texts; those not drawn yet give way first); notes in ``self.fitted`` and the numbers
        JSON (``"fitted"``)."""
        drawn = self.__dict__.get("_drawn_texts")
        source = getattr(self, "_source", None)  # the citation to come: its corner and the gaps about it kept free
        reserved = [citation_room(self._citation(source))] if isinstance(source, str) and source else []
        notes = [n for n in fit_texts(self.mobjects, config.frame_width, config.frame_height, animations, drawn,
                                      reserved) if n not in self.fitted]
        if notes:
            self.fitted += notes
            self.numbers["fitted"] = list(self.fitted)

    def _check_layout(self) -> None:
        self._note_gaps()
        if self.fit_words:  # the texts drawn now: the next fit moves those first that are not (scenes.kit.fit)
            self._drawn_texts = text_mobjects(self.mobjects)
        if self.check_layout:
            found = layout_problems(self.mobjects, config.frame_width, config.frame_height)
            self.layout_log += [p for p in found if p not in self.layout_log]

    def _note_gaps(self) -> None:
        """Count the labelled gaps on screen (a GapMark in a chart, or a text that says "missing" where
        a number would be); the numbers JSON says how many were shown."""
        if not (self.numbers["missing"] or self.numbers.get("missing_arrays") or self._trace_has_nan):
            return  # nothing is missing: no gap can be on screen, and the walk is skipped
        from scenes.kit.widgets import GapMark

        word = self.t("missing")
        seen = self.__dict__.setdefault("_gaps_seen", set())
        for mob in self.mobjects:
            for m in mob.get_family():
                if isinstance(m, GapMark) or (isinstance(m, Text) and word in getattr(m, "text", "")):
                    seen.add(id(m))
                    what = getattr(m, "what", "")
                    if what and what not in self.numbers.setdefault("gaps", []):
                        self.numbers["gaps"].append(what)  # e.g. "post_ln.loss_curve[5..14]"
        self.numbers["gaps_shown"] = len(seen)

    # -- numbers ----------------------------------------------------------------------------
    def number(self, key: str, value: float | None, digits: int = 2) -> str:
        """Format ``value`` for the screen and record it under ``key`` in the numbers JSON.

        A missing value (None or NaN) is recorded as null, its key listed under ``missing``, and shown
        as the word "missing"; inf is recorded as "inf" and shown as such. Inside :meth:`unrecorded` it is only
        formatted."""
        if getattr(self, "_unrecorded", False):
            return self.t("missing") if is_missing(value) else format_number(float(value), digits)
        if is_missing(value):
            self.numbers["values"][key] = None
            if key not in self.numbers["missing"]:
                self.numbers["missing"].append(key)
            self.beats.record_number(key, None)
            return self.t("missing")
        value = float(value)
        self.numbers["values"][key] = value if math.isfinite(value) else str(value)
        self.beats.record_number(key, self.numbers["values"][key])
        return format_number(value, digits)

    @contextmanager
    def unrecorded(self):
        """Numbers formatted inside (:meth:`number`) are shown but not recorded: a text made early to measure the
        room it needs is made again, and recorded, in the beat that shows it."""
        self._unrecorded = True
        try:
            yield
        finally:
            self._unrecorded = False

    def render(self, preview: bool = False) -> bool:
        rerun = super().render(preview)
        if self.spoken and not config.dry_run and not rerun:
            _add_narration(self)
        return rerun

    def percent(self, key: str, fraction: float | None, digits: int = 2) -> str:
        """``fraction`` shown as a percentage; the numbers JSON records it under ``key + "_pct"``."""
        shown = self.number(f"{key}_pct", None if is_missing(fraction) else percent_value(fraction), digits)
        return shown if is_missing(fraction) else shown + "%"

    def verdict_key(self, a: float, b: float, if_greater: str, otherwise: str, margin: float = 0.0) -> str:
        """The string key of a verdict on ``a > b + margin``: ``if_greater``, ``otherwise``, or
        ``"no_verdict"`` when either value is missing."""
        outcome = compare(a, b, margin)
        return "no_verdict" if outcome is None else (if_greater if outcome else otherwise)

    def tear_down(self) -> None:
        self.finish_narration()
        if config.dry_run or not getattr(self.renderer, "file_writer", None):
            return
        movie = getattr(self.renderer.file_writer, "movie_file_path", None)
        target = Path(movie) if movie else None
        if target is None or not str(target):
            image = getattr(self.renderer.file_writer, "image_file_path", None)
            target = Path(image) if image else None
        if target is None:
            return
        path = target.with_suffix(".numbers.json")
        with atomic_write(path) as tmp:
            tmp.write_text(json.dumps(self.numbers, indent=2, sort_keys=True, default=jsonable))
        if movie:
            self.beats.record().write(target.with_suffix(".beats.json"))
