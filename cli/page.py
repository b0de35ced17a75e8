"""The lecture page: every clip in order on one static HTML page, with subtitles, numbers, parameters and traces.

Example::

    python render.py page -o out          # out/480p15/en/page/lecture.html; copy the page/ folder to any web server

The folder holds everything the page needs (web-ready videos, WebVTT subtitles in English and Chinese, one
JSON trace summary per clip); it opens from ``file://`` with no network and no framework. Reads what
``render.py render`` wrote; never trains, never draws.
"""

from __future__ import annotations

import base64
import html
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from narration import i18n
from cli.deck import Clip, format_value, staged_dir, web_ready
from cli.media import RenderError
from cli.public import public

__all__ = ["write_page", "subtitles_vtt", "trace_summaries", "LANG_NAMES", "labels"]

LANG_NAMES = {code: language.name for code, language in i18n.LANGUAGES.items()}  # a subtitle track's label


def labels(lang: str) -> dict[str, str]:
    """The page's own words in ``lang``: the catalogs' "Page.<key>" (English where a translation is missing)."""
    return i18n.texts_of(lang, ["Page"])


def _seconds(value: timedelta) -> float:
    return value.total_seconds()


def subtitles_vtt(clip: Clip, lang: str) -> str:
    """WebVTT text of ``clip``'s subtitles in ``lang``. The rendered language comes from the ``.srt`` (webvtt-py);
    the other takes the ``.srt``'s cue times and each beat's narration in that language (from the beat record):
    cue for cue where a beat has as many cues as lines, else one cue over the beat's cues."""
    import srt
    import webvtt

    if clip.subtitles is None:
        return "WEBVTT\n"
    if lang == clip.beats.lang:
        return webvtt.from_srt(str(clip.subtitles)).content
    try:
        cues = list(srt.parse(clip.subtitles.read_text(encoding="utf-8")))
    except (srt.SRTParseError, ValueError) as exc:
        raise RenderError(f"subtitle file {clip.subtitles} is corrupt: {exc}") from None
    beats = clip.beats.beats
    # A cue belongs to the last beat that starts before it (the .srt keeps milliseconds: allow 1.5 ms).
    groups: list[list] = [[] for _ in beats]
    for cue in cues:
        starts = [i for i, beat in enumerate(beats) if beat.start <= _seconds(cue.start) + 0.0015]
        if starts:
            groups[starts[-1]].append(cue)
    captions = []
    for beat, inside in zip(beats, groups):
        lines = beat.lines(lang)
        if not inside or not lines:
            continue
        if len(inside) == len(lines):
            pairs = [(c.start, c.end, line) for c, line in zip(inside, lines)]
        else:
            pairs = [(inside[0].start, inside[-1].end, "\n".join(lines))]
        captions += [webvtt.Caption(_stamp(start), _stamp(end), text) for start, end, text in pairs]
    return webvtt.WebVTT(captions=captions).content


