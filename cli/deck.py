"""Slide decks from rendered scenes: one slide per beat, as an offline reveal.js deck, a PPTX or a PDF handout.

Example::

    python render.py slides IdentityHighway ChainRuleProduct --format html -o out   # out/480p15/en/slides/index.html

These read what ``render.py render`` wrote (``<Scene>.beat-NN.mp4``, ``<Scene>.beats.json``, ``<Scene>.numbers.json``,
the render record); they never train and never draw. A deck folder is built beside its final place and
swapped in at the end, so a failed run leaves the previous deck (or none), never half of one.
"""

from __future__ import annotations

import html
import json
import math
import os
import secrets
import shutil
import tempfile
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from cli import INSTALLED
from narration import i18n
from narration.beats import Beat, BeatRecord, BeatRecordError
from cli.media import RECORD_SUFFIX, RenderError, beat_video_name
from simulation.atomic_io import atomic_write

__all__ = ["Clip", "load_clip", "web_ready", "last_frame", "reveal_dir", "write_html_deck", "write_pptx",
           "write_pdf", "beat_notes", "sound_span", "REVEAL_VERSION", "reveal_install", "staged_dir", "format_value",
           "write_deck"]

REVEAL_VERSION = "5.2.1"  # keep in step with web/package.json
_ROOT = Path(__file__).resolve().parent.parent
_REVEAL_FILES = ("dist/reveal.css", "dist/reveal.js", "dist/theme/black.css", "dist/theme/white.css",
                 "dist/theme/fonts", "plugin/notes/notes.js", "LICENSE")


@dataclass
class Clip:
    """One rendered scene and what it recorded: the paths of its files and the parsed records."""

    scene: str
    video: Path  # <Scene>.mp4, the whole scene
    beats: BeatRecord  # <Scene>.beats.json (see narration.beats)
    numbers: dict[str, Any]  # <Scene>.numbers.json
    record: dict[str, Any]  # <Scene>.mp4.render.json: the key and the inputs that made the video
    subtitles: Path | None  # <Scene>.srt, if the scene narrates
    title: dict[str, str] = field(default_factory=dict)  # {lang: on-screen title} (cli.media.scene_title)

    def heading(self, lang: str) -> str:
        """The scene's on-screen title in ``lang`` (its class name only when it has none), with ``{model}`` (a
        user's network: "Does {model} only learn to copy?") the name the scene showed (its numbers' ``model``)."""
        title = self.title.get(lang) or self.scene
        model = self.numbers.get("model") if isinstance(self.numbers, dict) else None
        return title.replace("{model}", model) if isinstance(model, str) else title

    def beat_video(self, index: int) -> Path:
        return self.video.with_name(beat_video_name(self.scene, index, self.video.suffix.lstrip(".")))

    def beat_sound(self, beat: Beat) -> tuple[Path, float, float]:
        """Where a beat's sound is: the whole clip, from the beat's start to its end (seconds)."""
        return self.video, float(beat.start), float(beat.end)


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RenderError(f"{what} {path} is missing; render the scene again") from None
    except (OSError, ValueError) as exc:
        raise RenderError(f"{what} {path} is unreadable ({exc})") from None


def load_clip(video: Path, title: dict[str, str] | None = None) -> Clip:
    """The :class:`Clip` of a rendered ``<Scene>.mp4`` (``title``: {lang: its on-screen title}); RenderError if a
    file it needs is missing or corrupt."""
    scene = video.stem
    try:
        beats = BeatRecord.load(video.with_suffix(".beats.json"))
    except BeatRecordError as exc:
        raise RenderError(f"{exc}; render the scene again") from None
    clip = Clip(scene=scene, video=video, beats=beats,
                numbers=_read_json(video.with_suffix(".numbers.json"), "numbers record"),
                record=_read_json(video.with_name(video.name + RECORD_SUFFIX), "render record"),
                subtitles=video.with_suffix(".srt") if video.with_suffix(".srt").is_file() else None,
                title=dict(title or {}))
    for beat in clip.beats.beats:
        if not clip.beat_video(beat.section).is_file():
            raise RenderError(f"beat video {clip.beat_video(beat.section)} is missing; render {scene} again")
    return clip


# -- media ------------------------------------------------------------------------------------

