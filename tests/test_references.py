"""Every paper a scene cites has a full entry in docs/references.bib and on the references page.

The scenes print short author-year forms ("He et al. 2015, Fig. 1", "Dong, Cordonnier & Loukas 2021",
"nostalgebraist 2020 (the logit lens)"). This reads every string of scenes/ (Python string constants, and the text
of the string catalogs where scenes keep their words), finds those forms, and matches each to the entry whose
``onscreen`` field has the same first author and year (a parenthetical such as "(PReLU)" picks between two papers
of one author and year). The tamper twins show that a citation with no entry, or an entry missing from the page,
is reported.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest
from pybtex.database import parse_file

ROOT = Path(__file__).resolve().parent.parent
BIB = ROOT / "docs" / "references.bib"
PAGE = ROOT / "docs" / "background" / "references.md"
# Where the scenes' words live besides their Python files: string catalogs (any of these folders that exists).
CATALOG_DIRS = ("scenes/catalogs", "scenes/strings", "scenes/locale", "catalogs", "locale")
CATALOG_SUFFIXES = {".toml", ".json", ".po", ".pot", ".yaml", ".yml", ".txt", ".ftl"}

# "He et al. 2015", "Glorot & Bengio 2010", "Dong, Cordonnier & Loukas 2021", "Okabe & Ito (2008)", "Wong 2011",
# "nostalgebraist 2020"; an optional parenthetical right after the year ("He et al. 2015 (PReLU)").
_NAME = r"(?:[A-Z][a-z][A-Za-z\-]*|nostalgebraist)"
CITATION = re.compile(
    rf"\b(?P<first>{_NAME})(?P<rest>(?: et al\.| and others|(?:, {_NAME})*(?:,? (?:&|and) {_NAME}))?),? "
    r"\(?(?P<year>(?:19|20)\d\d)\)?(?:\s*\((?P<qual>[^()]{1,30})\))?")
# "He et al." or "Xiong et al.," with no year: the author must still have an entry.
ET_AL = re.compile(rf"\b(?P<first>{_NAME}) et al\.(?!,? \(?(?:19|20)\d\d)")
BOOKS = {"D2L": "D2L"}  # cited without a year


@functools.lru_cache(maxsize=1)
def _scene_strings() -> tuple[tuple[str, str], ...]:
    return tuple(_read_scene_strings())


def scene_strings() -> list[tuple[str, str]]:
    """(where, text) of every string constant in scenes/**/*.py and every line of the scenes' catalogs."""
    return list(_scene_strings())


def _read_scene_strings() -> list[tuple[str, str]]:
    """(where, text) of every string constant in scenes/**/*.py and every line of the scenes' catalogs."""
    out = []
    for path in sorted((ROOT / "scenes").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.value))
    for folder in CATALOG_DIRS:
        for path in sorted((ROOT / folder).rglob("*")) if (ROOT / folder).is_dir() else ():
            if path.suffix in CATALOG_SUFFIXES:
                for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    out.append((f"{path.relative_to(ROOT)}:{n}", line))
    return out


@functools.lru_cache(maxsize=None)
def onscreen_forms(bib_path: Path = BIB) -> dict[str, tuple[str, str | None, str | None]]:
    """Entry key -> (first author, year or None, qualifier or None) parsed from its ``onscreen`` field."""
    forms = {}
    for key, entry in parse_file(str(bib_path)).entries.items():
        text = entry.fields["onscreen"]
        m = CITATION.fullmatch(text)
        forms[key] = (m["first"], m["year"], m["qual"]) if m else (text, None, None)
    return forms


def citations(strings) -> list[tuple[str, str, str | None, str | None]]:
    """(where, first author, year or None, qualifier or None) of every citation in ``strings``."""
    found, authors = [], {f for f, _, _ in onscreen_forms().values()}
    for where, text in strings:
        for m in CITATION.finditer(text):
            if m["rest"] or m["first"] in authors:
                found.append((where, m["first"], m["year"], m["qual"]))
        for m in ET_AL.finditer(text):
            found.append((where, m["first"], None, None))
        for book in BOOKS:
            if re.search(rf"\b{book}\b", text):
                found.append((where, book, None, None))
    return found


