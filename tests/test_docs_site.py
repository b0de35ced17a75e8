"""The documentation site builds with MkDocs in strict mode: a broken link, a missing page or a page left out of
the nav fails the build (mkdocs.yml, ``validation``). Built into a temporary folder, never into ``site/``.

The tamper twin builds a two-page site with the same theme, extensions and validation settings and a link to a
page that does not exist, and shows that the build then fails and names the link.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, env=ENV, timeout=300)


@pytest.mark.xdist_group("docs")
def test_the_site_builds_strictly(tmp_path):
    build = mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert build.returncode == 0, build.stdout + build.stderr
    site = tmp_path / "site"
    commands = (site / "reference" / "commands" / "index.html").read_text(encoding="utf-8")
    for command in ("render", "all", "train", "list", "inspect", "doctor", "slides", "page", "explore"):
        assert f"render.py {command}" in commands, f"the generated command reference lacks {command}"
    scenes = (site / "reference" / "scenes" / "index.html").read_text(encoding="utf-8")
    assert "IdentityHighway" in scenes and "projection_factor" in scenes
    # what a reader sees: no Python sentinel as a default, the <lang> of OUTPUT/<480p15>/<lang>/ shown, not hidden
    assert "Sentinel" not in commands and "<td>None</td>" not in commands
    assert "OUTPUT/&lt;480p15&gt;/&lt;lang&gt;/" in commands and "<lang>" not in commands


def _hook():
    spec = importlib.util.spec_from_file_location("docs_hook_generated", ROOT / "docs" / "hooks" / "generated.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_command_reference_is_tidied_of_sentinels_and_hidden_placeholders():
    """mkdocs-click's table as it comes (the tamper twin: untidied, it shows the sentinel and hides <lang>)."""
    hook = _hook()
    assert "lang" in hook.help_placeholders()  # read from render.py's own help texts
    raw = ("<tr><td><code>--check</code></td><td>boolean</td><td>Check.</td><td><code>Sentinel.UNSET</code></td></tr>"
           "<tr><td><code>--config</code></td><td>file</td><td>TOML.</td><td>None</td></tr>"
           "<p>Writes OUTPUT/&lt;480p15&gt;/<lang>/page/lecture.html</p><td><code>l</code></td>")
    assert "Sentinel.UNSET" in raw and "<td>None</td>" in raw and "/<lang>/" in raw
    tidy = hook.tidy_command_reference(raw, {"lang"})
    assert "Sentinel" not in tidy and "<td>None</td>" not in tidy and tidy.count("<td>—</td>") == 2
    assert "OUTPUT/&lt;480p15&gt;/&lt;lang&gt;/page" in tidy
    assert "<p>" in tidy and "<td><code>l</code></td>" in tidy  # the page's own elements are left alone
    with pytest.raises(ValueError, match="<code>"):
        import click

        hook.help_placeholders(click.Command("x", help="writes <code> here"))


def _config() -> dict:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def test_every_page_is_in_the_nav():
    def pages(nav):
        for item in nav:
            for value in item.values():
                yield from (pages(value) if isinstance(value, list) else [value])
    listed = list(pages(_config()["nav"]))
    in_nav = set(listed)
    assert sorted(p for p in in_nav if listed.count(p) > 1) == [], "a page listed twice in the nav (a merge's leftover)"
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk - in_nav == set(), "add these pages to the nav of mkdocs.yml"
    assert in_nav - on_disk == set()


@pytest.mark.xdist_group("docs")
def test_tamper_twin_a_broken_link_fails_the_build(tmp_path):
    config = {k: v for k, v in _config().items() if k not in ("nav", "hooks", "exclude_docs")}
    config["docs_dir"] = str(tmp_path / "docs")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the guide](guide.md).\n", encoding="utf-8")
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\nBack [home](index.md).\n", encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    assert mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site").returncode == 0  # the untampered site builds
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\nSee [the old page](cli.md).\n", encoding="utf-8")
    broken = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert broken.returncode != 0
    assert "cli.md" in broken.stdout + broken.stderr