def web_ready(src: Path, dst: Path, sound: tuple[Path, float, float] | None = None) -> None:
    """Copy the mp4 ``src`` to ``dst`` with its index (``moov``) before the media data (``mdat``), so a
    browser starts playing before the download ends. Streams are copied, not re-encoded (PyAV, ``faststart``).

    ``sound=(video, start, end)``: ``src`` is a beat (Manim saves sections without sound) and gets the sound of
    ``video`` from ``start`` to ``end`` seconds, re-encoded as AAC; nothing is added when ``video`` is silent."""
    import av

    try:
        with av.open(str(src)) as source, av.open(str(dst), mode="w", format="mp4",
                                                  options={"movflags": "+faststart"}) as sink:
            streams = [s for s in source.streams if s.type in ("video", "audio")]
            outs = {s.index: sink.add_stream_from_template(template=s) for s in streams}
            span = sound_span(*sound) if sound is not None and not source.streams.audio else None
            audio = _sound_stream(sink, span) if span is not None else None  # every stream before the first packet
            for packet in source.demux(streams):
                if packet.dts is None:  # the demuxer's flushing packets
                    continue
                packet.stream = outs[packet.stream.index]
                sink.mux(packet)
            if audio is not None:
                _mux_sound(sink, audio, span)
    except av.error.FFmpegError as exc:
        raise RenderError(f"cannot copy {src}: {exc}") from None


def sound_span(video: Path, start: float, end: float):
    """(samples float32 [channels, n], sample rate, layout name) of ``video``'s sound from ``start`` to ``end``
    seconds; None when it has no sound."""
    import av
    import numpy as np

    with av.open(str(video)) as container:
        if not container.streams.audio:
            return None
        stream = container.streams.audio[0]
        rate, layout = stream.codec_context.sample_rate, stream.codec_context.layout.name
        resampler = av.AudioResampler(format="fltp", layout=layout, rate=rate)
        chunks, first = [], None
        for frame in container.decode(stream):
            for plain in resampler.resample(frame):
                if first is None:
                    first = round(float(plain.time or 0.0) * rate)
                chunks.append(plain.to_ndarray())
    if not chunks:
        return None
    samples = np.concatenate(chunks, axis=1)
    lo, hi = (max(0, round(t * rate) - first) for t in (start, end))
    return samples[:, lo:hi].astype(np.float32), rate, layout


def _sound_stream(sink, span):
    from fractions import Fraction

    samples, rate, layout = span
    if samples.shape[1] == 0:
        return None
    stream = sink.add_stream("aac", rate=rate, layout=layout)
    stream.time_base = Fraction(1, rate)
    return stream


def _mux_sound(sink, stream, span) -> None:
    from fractions import Fraction

    import av
    import numpy as np

    samples, rate, layout = span
    step = 1024  # AAC's frame size
    for offset in range(0, samples.shape[1], step):
        chunk = np.ascontiguousarray(samples[:, offset:offset + step])
        if chunk.shape[1] < step:
            chunk = np.pad(chunk, ((0, 0), (0, step - chunk.shape[1])))
        frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout=layout)
        frame.sample_rate, frame.pts, frame.time_base = rate, offset, Fraction(1, rate)
        sink.mux(stream.encode(frame))
    sink.mux(stream.encode(None))


def last_frame(video: Path):
    """The last frame of ``video`` as a PIL RGB image (the handout picture of a beat)."""
    import av

    frame = None
    try:
        with av.open(str(video)) as container:
            for frame in container.decode(video=0):
                pass
    except av.error.FFmpegError as exc:
        raise RenderError(f"cannot read {video}: {exc}") from None
    if frame is None:
        raise RenderError(f"{video} has no frames")
    return frame.to_image().convert("RGB")


@contextmanager
def staged_dir(target: Path) -> Iterator[Path]:
    """A fresh folder beside ``target`` to build in; on success it replaces ``target`` (the old one is removed
    afterwards), on failure it is removed and ``target`` stays as it was. It gets the mode of any folder the user
    makes (0777 filtered by the umask, as simulation.atomic_io.atomic_write's files), not mkdtemp's 0700: a deck,
    page or explorer folder is copied to web hosts as it is."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_stages(target)
    while True:
        stage = target.parent / f".{target.name}-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            stage.mkdir()
            break
        except FileExistsError:
            continue
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}-{os.getpid()}-old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(stage, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _remove_stale_stages(target: Path) -> None:
    """Build folders of ``target`` left by processes that no longer exist (killed with SIGKILL)."""
    from cli.media import pid_alive

    for path in target.parent.glob(f".{target.name}-*"):
        pid = path.name[len(target.name) + 2:].split("-")[0]
        if path.is_dir() and pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


# -- notes ------------------------------------------------------------------------------------

def format_value(value: Any) -> str:
    """A recorded number for notes and tables: 4 significant digits, non-finite values as written."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.4g}" if math.isfinite(value) else str(value)




