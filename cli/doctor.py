"""``render.py doctor``: what this machine has of what the lecture needs, and the one preflight of every command.

Example::

    python render.py doctor            # one line per piece: ok, or missing and the command that installs it
    python render.py doctor --json     # the same, machine-readable

Like Manim's ``manim checkhealth``. Each entry of :data:`CHECKS` probes one piece (LaTeX and the packages of
Manim's default TeX template, dvisvgm, Pango, PyAV's encoders, the Chinese font, reveal.js, free memory and
disk; optional: the two voices and chromium) and, when it is missing, names the exact command that installs
it (the apt-get line of bootstrap.sh, the pip line, ``npm ci --prefix web``). :func:`preflight` runs the
checks one command needs (:func:`command_needs`) before that command does any work, and refuses with one
line; :class:`PreflightCommand` runs it for every command of ``render.py``, so no command has a copy.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import click

from cli import INSTALLED, ROOT

__all__ = ["Finding", "Check", "CHECKS", "RENDERING", "NEEDS_NOTHING", "command_needs", "run_checks", "preflight",
           "merge_installs", "PreflightCommand", "doctor_command", "LATEX_FILES", "ENCODERS", "memory_need",
           "DISK_NEED_MIB"]

APT = "apt-get install -y --no-install-recommends"
# Manim's default TexTemplate (manim/utils/tex_templates.py: babel english, amsmath, amssymb) on the standalone
# class; the scenes add no package of their own. Debian: texlive-latex-extra has standalone.cls, the rest
# texlive-latex-base (and texlive-base, which it pulls in).
LATEX_FILES = ("standalone.cls", "babel.sty", "english.ldf", "amsmath.sty", "amssymb.sty")
# PyAV encoders a render can ask for: mp4 (libx264), webm (libvpx-vp9), gif, png stills; the narration's sound
# in mp4 (aac) and webm (libopus) (narration/mux.py).
ENCODERS = ("libx264", "libvpx-vp9", "gif", "png", "aac", "libopus")
CJK_FONT = "Noto Sans CJK SC"  # scenes/kit/style.py FONTS["zh"] (Debian fonts-noto-cjk)
# Free disk a lecture needs (render.py all -q l), measured: IdentityHighway and ChainRuleProduct at -q l (48.9 s of
# video) wrote 2.27 MB of clips, beat clips, subtitles and records (46 KB per video-second) and 5.0 MB into Manim's
# shared cache (102 KB per video-second); the trace cache holds ~50 KB per run. For the 475 s lecture: ~22 MB + ~49 MB
# + ~5 MB (104 runs) = ~76 MB per language; both languages (the traces shared) ~150 MB; twice that for the temporary
# files of atomic writes and a re-render beside the old files: 300 MiB. Higher qualities need more (-q h: several
# times the pixels per frame).
DISK_NEED_MIB = 300


@dataclass(frozen=True)
class Finding:
    """One check's result: ``detail`` says what was found, or what is missing (one line each)."""

    name: str  # the check's name: "latex", "cjk-font", ...
    ok: bool
    detail: str
    install: str  # the command that installs the piece; "" when present, or when no command can (disk, memory)
    required: bool  # False: optional (a voice, chromium); `doctor` exits 0 without it
    needed_by: str  # which commands (or options) need it


@dataclass(frozen=True)
class Check:
    """``probe() -> (ok, detail, install)``; ``install`` may be "" when ``ok``."""

    name: str
    needed_by: str
    required: bool
    probe: Callable[[], tuple[bool, str, str]]

    def run(self) -> Finding:
        try:
            ok, detail, install = self.probe()
        except Exception as exc:  # a probe that breaks is a piece that does not work; say why, in one line
            ok, detail, install = False, f"the check itself failed: {type(exc).__name__}: {exc}", ""
        detail = " ".join(str(detail).split())
        return Finding(self.name, ok, detail, "" if ok else install, self.required, self.needed_by)


def which(name: str) -> str | None:
    """shutil.which, looked up at each call (tests change PATH)."""
    return shutil.which(name)


def _output(command: list[str], timeout: float = 30) -> str | None:
    """The command's stdout, or None when it cannot run or fails."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _shown(path: Path | str) -> str:
    """``path`` relative to the current folder when it lies inside it (the commands a user types)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(path)