def _stamp(value: timedelta) -> str:
    ms = round(value.total_seconds() * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def trace_summaries(clip: Clip) -> dict[str, Any]:
    """{run name: {"digest", "trace", "meta", "summary"}} of every trace the clip read (from the trace cache), fit to
    publish: "trace" is the cache file's name (``<digest>.npz``), never its folder; paths in "meta" (a ``--trace``
    file, a ``--model`` file) are cut to the file's name (:func:`cli.public.public`)."""
    from simulation.cache import cache_dir
    from simulation.summary import summarize
    from simulation.trace import Trace, TraceError

    out = {}
    for name, digest in sorted(clip.record.get("inputs", {}).get("traces", {}).items()):
        path = cache_dir() / f"{digest}.npz"
        try:
            trace = Trace.load(path)
            out[name] = {"digest": digest, "trace": path.name, "meta": trace.meta.to_dict(),
                         "summary": summarize(trace).to_dict()}
        except (OSError, TraceError, KeyError, IndexError, ValueError, TypeError) as exc:
            out[name] = {"digest": digest, "trace": path.name, "error": f"{type(exc).__name__}: {exc}"}
    return public(out)


def beat_label(text: str, limit: int = 60) -> str:
    """``text`` cut to at most ``limit`` characters for a beat button: at the last space when there is one in
    its second half (English), else at the limit (Chinese has no spaces), with "…" where it was cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    cut = cut if cut >= limit // 2 else limit - 1
    return text[:cut].rstrip(" ,;:") + "…"


def _data_url(text: str, mime: str) -> str:
    return f"data:{mime};charset=utf-8;base64," + base64.b64encode(text.encode("utf-8")).decode("ascii")


def _table(rows: list[tuple[str, str]], empty: str) -> str:
    if not rows:
        return f"<p class=\"muted\">{html.escape(empty)}</p>"
    body = "".join(f"<tr><th><code>{html.escape(k)}</code></th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    # a scroll box of its own: a long dotted key (one unbroken word) must not widen the page on a phone
    return f'<div class="table-wrap" tabindex="0"><table>{body}</table></div>'


_STYLE = """
body { font-family: "Noto Sans", "Noto Sans CJK SC", sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
       background: #111; color: #eee; line-height: 1.45; }
a { color: #56b4e9; } video { width: 100%; background: #000; } .muted { color: #aaa; }
table { border-collapse: collapse; font-size: .9rem; }
.table-wrap { max-width: 100%; overflow-x: auto; margin: .5rem 0 1rem; }
th, td { text-align: left; padding: .15rem .8rem .15rem 0; border-bottom: 1px solid #333; }
section.clip { margin: 2.5rem 0; } nav ol { columns: 2; } .beats button { margin: .1rem; }
"""

_LIGHT = """
body { background: #fff; color: #111; } a { color: #0061a3; } .muted { color: #555; } th, td { border-color: #ccc; }
"""

_SCRIPT = """
// Beat buttons seek their clip; keeps the page free of any framework.
document.querySelectorAll('.beats button').forEach(b => b.addEventListener('click', () => {
  const v = document.getElementById(b.dataset.video); v.currentTime = parseFloat(b.dataset.start); v.play();
}));
"""


def write_page(clips: list[Clip], target: Path, lang: str, light: bool = False,
               explorer: Path | None = None) -> list[Path]:
    """The folder ``target``: ``lecture.html``, ``media/<Scene>.mp4`` (web-ready), ``subtitles/<Scene>.<lang>.vtt``
    for English, Chinese and ``lang`` (also inlined in the page, since browsers refuse ``<track>`` files from ``file://``),
    ``traces/<Scene>.json``. ``light``: dark text on white (for clips rendered with the light theme).
    ``explorer``: the explorer's index.html (``render.py explore``), linked relative to ``target`` from the top
    and from each clip a view of it shows, if that file is there (no link to a folder nobody wrote). Returns the
    files written."""
    from cli.explore import VIEW_SCENES

    if not clips:
        raise RenderError("no clips for the page")
    views = {scene: view for view, scene in VIEW_SCENES.items()}
    explore = (Path(os.path.relpath(Path(explorer).resolve(), Path(target).resolve())).as_posix()
               if explorer is not None and Path(explorer).is_file() else None)
    nav, sections = [], []
    L = {key: html.escape(words) for key, words in labels(lang).items()}
    with staged_dir(target) as stage:
        for sub in ("media", "subtitles", "traces"):
            (stage / sub).mkdir()
        for n, clip in enumerate(clips, 1):
            scene = html.escape(clip.scene)
            web_ready(clip.video, stage / "media" / f"{clip.scene}.mp4")
            tracks = []
            for track_lang in dict.fromkeys(("en", "zh", lang)):
                vtt = subtitles_vtt(clip, track_lang)
                (stage / "subtitles" / f"{clip.scene}.{track_lang}.vtt").write_text(vtt, encoding="utf-8")
                default = " default" if track_lang == lang else ""
                tracks.append(f'<track kind="subtitles" srclang="{track_lang}" label="{LANG_NAMES[track_lang]}"'
                              f' src="{_data_url(vtt, "text/vtt")}"{default}>')
            summary = trace_summaries(clip)
            (stage / "traces" / f"{clip.scene}.json").write_text(
                json.dumps({"scene": clip.scene, "runs": summary}, indent=2, ensure_ascii=False, default=str),
                encoding="utf-8")
            values = clip.numbers.get("values", {})
            inputs = public(clip.record.get("inputs", {}))  # a --trace FILE: its name, not where it lies
            params = [(k, json.dumps(v, ensure_ascii=False)) for k, v in sorted(inputs.get("params", {}).items())]
            params += [(f"{clip.scene}.{k}", json.dumps(v, ensure_ascii=False)) for k, v in sorted(inputs.get("attrs", {}).items())]
            params += [(k, str(inputs[k])) for k in ("quality", "lang") if k in inputs]
            traces = [(name, html.escape(info["digest"])) for name, info in summary.items()]
            beats = "".join(
                f'<button data-video="v-{scene}" data-start="{b.start:.3f}" '
                f'title="{html.escape(b.first_line(lang), quote=True)}">{b.index + 1}. '
                f'{html.escape(beat_label(b.first_line(lang)) or "—")}</button>'
                for b in clip.beats.beats)
            first_line = clip.beats.beats[0].first_line(lang) if clip.beats.beats else ""
            chapter = html.escape(clip.heading(lang))  # the title on screen; the class name stays the anchor
            nav.append(f'<li><a href="#{scene}">{chapter}</a></li>')
            sections.append(
                f'<section class="clip" id="{scene}">\n<h2>{n}. {chapter}</h2>\n'
                f'<video id="v-{scene}" controls preload="metadata" src="media/{scene}.mp4">\n  ' + "\n  ".join(tracks) +
                '\n</video>\n'
                f'<p class="beats">{beats}</p>\n'
                + (f'<p>{html.escape(first_line)}</p>\n' if first_line else "") +
                f'<h3>{L["numbers"]}</h3>\n'
                + _table([(k, format_value(v)) for k, v in sorted(values.items())], L["no_numbers"])
                + f'<h3>{L["params"]}</h3>\n' + _table(params, L["defaults"])
                + ((f'<h3>{L["traces"]}</h3>\n' + _table(traces, "")) if traces else "")
                + f'<p><a class="trace-summary" href="traces/{scene}.json">{L["summary"]}</a> · '
                  f'{L["subtitles"]}: <a href="subtitles/{scene}.en.vtt">English</a>, <a href="subtitles/{scene}.zh.vtt">中文</a>'
                + (f' · <a class="explore" href="{html.escape(explore)}#view={views[clip.scene]}&amp;lang={lang}">'
                   f'{L["explore_clip"]}</a>' if explore and clip.scene in views else "") + '</p>\n'
                '</section>')
        heading = L["title"]
        page = (f'<!doctype html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
                f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{heading}</title>\n'
                f'<link rel="icon" href="data:,">\n<style>{_STYLE}{_LIGHT if light else ""}</style>\n</head>\n<body>\n<h1>{heading}</h1>\n'
                f'<p class="muted">{L["intro"]}</p>\n'
                + (f'<p><a class="explore" href="{html.escape(explore)}#lang={lang}">{L["explore"]}</a></p>\n' if explore else "")
                + f'<nav><h2>{L["chapters"]}</h2><ol>' + "".join(nav) + '</ol></nav>\n' + "\n".join(sections) +
                f'\n<script>{_SCRIPT}</script>\n</body>\n</html>\n')
        (stage / "lecture.html").write_text(page, encoding="utf-8")
    return [target / "lecture.html", target / "media", target / "subtitles", target / "traces"]