def beat_notes(beat: Beat, lang: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(narration lines in ``lang``, [(number key, formatted value)]) of one beat: the speaker notes."""
    return beat.lines(lang), [(key, format_value(value)) for key, value in sorted(beat.numbers.items())]


# -- html (reveal.js) -------------------------------------------------------------------------

def reveal_dir() -> Path:
    """reveal.js: ``$RESIDUAL_REVEAL_DIR``, else ``web/node_modules/reveal.js`` as ``bash bootstrap.sh setup``
    installs it (npm, ``web/package.json``) in a checkout, and as a wheel built from such a checkout ships it
    (package data, the same path inside ``residual_lecture/``). RenderError if absent, saying how to get it."""
    root = Path(os.environ.get("RESIDUAL_REVEAL_DIR") or _ROOT / "web" / "node_modules" / "reveal.js")
    how = f"install with: {reveal_install()}"
    try:
        version = json.loads((root / "package.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        raise RenderError(f"reveal.js is not installed at {root}; {how}") from None
    if version != REVEAL_VERSION:
        raise RenderError(f"reveal.js {version} at {root}, this deck needs {REVEAL_VERSION}; {how}")
    return root


def reveal_install() -> str:
    """The command that installs reveal.js: ``npm ci --prefix web`` in a checkout (web/package-lock.json pins it);
    an installed copy (or one pointed elsewhere) gets one with npm and $RESIDUAL_REVEAL_DIR."""
    if INSTALLED or os.environ.get("RESIDUAL_REVEAL_DIR"):
        return (f"npm install --prefix ~/reveal reveal.js@{REVEAL_VERSION} && "
                "export RESIDUAL_REVEAL_DIR=~/reveal/node_modules/reveal.js")
    web = _ROOT / "web"
    with suppress(ValueError):
        web = web.relative_to(Path.cwd())
    npm = "" if shutil.which("npm") else "apt-get install -y --no-install-recommends npm && "
    return f"{npm}npm ci --prefix {web}"


def _copy_reveal(target: Path) -> None:
    source = reveal_dir()
    for name in _REVEAL_FILES:
        src, dst = source / name, target / "reveal" / name.removeprefix("dist/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)


_DECK_STYLE = """
.reveal .slides section { padding: 0; }
.reveal .slides section video { display: block; width: 100%; height: auto; margin: 0; }
"""

_DECK_SCRIPT = """
Reveal.initialize({
  plugins: [RevealNotes], hash: true, controls: true, progress: true, slideNumber: 'c/t',
  autoPlayMedia: false, transition: 'none', width: %(width)d, height: %(height)d, margin: 0.02,
});
// Each slide's video is one beat: it plays from its start when the slide is shown and stops at its end.
// Browsers refuse sound before the first key press or click: the first beat then plays muted, and the
// first key press turns the sound on. The speaker view's preview frames stay still.
function playBeat(slide) {
  const video = slide && slide.querySelector('video');
  if (!video || Reveal.isSpeakerNotes()) return;
  video.currentTime = 0;
  video.play().catch(() => { video.muted = true; video.play().catch(() => {}); });
}
Reveal.on('ready', event => playBeat(event.currentSlide));
Reveal.on('slidechanged', event => {
  if (event.previousSlide) event.previousSlide.querySelectorAll('video').forEach(v => v.pause());
  playBeat(event.currentSlide);
});
const unmute = () => document.querySelectorAll('video').forEach(v => { v.muted = false; });
document.addEventListener('keydown', unmute, {once: true});
document.addEventListener('pointerdown', unmute, {once: true});
"""


def write_html_deck(clips: list[Clip], target: Path, lang: str, theme: str = "black") -> list[Path]:
    """The folder ``target``: ``index.html`` (a slide per beat whose video plays once and stops at the
    beat's end), ``media/`` (web-ready beat videos), ``reveal/`` (reveal.js, copied) and ``beats.json``.
    Opens from ``file://`` with no network. Returns the files written."""
    if not clips:
        raise RenderError("no clips for the deck")
    slides, index = [], []
    width, height = _video_size(clips[0].video)  # reveal.js scales this size to the screen
    with staged_dir(target) as stage:
        _copy_reveal(stage)
        (stage / "media").mkdir()
        for clip in clips:
            for beat in clip.beats.beats:
                name = clip.beat_video(beat.section).name
                web_ready(clip.beat_video(beat.section), stage / "media" / name, clip.beat_sound(beat))
                lines, numbers = beat_notes(beat, lang)
                notes = "".join(f"<p>{html.escape(line)}</p>" for line in lines)
                if numbers:
                    notes += f"<p>{i18n.text(lang, ['Deck'], 'numbers_shown')}</p><ul>" + "".join(
                        f"<li><code>{html.escape(k)}</code> = {html.escape(v)}</li>" for k, v in numbers) + "</ul>"
                notes += (f"<p><small>{html.escape(clip.heading(lang))} · {beat.index + 1} / "
                          f"{len(clip.beats.beats)}</small></p>")
                slides.append(f'<section data-scene="{html.escape(clip.scene)}" data-beat="{beat.index}">\n'
                              f'  <video playsinline preload="auto" src="media/{html.escape(name)}"></video>\n'
                              f'  <aside class="notes">{notes}</aside>\n</section>')
                index.append({"scene": clip.scene, "title": clip.heading(lang), "beat": beat.index, "video": f"media/{name}",
                              "start": beat.start, "end": beat.end, "narration": beat.narration,
                              "numbers": beat.numbers})
        title = i18n.text(lang, ["Page"], "title")
        page = (f'<!doctype html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
                f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{title}</title>\n'
                '<link rel="icon" href="data:,">\n'
                '<link rel="stylesheet" href="reveal/reveal.css">\n'
                f'<link rel="stylesheet" href="reveal/theme/{theme}.css">\n<style>{_DECK_STYLE}</style>\n</head>\n<body>\n'
                '<div class="reveal"><div class="slides">\n' + "\n".join(slides) + '\n</div></div>\n'
                '<script src="reveal/reveal.js"></script>\n<script src="reveal/plugin/notes/notes.js"></script>\n'
                f'<script>{_DECK_SCRIPT % {"width": width, "height": height}}</script>\n</body>\n</html>\n')
        (stage / "index.html").write_text(page, encoding="utf-8")
        (stage / "beats.json").write_text(json.dumps({"slides": index}, indent=2, ensure_ascii=False), encoding="utf-8")
    return [target / "index.html", target / "beats.json", target / "media", target / "reveal"]


def _video_size(video: Path) -> tuple[int, int]:
    import av

    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        return stream.codec_context.width, stream.codec_context.height


# -- pptx, pdf --------------------------------------------------------------------------------

def write_pptx(clips: list[Clip], target: Path, lang: str) -> Path:
    """``target`` (.pptx): one slide per beat, its video embedded (poster: the beat's last frame) and the
    narration and numbers as the slide's notes (python-pptx)."""
    from pptx import Presentation
    from pptx.util import Emu

    prs = Presentation()
    width, height = _video_size(clips[0].video)
    prs.slide_width = Emu(12192000)  # 13.333 in: 16:9
    prs.slide_height = Emu(round(12192000 * height / width))
    blank = prs.slide_layouts[6]
    with tempfile.TemporaryDirectory(prefix=".pptx-", dir=target.parent) as tmp:
        for clip in clips:
            for beat in clip.beats.beats:
                video = Path(tmp) / clip.beat_video(beat.section).name
                web_ready(clip.beat_video(beat.section), video, clip.beat_sound(beat))
                poster = video.with_suffix(".png")
                last_frame(video).save(poster)
                slide = prs.slides.add_slide(blank)
                slide.shapes.add_movie(str(video), 0, 0, prs.slide_width, prs.slide_height,
                                       poster_frame_image=str(poster), mime_type="video/mp4")
                lines, numbers = beat_notes(beat, lang)
                notes = "\n".join(lines) or f"({clip.heading(lang)})"
                if numbers:
                    notes += f"\n\n{i18n.text(lang, ['Deck'], 'numbers_shown')}\n" + "\n".join(f"{k} = {v}" for k, v in numbers)
                slide.notes_slide.notes_text_frame.text = notes
        with atomic_write(target, suffix=".pptx") as out:
            prs.save(str(out))
    return target


def write_pdf(clips: list[Clip], target: Path) -> Path:
    """``target`` (.pdf): the last frame of each beat, one page each (handouts)."""
    frames = [last_frame(clip.beat_video(beat.section)) for clip in clips for beat in clip.beats.beats]
    if not frames:
        raise RenderError("no beats to put in the handout")
    with atomic_write(target, suffix=".pdf") as out:
        frames[0].save(str(out), format="PDF", save_all=True, append_images=frames[1:], resolution=96.0)
    return target


def write_deck(clips: list[Clip], folder: Path, lang: str, deck_format: str, light: bool = False) -> list[Path]:
    """The deck of ``render.py slides`` in ``folder``: ``slides/index.html`` (reveal.js, its white theme when
    ``light``), ``slides.pptx`` or the ``slides.pdf`` handout, by ``deck_format`` (cli.params.DECK_FORMATS);
    the files written."""
    if deck_format == "html":
        return write_html_deck(clips, folder / "slides", lang, theme="white" if light else "black")
    if deck_format == "pptx":
        return [write_pptx(clips, folder / "slides.pptx", lang)]
    return [write_pdf(clips, folder / "slides.pdf")]
