"""Rendering for the command line: input checks, render keys, private media folders, atomic placement, concat.

Example::

    python render.py render IdentityHighway --format webm --transparent --output out

Finished files appear at their final paths only by ``os.replace`` from a temporary file in the same
folder, so an interrupted run (Ctrl-C, a kill) never leaves a truncated file where a finished one belongs.
Manim renders into a private temporary media folder. Its segment, Tex and text caches are linked in from
a shared cache (``$RESIDUAL_CACHE/manim``) before the render and the new entries are promoted back, one
atomic rename each, only after the render succeeded: Manim's own cache serves partial re-renders and
never sees a file that a killed process left half-written. Beside each output a ``<file>.render.json``
records the key of everything that made it (scene source, parameters, trace digests, quality, language,
theme, format); a re-run whose key matches renders nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import traceback
import unicodedata
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from io import BytesIO
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

from cli import INSTALLED, ROOT
from cli.jobs import ENCODER_THREADS
from simulation.cache import cache_dir
from simulation.atomic_io import atomic_write, shown_path

__all__ = [
    "RenderError", "RenderJob", "check_voice", "check_output_dir", "source_digest",
    "quality_dir", "up_to_date", "render_job", "beat_video_name", "BEAT_FORMATS", "scene_config", "concat_lecture",
    "load_scene", "media_cache_dir", "place_files", "RECORD_SUFFIX", "pid_alive", "scene_title",
]

KEY_VERSION = 2  # bump when the meaning of a render key changes (2: beats, a video per beat)
RECORD_SUFFIX = ".render.json"
TEMP_PREFIX = ".render-"  # private media folders: .render-<pid>-<random>, inside the output folder
LECTURE_NAME = "lecture"
_PIXELS = {"l": "480p15", "m": "720p30", "h": "1080p60", "k": "2160p60"}


class RenderError(RuntimeError):
    """A render cannot start or did not produce its file; the message is one line for the user."""


# -- before any work --------------------------------------------------------------------------

def check_voice(voice: str | None, lang: str, fmt: str) -> str | None:
    """The voice name a render uses (``"auto"`` -> the language's own, None -> silent); RenderError, before
    any work, for an unknown voice, one of another language or a format without sound (gif, png). Whether this
    machine has the engine is the command's preflight (cli/doctor.py)."""
    if voice is None:
        return None
    from narration import VoiceError, default_voice, get_voice

    name = default_voice(lang) if voice == "auto" else voice
    try:
        engine = get_voice(name)
    except VoiceError as exc:
        raise RenderError(str(exc)) from None
    if engine.lang != lang:
        raise RenderError(f"voice {name} speaks {engine.lang}, not --lang {lang}; use --voice {default_voice(lang)}")
    if fmt not in ("mp4", "webm"):
        raise RenderError(f"--voice needs a video with sound: use --format mp4 or webm, not {fmt}")
    return name


def check_output_dir(path: Path, what: str = "output folder", videos: bool = True) -> None:
    """Raise RenderError unless ``path`` is (or can be created as) a writable folder. Creates nothing:
    the probe file it writes into the nearest existing folder is removed at once. ``what`` names the
    folder in the message ("output folder", "trace cache ($RESIDUAL_CACHE)"); ``videos``: Manim renders into it,
    so its name must not hold a quote or a control character (FFmpeg's concat list of a scene's segments)."""
    try:
        _check_output_dir(path, what, videos)
    except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte, a loop of links ...
        reason = getattr(exc, "strerror", None) or str(exc)
        raise RenderError(f"{what} {shown_path(path)} is not usable ({reason})") from None


def check_cache_dir() -> None:
    """Raise RenderError unless the trace cache (:func:`simulation.cache.cache_dir`, ``$RESIDUAL_CACHE``) is
    or can be created as a writable folder: checked before any training, so that a bad ``$RESIDUAL_CACHE``
    fails in one line instead of after the first run."""
    check_output_dir(cache_dir(), "trace cache ($RESIDUAL_CACHE)", videos=False)


def _check_output_dir(path: Path, what: str, videos: bool) -> None:
    # Manim joins a scene's segments with FFmpeg's concat list: each file named in '...' on a line of its own.
    odd = sorted({c for c in str(path) if c == "'" or unicodedata.category(c) == "Cc"})
    if odd and videos:
        raise RenderError(f"{what} {shown_path(path)} has characters a video's segment list cannot name "
                          f"({', '.join(map(repr, odd))}); choose another folder")
    if path.exists() and not path.is_dir():
        raise RenderError(f"{what} {shown_path(path)} is not a folder (a file, FIFO or device)")
    existing = path
    while not os.path.lexists(existing):  # a link counts as there, whether or not it leads anywhere
        existing = existing.parent
    if existing.is_symlink() and not existing.exists():  # mkdir would fail on it, after the work
        raise RenderError(f"cannot create {what} {shown_path(path)}: {shown_path(existing)} is a link that leads "
                          "nowhere (to a missing folder, or round a loop)")
    if not existing.is_dir():
        raise RenderError(f"cannot create {what} {shown_path(path)}: {shown_path(existing)} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise RenderError(f"{what} {path} is not writable ({exc.strerror or exc})") from None


# -- what a render depends on -----------------------------------------------------------------

def _is_project_module(module: ModuleType | None) -> bool:
    """A module of ours (not the standard library, not another installed package; an installed copy of this
    project lies under ``sys.prefix`` too, in ``residual_lecture/``)."""
    file = getattr(module, "__file__", None)
    return bool(file) and _is_project_file(file)


@functools.lru_cache(maxsize=None)
def _is_project_file(file: str) -> bool:
    """:func:`_is_project_module` by file, once per file: source_digest asks ~9,000 times for the lecture's 24
    scenes, and resolving the paths each time took ~2 s of a 3 s `render.py all --check`."""
    path = Path(file).resolve()
    if any(path.is_relative_to(p) for p in _interpreter_prefixes()):
        return INSTALLED and path.is_relative_to(ROOT)  # a checkout's .venv may lie inside ROOT: not ours
    return True


@functools.lru_cache(maxsize=1)
def _interpreter_prefixes() -> frozenset[Path]:
    return frozenset(Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix))


def source_digest(scene: type) -> str:
    """16 hex chars of SHA-256 over the source files of the scene's modules and of every project module
    they reference (transitively: ``scenes/kit/base.py``, ``scenes/kit/style.py``, ``simulation/...``)."""
    stack = [sys.modules[k.__module__] for k in scene.__mro__ if _is_project_module(sys.modules.get(k.__module__))]
    seen: dict[str, ModuleType] = {}
    while stack:
        module = stack.pop()
        if module.__name__ in seen:
            continue
        seen[module.__name__] = module
        for value in list(vars(module).values()):
            if isinstance(value, ModuleType):
                ref = value
            else:
                try:
                    name = getattr(value, "__module__", None)
                except Exception:  # some proxies raise on attribute access
                    continue
                ref = sys.modules.get(name) if isinstance(name, str) else None
            if ref is not None and ref.__name__ not in seen and _is_project_module(ref):
                stack.append(ref)
    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update(name.encode() + b"\0" + Path(seen[name].__file__).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def quality_dir(quality: str) -> str:
    """Folder name of a quality letter, as Manim names it: l -> 480p15, m -> 720p30, h -> 1080p60, k -> 2160p60."""
    return _PIXELS[quality]


def media_cache_dir() -> Path:
    """Manim's shared caches (segments, Tex and text SVGs): ``$RESIDUAL_CACHE/manim``."""
    return cache_dir() / "manim"


@dataclass
class RenderJob:
    """One scene to render, with every resolved setting; JSON-able so a worker process can take it."""

    scene: str  # class name
    module: str  # module that defines the class (scenes.highway, or a user's module for module:Class)
    params: dict[str, Any]  # typed values of the scene's experiment (cli.params.resolve_scenes; lists after JSON)
    attrs: dict[str, Any]  # converted class-attribute overrides of the scene
    traces: dict[str, str]  # run name -> config digest of every trace the scene reads
    source: str  # source_digest of the scene class
    quality: str  # l | m | h | k
    lang: str  # en | zh | es ... (narration.i18n.languages())
    format: str  # mp4 | webm | gif | png
    transparent: bool
    output: str  # absolute output folder
    verbose: bool = False  # Manim's own log and a scene's traceback on stderr
    theme: str = "dark"  # dark | light (scenes/kit/theme.py): the colours and the background
    voice: str | None = None  # a name from narration.VOICES: the narration is spoken and muxed in
    texts: dict[str, str] = field(default_factory=dict)  # {key: text} the scene can say in lang (cli.plan.scene_texts)
    text_overrides: dict[str, str] = field(default_factory=dict)  # {"Owner.key": text} of --text / [text.Owner]
    # where each parameter's value came from: {"experiment": {name: source}, "scene": {attribute: source}}, a source
    # being "default", the --config file's path, "--model", "--trace" or "--set" (cli.params.job_sources); in the
    # record, not in the key: the same values from another source make the same clip
    sources: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def final_dir(self) -> Path:
        return Path(self.output) / quality_dir(self.quality) / self.lang

    @property
    def primary(self) -> Path:
        return self.final_dir / f"{self.scene}.{self.format}"

    def key_inputs(self) -> dict[str, Any]:
        inputs = {k: v for k, v in asdict(self).items() if k not in ("output", "verbose", "voice", "sources")}
        if self.voice:  # absent when silent, so silent renders keep the keys they had before voices existed
            from narration import get_voice

            inputs["voice"] = [self.voice, get_voice(self.voice).version()]
        return {"key_version": KEY_VERSION, "manim": importlib.metadata.version("manim"), **inputs}

    def key(self) -> str:
        """SHA-256 over :meth:`key_inputs` except ``params``: the trace digests already say what they changed
        (and ``--set depth=3`` or ``depth = 3`` in a file, from another source, make the same clip)."""
        inputs = {k: v for k, v in self.key_inputs().items() if k != "params"}
        payload = json.dumps(inputs, sort_keys=True, default=list)
        return hashlib.sha256(payload.encode()).hexdigest()

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=list)

    @classmethod
    def from_json(cls, text: str) -> "RenderJob":
        """The job :meth:`to_json` wrote; RenderError (one line) for anything else: not JSON, a missing or
        unknown field, a field of the wrong type, a quality, language, format or theme that is not one."""
        from cli.params import FORMATS, LANGS, QUALITIES, THEMES

        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise RenderError(f"a render job must be JSON ({type(exc).__name__})") from None
        if not isinstance(data, dict):
            raise RenderError("a render job must be a JSON object")
        fields = cls.__dataclass_fields__
        unknown = sorted(set(data) - set(fields))
        missing = [name for name, f in fields.items() if name not in data and f.default is dataclasses.MISSING]
        if unknown or missing:
            raise RenderError(f"render job: unknown fields {unknown}, missing fields {missing}")
        kinds = {"params": dict, "attrs": dict, "traces": dict, "transparent": bool, "verbose": bool, "texts": dict,
                 "text_overrides": dict, "sources": dict}
        for name, value in data.items():
            if not isinstance(value, kinds.get(name, str)) and not (name == "voice" and value is None):
                raise RenderError(f"render job: {name} must be {kinds.get(name, str).__name__}, "
                                  f"not {type(value).__name__}")
        for name, allowed in (("quality", QUALITIES), ("lang", LANGS), ("format", FORMATS), ("theme", THEMES)):
            if name in data and data[name] not in allowed:
                raise RenderError(f"render job: {name} {data[name]!r} is not one of {', '.join(allowed)}")
        return cls(**data)


# -- records: what made a file ----------------------------------------------------------------

def _record_path(primary: Path) -> Path:
    return primary.with_name(primary.name + RECORD_SUFFIX)


def up_to_date(primary: Path, key: str) -> list[Path] | None:
    """The files recorded beside ``primary`` if its record has ``key`` and every file is there with its
    recorded size and modification time (a file replaced by another render differs); otherwise None."""
    try:
        record = json.loads(_record_path(primary).read_text(encoding="utf-8"))
        files = {primary.parent / name: list(stamp) for name, stamp in record["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if record.get("key") != key:
        return None
    for path, stamp in files.items():
        try:
            if _stamp(path) != stamp:
                return None
        except OSError:
            return None
    return list(files)


def _stamp(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns]


def _write_record(primary: Path, key: str, inputs: dict[str, Any], files: list[Path],
                  sources: dict[str, dict[str, str]] | None = None) -> Path:
    """``<file>.render.json``: the key, the inputs that made the files, their stamps and (``sources``) where each
    parameter's value came from (:attr:`RenderJob.sources`). Fit to publish beside its video: paths in the inputs
    (``--trace FILE``) are cut to the file's name (:func:`cli.public.public`); the key still hashes the full ones."""
    from cli.public import public

    record = {"key": key, "inputs": public(inputs), "files": {p.name: _stamp(p) for p in files}}
    if sources is not None:
        record["sources"] = public(sources)
    path = _record_path(primary)
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=list), encoding="utf-8")
    return path


# -- rendering --------------------------------------------------------------------------------

@contextmanager
def scene_config(settings: dict[str, Any]) -> Iterator[None]:
    """Manim's ``tempconfig(settings)``, refusing keys Manim does not know (tempconfig drops them
    silently) and restoring the Manim logger's level, which tempconfig leaves changed."""
    from manim import config, logger, tempconfig

    unknown = sorted(k for k in settings if k not in config)
    if unknown:
        raise ValueError(f"not Manim config keys: {', '.join(unknown)}")
    level = logger.level
    try:
        with tempconfig(settings):
            yield
    finally:
        logger.setLevel(level)


def scene_title(scene: type) -> dict[str, str]:
    """{lang: the title the scene shows on screen} (its string ``title``, what ``self.title("title")``
    draws), for the deck and the page; a scene without one gets its docstring's first line, else its name."""
    from cli.params import LANGS

    fallback = (scene.__doc__ or "").strip().split("\n")[0].strip() or scene.__name__
    out = {}
    for lang in LANGS:
        try:
            out[lang] = scene.string("title", lang) if hasattr(scene, "string") else fallback
        except KeyError:
            out[lang] = fallback
    return out


def load_scene(module: str, name: str) -> type:
    """The Manim Scene class ``name`` from ``module``; RenderError if it is not there or not a Scene."""
    from manim import Scene

    try:
        if os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())  # module:Class may name a file in the current folder
        scene = getattr(importlib.import_module(module), name, None)
    except Exception as exc:  # ImportError, or the module's own SyntaxError, NameError ...
        raise RenderError(f"cannot import {module}: {type(exc).__name__}: {exc}") from None
    if not (isinstance(scene, type) and issubclass(scene, Scene)):
        raise RenderError(f"{module} has no Manim Scene class {name!r}")
    return scene