def unlisted(cites, forms) -> list[str]:
    """The citations that match no entry: same first author and year; a qualifier that names an entry picks it,
    else the entry without one."""
    missing = []
    for where, first, year, qual in cites:
        same = [(y, q) for f, y, q in forms.values() if f == first and (year is None or y == year)]
        if year is not None:
            same = [(y, q) for y, q in same if q is not None and qual is not None and q.lower() in qual.lower()] or \
                   [(y, q) for y, q in same if q is None]
        if not same:
            missing.append(f"{where}: {first} {year or ''}".rstrip())
    return missing


def test_every_citation_in_the_scenes_has_an_entry():
    cites = citations(scene_strings())
    assert len(cites) > 50, "the scan found almost no citations: the pattern or the folders are wrong"
    cited = {(f, y) for _, f, y, _ in cites}
    for must in [("He", "2015"), ("Xiong", "2020"), ("Dong", "2021"), ("nostalgebraist", "2020"), ("D2L", None)]:
        assert must in cited, f"the scan missed {must}"
    assert unlisted(cites, onscreen_forms()) == []


def test_tamper_twin_a_citation_without_an_entry_is_reported():
    strings = scene_strings() + [("scenes/fake.py:1", "as Smith et al. 2099, Fig. 3 shows"),
                                 ("scenes/fake.py:2", "He et al. 2015 (Rectifiers II), §2")]
    missing = unlisted(citations(strings), onscreen_forms())
    assert missing == ["scenes/fake.py:1: Smith 2099"]
    forms = {k: v for k, v in onscreen_forms().items() if k != "he2016deep"}  # a copy: the cache stays whole  # only the PReLU paper of 2015 left
    assert any(m.endswith("He 2015") for m in unlisted(citations(scene_strings()), forms))


def page_problems(page_text: str, bib_path: Path = BIB) -> list[str]:
    """Entries of the .bib whose title or link is not on the references page."""
    problems = []
    for key, entry in parse_file(str(bib_path)).entries.items():
        title = re.sub(r"[{}\\]", "", entry.fields["title"]).replace("*", "")
        if title.lower() not in page_text.replace("*", "").replace("\\", "").lower():
            problems.append(f"{key}: title {title!r} not on the page")
        if entry.fields.get("url") and entry.fields["url"] not in page_text:
            problems.append(f"{key}: link {entry.fields['url']} not on the page")
        if not entry.persons.get("author"):
            problems.append(f"{key}: no authors")
    return problems


def test_every_entry_is_on_the_references_page_with_title_authors_and_link():
    assert page_problems(PAGE.read_text(encoding="utf-8")) == []


def test_tamper_twin_an_entry_missing_from_the_page_is_reported():
    page = PAGE.read_text(encoding="utf-8")
    cut = "\n".join(line for line in page.splitlines() if "Visualizing the Loss Landscape" not in line)
    assert [p.split(":")[0] for p in page_problems(cut)] == ["li2018visualizing", "li2018visualizing"]


@pytest.mark.parametrize("text, expected", [
    ("He et al. 2015, Fig. 1", [("He", "2015", None)]),
    ("Glorot & Bengio 2010; He et al. 2015 (PReLU), §2.2", [("Glorot", "2010", None), ("He", "2015", "PReLU")]),
    ("Dong, Cordonnier & Loukas 2021, Fig. 1-2", [("Dong", "2021", None)]),
    ("Okabe & Ito (2008), as listed by Wong (2011)", [("Okabe", "2008", None), ("Wong", "2011", None)]),
    ("nostalgebraist 2020 (the logit lens)", [("nostalgebraist", "2020", "the logit lens")]),
    ("in March 2020 the loss fell", []),
])
def test_the_pattern_reads_the_forms_the_scenes_print(text, expected):
    assert [(f, y, q) for _, f, y, q in citations([("x", text)])] == expected
