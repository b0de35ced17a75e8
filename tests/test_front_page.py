"""README is a front page: short, with a moving picture, a still of every scene, the two set-up commands, and no
words a reader outside the project cannot follow (commit hashes, issue numbers, internal names).

Also: every local link and image of README exists, the gallery page has every scene, and CITATION.cff agrees with
pyproject.toml. Each check has a tamper twin that feeds it a README that breaks it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from urllib.parse import unquote

import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_LINES = 220
# The issue's own grep: a hex word of 7-40 digits with a letter and a digit (a commit hash), the yardstick,
# issue numbers, the project's internal roles and notes.
INTERNAL = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b|yardstick|\b[Ii]ssue [0-9]+"
                      r"|the lead\b|study note §")
LINK = re.compile(r"""(?:\]\(|src=["']|href=["'])([^)"'#\s]+)""")


def lecture_scene_names() -> list[str]:
    from scenes import SCENES_IN_ORDER
    return [scene.__name__ for scene in SCENES_IN_ORDER]


def problems(text: str, root: Path = ROOT) -> list[str]:
    """What is wrong with a README ``text`` as a front page (empty: nothing)."""
    out = []
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        out.append(f"{len(lines)} lines, over {MAX_LINES}")
    for n, line in enumerate(lines, 1):
        if INTERNAL.search(line):
            out.append(f"line {n}: internal word {INTERNAL.search(line).group(0)!r}")
    for command in ("bash bootstrap.sh lecture", "bash bootstrap.sh test"):
        if command not in text:
            out.append(f"the set-up command {command!r} is missing")
    if not re.search(r"""src=["'][^"']+\.(gif|webm|mp4)["']""", text):
        out.append("no moving picture")
    for name in lecture_scene_names():
        if not re.search(rf"""src=["']docs/stills/{name}\.(png|gif)["']""", text):
            out.append(f"no still of {name}")
    for target in LINK.findall(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (root / unquote(target)).exists():
            out.append(f"link to a missing file: {target}")
    return out


def test_readme_is_a_front_page():
    assert problems(README.read_text(encoding="utf-8")) == []


def test_tamper_twin_each_rule_can_fail():
    good = README.read_text(encoding="utf-8")
    assert any("lines, over" in p for p in problems(good + "\nmore\n" * MAX_LINES))
    assert any("internal word 'a207b45'" in p for p in problems(good + "\nmeasured on a207b45\n"))
    assert any("'yardstick'" in p for p in problems(good + "\n200 yardsticks\n"))
    assert any("'issue 23'" in p for p in problems(good + "\nsee issue 23\n"))
    assert any("bootstrap.sh test" in p for p in problems(good.replace("bash bootstrap.sh test", "make test")))
    assert any("no still of Degradation" in p for p in problems(good.replace("docs/stills/Degradation.png", "x")))
    assert any("missing file: docs/nowhere.md" in p for p in problems(good + "\n[x](docs/nowhere.md)\n"))
    assert any("moving picture" in p for p in problems(re.sub(r"\.gif", ".png", good)))


def test_gallery_has_every_scene_with_its_still():
    gallery = (ROOT / "docs" / "gallery.md").read_text(encoding="utf-8")
    for name in lecture_scene_names():
        assert re.search(rf"^## {name}$", gallery, re.MULTILINE), f"docs/gallery.md lacks {name}"
        assert f"(stills/{name}.png)" in gallery, f"docs/gallery.md lacks the still of {name}"
        assert (ROOT / "docs" / "stills" / f"{name}.png").exists()


def test_citation_file_agrees_with_pyproject():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert cff["cff-version"] == "1.2.0"
    assert str(cff["version"]) == project["version"]
    assert cff["license"] == project["license"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith(f"{project['license']} License")
    assert cff["title"] and cff["authors"] and cff["message"]


def test_changelog_has_the_current_version():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d\d-\d\d$", changelog, re.MULTILINE)
    assert "## [Unreleased]" in changelog