def _pip(*requirements: str, flags: str = "") -> str:
    """The pip line of this interpreter (``.venv/bin/python -m pip install 'av>=9'``)."""
    python = _shown(sys.executable) if not INSTALLED else Path(sys.executable).name
    return f"{python} -m pip install {flags + ' ' if flags else ''}" + " ".join(f"'{r}'" for r in requirements)


def _required_by_manim(dist: str) -> str:
    """The requirement Manim itself declares for ``dist`` (``av>=9.0.0,<16.0.0``), else the bare name."""
    for line in importlib.metadata.requires("manim") or []:
        name = re.split(r"[\s<>=!~;\[]", line, maxsplit=1)[0]
        if name.lower() == dist.lower():
            return line.split(";")[0].replace(" ", "")
    return dist


# -- the checks ---------------------------------------------------------------------------------

def _latex() -> tuple[bool, str, str]:
    install = f"{APT} texlive-latex-base texlive-latex-extra"
    latex, kpsewhich = which("latex"), which("kpsewhich")
    if not latex:
        return False, "latex is not on PATH", install
    if not kpsewhich:
        return False, "kpsewhich (it finds LaTeX's packages) is not on PATH", install
    found = (_output([kpsewhich, *LATEX_FILES]) or "").split()
    missing = [f for f in LATEX_FILES if not any(Path(line).name == f for line in found)]
    if missing:
        return False, f"LaTeX lacks {', '.join(missing)}", install
    return True, f"{latex} with {', '.join(LATEX_FILES)}", ""


def _dvisvgm() -> tuple[bool, str, str]:
    found = which("dvisvgm")
    return bool(found), found or "dvisvgm is not on PATH", f"{APT} dvisvgm"


def _cjk_font() -> tuple[bool, str, str]:
    install = f"{APT} fonts-noto-cjk"
    fc_list = which("fc-list")
    if not fc_list:
        return False, "fc-list (fontconfig: how Pango finds fonts) is not on PATH", f"{APT} fontconfig fonts-noto-cjk"
    families = {f.strip() for line in (_output([fc_list, ":lang=zh", "family"]) or "").splitlines()
                for f in line.split(",") if f.strip()}
    if CJK_FONT in families:
        return True, CJK_FONT, ""
    if families:
        return True, f"{CJK_FONT} absent; Pango will draw Chinese with {sorted(families)[0]}", ""
    return False, "no font with Chinese glyphs (fc-list :lang=zh lists none)", install


def _pango() -> tuple[bool, str, str]:
    install = f"{APT} libpango1.0-dev pkg-config && {_pip(_required_by_manim('manimpango'), flags='--force-reinstall')}"
    try:
        manimpango = importlib.import_module("manimpango")
        return True, f"ManimPango {manimpango.__version__}, Pango {manimpango.pango_version()}", ""
    except Exception as exc:  # ImportError, or a shared library that does not load (OSError)
        return False, f"ManimPango does not load ({type(exc).__name__}: {exc})", install


def _video() -> tuple[bool, str, str]:
    install = _pip(_required_by_manim("av"), flags="--force-reinstall")
    try:
        av = importlib.import_module("av")
    except Exception as exc:
        return False, f"PyAV does not load ({type(exc).__name__}: {exc})", install
    missing = []
    for name in ENCODERS:
        try:
            av.codec.Codec(name, "w")
        except Exception:
            missing.append(name)
    if missing:
        return False, f"PyAV {av.__version__} lacks the encoders {', '.join(missing)}", install
    codec = ".".join(map(str, av.library_versions["libavcodec"]))
    return True, f"PyAV {av.__version__} (libavcodec {codec}), encoders {', '.join(ENCODERS)}", ""


def _reveal() -> tuple[bool, str, str]:
    from cli.deck import REVEAL_VERSION, reveal_dir, reveal_install
    from cli.media import RenderError

    try:
        root = reveal_dir()
    except RenderError as exc:
        return False, str(exc).split(";")[0], reveal_install()
    return True, f"reveal.js {REVEAL_VERSION} at {_shown(root)}", ""


def _voice(name: str) -> Callable[[], tuple[bool, str, str]]:
    def probe() -> tuple[bool, str, str]:
        from narration import get_voice, missing_voice

        engine = get_voice(name)
        problem = missing_voice(name)
        if problem:
            return False, problem.split(";")[0], engine.install
        return True, engine.version(), ""
    return probe