def _segment_kind(job: RenderJob) -> str:
    ext = "webm" if job.format == "webm" else ("mov" if job.transparent else "mp4")
    return ext + ("-alpha" if job.transparent else "")


def _shared_caches(job: RenderJob) -> dict[str, tuple[Path, tuple[str, ...]]]:
    root = media_cache_dir()
    caches = {"tex_dir": (root / "Tex", (".svg",)), "text_dir": (root / "texts", (".svg",))}
    if job.format != "png":
        segments = root / "segments" / quality_dir(job.quality) / _segment_kind(job) / job.scene
        caches["partial_movie_dir"] = (segments, (".mp4", ".webm", ".mov"))
    return caches


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except FileNotFoundError:
        return  # pruned by another process meanwhile: Manim renders that piece again
    except OSError:  # another file system, or no hard links
        try:
            shutil.copy2(src, dst)
        except FileNotFoundError:
            return


def _link_in(shared: Path, local: Path, suffixes: tuple[str, ...]) -> None:
    local.mkdir(parents=True, exist_ok=True)
    if not shared.is_dir():
        return
    for entry in os.scandir(shared):
        if not entry.name.startswith(".") and entry.name.endswith(suffixes) and entry.is_file():
            _link_or_copy(Path(entry.path), local / entry.name)