def _chromium() -> tuple[bool, str, str]:
    found = which("chromium") or which("chromium-browser")
    return bool(found), found or "chromium is not on PATH", f"{APT} chromium"


def memory_need() -> int:
    """Bytes a lecture render needs free (MemAvailable): the command, one render worker at ``-q l`` and a trainer
    with the largest run the lecture trains beside it (cli/jobs.py's measured figures; the run's own memory by
    simulation.runs.estimate over every run of every experiment at its defaults)."""
    from cli.jobs import MAIN_MIB, TRAINER_BASE_MIB, WORKER_MIB, MiB

    return (MAIN_MIB + WORKER_MIB["l"] + TRAINER_BASE_MIB) * MiB + _largest_run()


@functools.lru_cache(maxsize=1)
def _largest_run() -> int:
    from simulation.config import UserModelConfig
    from simulation.experiments import EXPERIMENTS, build_runs
    from simulation.runs import estimate

    # The experiment "model" has no network until --model names one (its runs are refused by their own estimate).
    return max(estimate(config).total for name in EXPERIMENTS for config in build_runs(name).values()
               if not isinstance(config, UserModelConfig))


def _memory() -> tuple[bool, str, str]:
    from simulation.memory import available_bytes

    have, need = available_bytes(), memory_need()
    detail = f"{have / 2**30:.1f} GiB available, a lecture render needs {need / 2**30:.1f} GiB"
    return have >= need, detail, "close other programs, or render with fewer --jobs on a machine with more memory"


def _disk() -> tuple[bool, str, str]:
    from simulation.cache import cache_dir

    places = {}
    for path in (Path("media").absolute(), cache_dir().absolute()):
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        places.setdefault(os.stat(existing).st_dev, existing)
    # The output and the cache on one file system share the need; on two, each gets it whole (simple and safe).
    free = {where: shutil.disk_usage(where).free for where in places.values()}
    short = [where for where, n in free.items() if n < DISK_NEED_MIB * 2**20]
    detail = ", ".join(f"{n / 2**30:.1f} GiB free at {_shown(w)}" for w, n in free.items())
    detail += f"; the lecture needs {DISK_NEED_MIB / 1024:.1f} GiB"
    where = ", ".join(map(_shown, short))
    return not short, detail, f"free space at {where} (or use --output and $RESIDUAL_CACHE elsewhere)"


RENDERING = "render, all, slides, page"
CHECKS: dict[str, Check] = {c.name: c for c in [
    Check("latex", RENDERING, True, _latex),
    Check("dvisvgm", RENDERING, True, _dvisvgm),
    Check("pango", RENDERING, True, _pango),
    Check("video", RENDERING, True, _video),
    Check("cjk-font", "--lang zh", True, _cjk_font),
    Check("reveal.js", "slides (html)", True, _reveal),
    Check("memory", "train, render, all, slides, page, explore", True, _memory),
    Check("disk", "train, render, all, slides, page, explore", True, _disk),
    Check("en-piper", "--voice (English)", False, _voice("en-piper")),
    Check("zh-espeak", "--voice with --lang zh", False, _voice("zh-espeak")),
    Check("chromium", "the deck, page and explorer tests (tests/browser.py)", False, _chromium),
]}

# Commands that need no piece beyond Python's own packages (every command must be here or in command_needs).
NEEDS_NOTHING = ("list", "train", "inspect", "explore", "doctor", "i18n")


def command_needs(command: str, params: dict[str, Any]) -> list[str]:
    """The checks (names in :data:`CHECKS`) that command ``command`` with click's resolved ``params`` needs
    before any work. Memory and disk are not among them: a run that cannot fit is refused by its own estimate
    (simulation.runs.check_memory, cli/jobs.py), whatever the lecture as a whole would need."""
    if command in NEEDS_NOTHING:
        return []
    if command not in ("render", "all", "slides", "page", "_worker"):
        raise KeyError(f"cli/doctor.py: say what command {command!r} needs (command_needs or NEEDS_NOTHING)")
    if command == "_worker":  # the job's own language and voice (a worker on a cluster checks its own machine)
        try:
            params = json.loads(params.get("job_json") or "{}")
        except (ValueError, RecursionError):  # a malformed job: RenderJob.from_json says so
            params = {}
        params = params if isinstance(params, dict) else {}
    needs = ["latex", "dvisvgm", "pango", "video"]
    lang = params.get("lang")
    if lang == "zh":
        needs.append("cjk-font")
    voice = params.get("voice")
    if isinstance(voice, str) and voice:
        from narration import VOICES, default_voice

        name = default_voice(lang) if voice == "auto" and lang in ("en", "zh") else voice
        if name in VOICES:  # an unknown voice, or one of another language, is bad input: cli.media.check_voice
            needs.append(name)
    if command == "slides" and params.get("fmt") == "html":
        needs.append("reveal.js")
    return needs