def _promote(local: Path, shared: Path, names: list[str]) -> None:
    """Publish finished cache entries: a hidden link, then one atomic rename each."""
    shared.mkdir(parents=True, exist_ok=True)
    for name in names:
        src, dst = local / name, shared / name
        if dst.exists() or not src.is_file():
            continue
        tmp = shared / f".{name}.{os.getpid()}.tmp"
        try:
            _link_or_copy(src, tmp)
            if tmp.exists():
                os.replace(tmp, dst)
        finally:
            tmp.unlink(missing_ok=True)


def _remove_stale(folder: Path) -> None:
    """Private media folders of processes that no longer exist (killed with SIGKILL)."""
    for path in folder.glob(f"{TEMP_PREFIX}*"):
        pid = path.name[len(TEMP_PREFIX):].split("-")[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def make_variant(scene: type, job: RenderJob) -> type:
    """A subclass of ``scene`` carrying the job's language, experiment overrides and attributes; the
    class itself is never modified, so nothing carries over to the next scene."""
    namespace = {"__module__": scene.__module__, "__qualname__": scene.__qualname__, "lang": job.lang,
                 "theme": job.theme, "params": dict(job.params), "voice": job.voice,
                 "text_overrides": dict(job.text_overrides), **job.attrs}
    return type(scene.__name__, (scene,), namespace)


def make_folders(folder: Path) -> list[Path]:
    """``folder.mkdir(parents=True, exist_ok=True)``, returning the folders this call made, deepest first."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def remove_if_empty(folders: list[Path]) -> None:
    """Remove those of ``folders`` (deepest first) that are empty; one that holds anything stays."""
    for path in folders:
        try:
            path.rmdir()
        except OSError:
            pass


def render_job(job: RenderJob, scene: type, progress: bool = False) -> list[Path]:
    """Render one scene into a private media folder and move its files into ``job.final_dir``:
    ``<Scene>.<format>``, ``<Scene>.srt`` (videos with narration), ``<Scene>.numbers.json`` and the
    record ``<Scene>.<format>.render.json``. Returns the paths written; RenderError if no file came out.
    Ctrl-C or SIGTERM (cli.options.Terminated) before the files are moved in leaves nothing: the private folder
    goes, and so do the output folders this call made, if empty (a new user found ``out/480p15/en/`` left)."""
    made = make_folders(job.final_dir)
    try:
        return _render_job(job, scene, progress)
    except BaseException as exc:  # not on an error: another scene's job may be about to use the folder
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) or type(exc).__name__ == "Terminated":  # cli.options'
            remove_if_empty(made)
        raise


def _render_job(job: RenderJob, scene: type, progress: bool) -> list[Path]:
    final_dir = job.final_dir
    _remove_stale(final_dir)
    caches = _shared_caches(job)
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=final_dir) as name:
        tmp = Path(name)
        for key, (shared, suffixes) in caches.items():
            _link_in(shared, tmp / key, suffixes)
        settings = {
            "quality": _QUALITY_NAMES[job.quality], "format": job.format, "transparent": job.transparent,
            "background_color": _theme_background(job.theme),
            "media_dir": str(tmp), "video_dir": str(tmp / "video"), "images_dir": str(tmp / "images"),
            "log_dir": str(tmp / "logs"), "tex_dir": str(tmp / "tex_dir"), "text_dir": str(tmp / "text_dir"),
            "partial_movie_dir": str(tmp / "partial_movie_dir"), "input_file": "", "output_file": "",
            "log_to_file": False, "save_sections": job.format in BEAT_FORMATS, "sections_dir": str(tmp / "sections"),
            "preview": False, "dry_run": False,
            "disable_caching": False, "max_files_cached": -1, "write_all": False,
            "verbosity": "INFO" if job.verbose else "WARNING", "progress_bar": "display" if progress else "none",
        }
        from scenes.kit.encoder import REDUCED, queue_size, video_options

        if _segment_kind(job) == "mp4":  # libx264: a shorter look-ahead at 720p and up (scenes/kit/encoder.py)
            # The same options for every render of a quality, pooled or alone: Manim 0.22 keys its segment cache
            # on them, so a lone render and the same scene in a pool share segments. From 720p up one x264 thread
            # (the encode still runs beside the drawing, in Manim's encoder thread); at -q l Manim's own.
            threads = ENCODER_THREADS if job.quality in REDUCED else None
            settings["video_encoder_options"] = video_options(job.quality, threads)
        if job.format != "png" and queue_size(job.quality) is not None:  # fewer 1080p frames wait for the encoder
            settings["encoder_queue_size"] = queue_size(job.quality)
        with scene_config(settings):
            instance = make_variant(scene, job)()
            try:
                instance.render()
            except Exception as exc:  # a scene's own error: one line, the traceback with --verbose
                if job.verbose:
                    traceback.print_exc()
                message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise RenderError(f"{job.scene} failed: {type(exc).__name__}: {message}") from None
            writer = instance.renderer.file_writer
            produced = Path(writer.image_file_path if job.format == "png" else writer.movie_file_path)
            segments = [Path(p).name for p in writer.partial_movie_files if p]
        if not produced.is_file():
            hint = "; a scene without animations has no video, use --format png" if job.format != "png" else ""
            raise RenderError(f"{job.scene} produced no {job.format} file{hint}")
        # The render succeeded: its cache entries are complete and may serve the next run.
        _promote(tmp / "tex_dir", caches["tex_dir"][0], _names(tmp / "tex_dir", ".svg"))
        _promote(tmp / "text_dir", caches["text_dir"][0], _names(tmp / "text_dir", ".svg"))
        if "partial_movie_dir" in caches:
            shared_segments = caches["partial_movie_dir"][0]
            _promote(tmp / "partial_movie_dir", shared_segments, [n for n in segments if not n.startswith("uncached")])
            from manim.utils.caching import prune_segment_cache

            prune_segment_cache(shared_segments, max(100, 2 * len(segments)))
        moves = [(produced, job.primary)]
        for suffix in (".srt", ".numbers.json", ".beats.json"):
            side = produced.with_suffix(suffix)
            if side.is_file():
                moves.append((side, final_dir / f"{job.scene}{suffix}"))
        moves += _beat_videos(tmp / "sections", final_dir, job)
        # Side files first, the record last: a run stopped in between leaves a stale record, never a
        # record that vouches for a file it did not see.
        for src, dst in reversed(moves):
            os.replace(src, dst)
    files = [dst for _, dst in moves]
    return [*files, _write_record(job.primary, job.key(), job.key_inputs(), files, job.sources)]


def place_files(job: RenderJob, blobs: dict[str, bytes]) -> list[Path]:
    """Place the files of ``job`` rendered elsewhere (a Dask worker, cli/pipeline.py), given as {file name:
    bytes}, exactly where :func:`render_job` puts them, each by an atomic rename, the clip after its side
    files and the record last, so :func:`up_to_date` treats them as a local render's. RenderError when the
    clip is missing or a name is not one of this scene's files in ``job.final_dir``."""
    primary = job.primary.name
    if primary not in blobs:
        raise RenderError(f"{job.scene}: the worker sent no {primary}")
    for name in blobs:
        if Path(name).name != name or not name.startswith(f"{job.scene}.") or name.endswith(RECORD_SUFFIX):
            raise RenderError(f"{job.scene}: the worker sent a file that is not this scene's: {name!r}")
    final_dir = job.final_dir
    final_dir.mkdir(parents=True, exist_ok=True)
    order = [*sorted(n for n in blobs if n != primary), primary]
    for name in order:
        with atomic_write(final_dir / name) as tmp:
            tmp.write_bytes(blobs[name])
    files = [final_dir / primary, *(final_dir / n for n in order[:-1])]
    return [*files, _write_record(job.primary, job.key(), job.key_inputs(), files, job.sources)]


BEAT_FORMATS = ("mp4", "webm")  # formats Manim saves sections for


def _beat_videos(sections: Path, final_dir: Path, job: RenderJob) -> list[tuple[Path, Path]]:
    """(Manim's section video, its final path ``<Scene>.beat-NN.<format>``) for every saved section, in order."""
    index = sections / f"{job.scene}.json"
    if not index.is_file():
        return []
    entries = json.loads(index.read_text(encoding="utf-8"))
    return [(sections / entry["video"], final_dir / beat_video_name(job.scene, i, job.format))
            for i, entry in enumerate(entries)]


def beat_video_name(scene: str, index: int, fmt: str = "mp4") -> str:
    """File name of beat ``index`` of ``scene``'s video: ``IdentityHighway.beat-03.mp4``."""
    return f"{scene}.beat-{index:02d}.{fmt}"


def _theme_background(theme: str) -> str:
    """The theme's background for Manim's ``background_color``: scenes of your own (module:Class) that
    do not derive from LectureScene get it too."""
    from scenes.kit.theme import get_theme

    return get_theme(theme).background


_QUALITY_NAMES = {"l": "low_quality", "m": "medium_quality", "h": "high_quality", "k": "fourk_quality"}


def _names(folder: Path, suffix: str) -> list[str]:
    return [p.name for p in folder.glob(f"*{suffix}")] if folder.is_dir() else []


# -- the whole lecture as one video -----------------------------------------------------------

def concat_lecture(jobs: list[RenderJob]) -> tuple[list[Path], bool]:
    """Join the scene videos of ``jobs`` (in order) into ``lecture.<format>`` beside them, and their
    subtitles into ``lecture.srt`` with shifted times. Streams are copied, not re-encoded (PyAV's concat
    demuxer, as Manim joins its own segments). Returns (files, written); written is False when the
    recorded key matched and nothing was done."""
    first = jobs[0]
    target = first.final_dir / f"{LECTURE_NAME}.{first.format}"
    inputs = {"key_version": KEY_VERSION, "scenes": [[job.scene, job.key()] for job in jobs]}
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    done = up_to_date(target, key)
    if done is not None:
        return done, False
    videos = [job.primary for job in jobs]
    durations = [_duration(v) for v in videos]
    with atomic_write(target, suffix=target.suffix) as tmp:
        _concat_videos(videos, tmp, alpha=first.transparent and first.format == "webm")
        track = _joined_audio(videos, durations)
        if track is not None:  # one continuous track: each clip's sound (or silence) for its whole length
            from narration import mux_audio, normalize_track

            silent = tmp.with_name(f".silent-{tmp.name}")
            os.replace(tmp, silent)
            try:
                mux_audio(silent, normalize_track(track, rate=_CONCAT_RATE), tmp, rate=_CONCAT_RATE)
            finally:
                silent.unlink(missing_ok=True)
    files = [target]
    subtitles = _shifted_subtitles(videos, durations)
    if subtitles is not None:
        with atomic_write(target.with_suffix(".srt")) as tmp:
            tmp.write_text(subtitles, encoding="utf-8")
        files.append(target.with_suffix(".srt"))
    return [*files, _write_record(target, key, inputs, files)], True


_CONCAT_RATE = 48000  # Hz: the rate the clips' audio is encoded at (narration.mux_audio)


def _joined_audio(videos: list[Path], durations: list[float]):
    """The clips' sound end to end, each cut or padded to its length in the joined video (the concat
    demuxer starts each clip at the sum of the ones before: the times the subtitles are shifted by too);
    None if no clip has sound."""
    import numpy as np

    from narration import VoiceError, read_audio

    parts, found = [], False
    for video, duration in zip(videos, durations):
        length = int(round(duration * _CONCAT_RATE))
        try:
            audio, rate = read_audio(video)
            found = True
        except VoiceError:
            audio, rate = np.zeros(0, np.float32), _CONCAT_RATE
        if rate != _CONCAT_RATE:
            raise RenderError(f"{video}: audio at {rate} Hz, expected {_CONCAT_RATE}")
        parts.append(np.pad(audio, (0, max(0, length - len(audio))))[:length])
    return np.concatenate(parts) if found else None


def _duration(video: Path) -> float:
    import av

    try:
        with av.open(str(video)) as container:
            return container.duration / av.time_base
    except (av.error.FFmpegError, TypeError) as exc:
        raise RenderError(f"cannot read {video}: {exc}") from None


def _concat_videos(videos: list[Path], target: Path, alpha: bool) -> None:
    import av

    manifest = "".join("file 'file:{}'\n".format(v.resolve().as_posix().replace("'", "'\\''")) for v in videos)
    with av.open(BytesIO(manifest.encode()), format="concat", options={"safe": "0"}) as source, \
            av.open(str(target), mode="w") as sink:
        stream = source.streams.video[0]
        out = sink.add_stream_from_template(template=stream)
        if alpha:
            out.pix_fmt = "yuva420p"
        for packet in source.demux(stream):
            if packet.dts is None:  # demux ends with an empty flushing packet
                continue
            packet.dts = None  # decoding times of consecutive files need not increase; libav recomputes
            packet.stream = out
            sink.mux(packet)


def _shifted_subtitles(videos: list[Path], durations: list[float]) -> str | None:
    import srt

    found, offset, subtitles = False, 0.0, []
    for video, duration in zip(videos, durations):
        path = video.with_suffix(".srt")
        if path.is_file():
            found = True
            try:
                parsed = list(srt.parse(path.read_text(encoding="utf-8")))
            except (srt.SRTParseError, ValueError) as exc:
                raise RenderError(f"subtitle file {path} is corrupt: {exc}") from None
            shift = timedelta(seconds=offset)
            subtitles += [srt.Subtitle(0, s.start + shift, s.end + shift, s.content) for s in parsed]
        offset += duration
    return srt.compose(subtitles, reindex=True) if found else None