def run_checks(names: Iterable[str] | None = None) -> list[Finding]:
    """The findings of ``names`` (default: every check), in :data:`CHECKS` order."""
    wanted = set(CHECKS) if names is None else set(names)
    return [check.run() for name, check in CHECKS.items() if name in wanted]


def merge_installs(findings: Iterable[Finding]) -> str:
    """One command that installs every missing piece: the apt-get packages in one apt-get line, the pip
    requirements in one pip line, the rest in order, joined by ``&&``."""
    apt, pip, rest = [], [], []
    for finding in findings:
        for step in filter(None, (s.strip() for s in finding.install.split("&&"))):
            if step.startswith(APT + " "):
                apt += [p for p in step.removeprefix(APT + " ").split() if p not in apt]
            elif " -m pip install " in step or step.split()[0].endswith("/pip"):
                head, _, reqs = step.partition(" install ")
                pip += [(head, r) for r in reqs.split() if (head, r) not in pip]
            elif step not in rest:
                rest.append(step)
    steps = [f"{APT} {' '.join(apt)}"] if apt else []
    for head in dict.fromkeys(h for h, _ in pip):
        steps.append(f"{head} install {' '.join(r for h, r in pip if h == head)}")
    return " && ".join(steps + rest)


def preflight(names: Iterable[str]) -> None:
    """Raise :class:`cli.media.RenderError` with one line when a piece in ``names`` is missing: what is missing,
    for what, and the one command that installs it all. Nothing is written; no work has started."""
    from cli.media import RenderError

    missing = [f for f in run_checks(names) if not f.ok]
    if missing:
        what = "; ".join(f"{f.name}: {f.detail}" for f in missing)
        install = merge_installs(missing)
        raise RenderError(f"missing {what}" + (f"; install with: {install}" if install else "")
                          + " (render.py doctor checks everything)")


class PreflightCommand(click.Command):
    """A command that runs :func:`preflight` on what it needs (:func:`command_needs`) after click has parsed its
    options and before its body runs: a missing piece is one line and exit status 1, before any work."""

    def invoke(self, ctx: click.Context) -> Any:
        from cli.media import RenderError

        try:
            preflight(command_needs(ctx.command.name, ctx.params))
        except RenderError as exc:
            raise click.ClickException(str(exc)) from None
        return super().invoke(ctx)


@click.command("doctor", cls=PreflightCommand)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.pass_context
def doctor_command(ctx: click.Context, as_json: bool) -> None:
    """Check what the lecture needs on this machine: LaTeX, dvisvgm, Pango, PyAV, the Chinese font, reveal.js,
    memory and disk (required); the voices and chromium (optional). Prints the command that installs what is
    missing; exit status 1 when a required piece is missing."""
    findings = run_checks()
    missing = [f for f in findings if not f.ok and f.required]
    optional = [f for f in findings if not f.ok and not f.required]
    install = merge_installs([*missing, *optional])
    if as_json:
        click.echo(json.dumps({"ok": not missing, "checks": [asdict(f) for f in findings], "install": install},
                              indent=2))
    else:
        width = max(len(f.name) for f in findings)
        for f in findings:
            status = "ok" if f.ok else ("missing" if f.required else "optional")
            line = f"{status:<9}{f.name:<{width + 2}}{f.detail}"
            if not f.ok:
                line += f" (for {f.needed_by})" + (f"; install: {f.install}" if f.install else "")
            click.echo(line)
        ok = len(findings) - len(missing) - len(optional)
        summary = f"{ok} of {len(findings)} ok"
        if missing:
            summary += f"; missing: {', '.join(f.name for f in missing)}"
        if optional:
            summary += f"; optional, missing: {', '.join(f.name for f in optional)}"
        click.echo(f"\n{summary}" + (f"\ninstall all with: {install}" if install else ""))
    ctx.exit(1 if missing else 0)
