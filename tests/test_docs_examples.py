"""Every fenced shell and Python example of README.md and docs/ still matches the code.

The fast check (default run) reads each block: a ``render.py`` / ``residual-lecture`` command is parsed by the real
click command line (a renamed option, a wrong value or a missing file fails), ``python -m MODULE`` must name a
module, ``bash FILE JOB`` a file and, for bootstrap.sh, one of its jobs, a file given to ``manim`` must exist, and
a Python block must compile and import only what exists. The slow check runs them against tiny settings in a
temporary folder and cache: ``render`` and ``all`` with ``--check`` (every input checked, what would be trained and
rendered said, nothing written), ``list``, ``doctor`` and ``--help`` for real, Python blocks in a fresh interpreter.

A block that must not run at all is marked by the line ``<!-- illustrative -->`` right before its fence (install
commands for other systems, placeholders); ``<!-- slow -->`` keeps a block out of the slow set's real runs (a whole
lecture) but it is still parsed. The tamper twins show that a renamed option, a missing module and a missing import
are reported.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```([a-z]*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELLS = {"bash", "sh", "shell", "console"}
PYTHONS = {"python", "py"}
PYTHON_EXES = re.compile(r"^(?:\S*/)?python(?:3(?:\.\d+)?)?$")
RENDER_ALIASES = {"render.py", "residual-lecture"}
RUN_FOR_REAL = {"list", "doctor"}
CHECKABLE = {"render", "all"}


@dataclass(frozen=True)
class Block:
    """One fenced example: where it is, its language, its text and its marker (None, 'slow', 'illustrative')."""
    where: str
    lang: str
    text: str
    marker: str | None


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks_of(path: Path, text: str | None = None) -> list[Block]:
    text = path.read_text(encoding="utf-8") if text is None else text
    out = []
    for m in FENCE.finditer(text):
        lang = m.group(1)
        if lang not in SHELLS | PYTHONS:
            continue
        before = [line.strip() for line in text[:m.start()].splitlines() if line.strip()]
        marker = re.fullmatch(r"<!-- (slow|illustrative) -->", before[-1]) if before else None
        line = text[:m.start()].count("\n") + 1
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{line}"
        out.append(Block(where, "python" if lang in PYTHONS else "shell", m.group(2), marker and marker.group(1)))
    return out


def all_blocks() -> list[Block]:
    return [b for path in doc_files() for b in blocks_of(path)]


def commands(shell: str) -> list[list[str]]:
    """The commands of a shell block: continuations joined, comments dropped, split at && ; || and |, leading
    NAME=value assignments dropped."""
    out = []
    for line in shell.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("$ "):
            line = line[2:]
        words = shlex.split(line, comments=True)
        current: list[str] = []
        for word in [*words, "&&"]:
            if word in {"&&", "||", ";", "|"}:
                while current and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", current[0]):
                    current.pop(0)
                if current:
                    out.append(current)
                current = []
            else:
                current.append(word)
    return out


def render_args(words: list[str]) -> list[str] | None:
    """The arguments after ``render.py`` (or ``residual-lecture``, ``python -m residual_lecture``), else None."""
    if words[0] in RENDER_ALIASES or words[0].endswith("/residual-lecture"):
        return words[1:]
    if PYTHON_EXES.match(words[0]) and len(words) > 1:
        if words[1].endswith("render.py"):
            return words[2:]
        if words[1:3] == ["-m", "residual_lecture"]:
            return words[3:]
    return None


def parse_render(args: list[str]) -> click.Context | None:
    """Parse ``args`` with render.py's click group and the subcommand they name; raises click's error for a bad
    option, value or file. None for a bare ``render.py`` or ``--help``."""
    from render import cli
    if not args or "--help" in args or "-h" in args:
        return None
    with cli.make_context("render.py", list(args)) as ctx:
        rest = [*getattr(ctx, "_protected_args", ()), *ctx.args]  # click 8.2+ keeps the subcommand there
        if not rest:
            return None
        name, command, rest = cli.resolve_command(ctx, rest)
        return command.make_context(name, rest, parent=ctx)


def problems_of_command(words: list[str]) -> str | None:
    """Why the command ``words`` no longer matches the code, or None."""
    if any(re.search(r"<[^>]+>", w) for w in words):
        return None  # a placeholder (<digest>): parsed only when filled in
    args = render_args(words)
    if args is not None:
        try:
            parse_render(args)
        except click.ClickException as error:
            return f"{shlex.join(words)}: {error.format_message()}"
        return None
    exe = Path(words[0]).name
    if PYTHON_EXES.match(exe) and len(words) > 2 and words[1] == "-m":
        if importlib.util.find_spec(words[2].split()[0]) is None:
            return f"{shlex.join(words)}: no module {words[2]}"
    elif PYTHON_EXES.match(exe) and len(words) > 1 and words[1].endswith(".py") and not (ROOT / words[1]).exists():
        return f"{shlex.join(words)}: no file {words[1]}"
    elif exe == "bash" and len(words) > 1 and words[1].endswith(".sh"):
        script = ROOT / words[1]
        if not script.exists():
            return f"{shlex.join(words)}: no file {words[1]}"
        if script.name == "bootstrap.sh" and len(words) > 2 and words[2] not in {"lecture", "test", "setup"}:
            return f"{shlex.join(words)}: bootstrap.sh has no job {words[2]!r}"
    elif exe == "manim":
        files = [w for w in words[1:] if w.endswith(".py")]
        if any(not (ROOT / f).exists() for f in files):
            return f"{shlex.join(words)}: no file {files}"
    return None


def problems_of_python(code: str) -> list[str]:
    """A Python block that does not compile, or imports a module that does not exist."""
    try:
        tree = ast.parse(code)
    except SyntaxError as error:
        return [f"does not compile: {error}"]
    out = []
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
        for name in names:
            try:
                found = importlib.util.find_spec(name)
            except ModuleNotFoundError:
                found = None
            if found is None:
                out.append(f"imports {name}, which does not exist")
    return out


def unknown_names(words: list[str]) -> str | None:
    """Why the ``render.py`` command ``words`` names an option or a command that does not exist, or None. An
    illustrative block is checked this far: its files and values may be placeholders, its names may not (the
    translate page told a new user ``render.py explore --lang de``, which has no ``--lang``)."""
    args = render_args(words)
    if args is None or any(re.search(r"<[^>]+>", w) for w in words):
        return None
    try:
        parse_render(args)
    except click.NoSuchOption as error:
        return f"{shlex.join(words)}: {error.format_message()}"
    except click.UsageError as error:
        if "No such command" in error.format_message():
            return f"{shlex.join(words)}: {error.format_message()}"
    except click.ClickException:
        pass  # a placeholder file or value
    return None


def block_problems(block: Block) -> list[str]:
    if block.marker == "illustrative":
        if block.lang == "python":
            return []
        return [p for words in commands(block.text) if (p := unknown_names(words))]
    if block.lang == "python":
        return problems_of_python(block.text)
    return [p for words in commands(block.text) if (p := problems_of_command(words))]


BLOCKS = all_blocks()


@pytest.fixture(autouse=True)
def _checkout_view(outside_the_checkout, monkeypatch):
    """The test's own empty current folder (tests/conftest.py) with links to the checkout's files, so that the
    examples' relative paths (``examples/my_resnet.py``) resolve while whatever a command writes lands here."""
    for entry in ROOT.iterdir():
        if entry.name not in {".git", "media", ".cache", "site", ".hypothesis"}:
            (outside_the_checkout / entry.name).symlink_to(entry)
    monkeypatch.syspath_prepend(str(ROOT))
    return outside_the_checkout


def test_the_examples_are_found():
    langs = {b.lang for b in BLOCKS}
    assert langs == {"shell", "python"}
    assert sum(1 for b in BLOCKS if b.marker is None) >= 20
    readme = [b for b in BLOCKS if b.where.startswith("README.md")]
    assert any("bash bootstrap.sh test" in b.text for b in readme)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_example_matches_the_code(block):
    assert block_problems(block) == []


@pytest.mark.parametrize("snippet, expected", [
    ("```bash\n.venv/bin/python render.py render IdentityHighway --qualty m\n```\n", "No such option"),
    ("```bash\n.venv/bin/python render.py render IdentityHighway --quality x\n```\n", "Invalid value"),
    ("```bash\npython render.py renders IdentityHighway\n```\n", "No such command"),
    ("```bash\n.venv/bin/python -m benchmarks.no_such_bench\n```\n", "no module"),
    ("```bash\nbash bootstrap.sh lectures\n```\n", "no job"),
    ("```python\nfrom simulation.no_such_module import Trace\n```\n", "does not exist"),
    ("```python\ndef broken(:\n```\n", "does not compile"),
])
def test_tamper_twin_a_stale_example_is_reported(tmp_path, snippet, expected):
    page = tmp_path / "page.md"
    (block,) = blocks_of(page, snippet)
    found = block_problems(block)
    assert found and expected in found[0]
    marked = blocks_of(page, "<!-- illustrative -->\n" + snippet)[0]
    if expected in ("No such option", "No such command"):  # a name that does not exist: reported all the same
        assert block_problems(marked) and expected in block_problems(marked)[0]
    else:
        assert block_problems(marked) == []  # the marker really skips its values, files and imports


RUNNABLE = [b for b in BLOCKS if b.marker is None]


@pytest.mark.slow
def test_examples_run(_checkout_view, tmp_path, monkeypatch):
    """Every runnable example against tiny settings, in one process: render.py commands through click's test runner
    (``render``/``all`` with ``--check``; ``list``, ``doctor`` and ``--help`` for real; the others are parsed by
    the fast check), each Python block in a fresh interpreter. A temporary cache; files land in the test's folder."""
    from click.testing import CliRunner

    from render import cli
    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path / "cache"))
    failures, ran = [], 0
    for block in RUNNABLE:
        if block.lang == "python":
            script = tmp_path / "example.py"
            script.write_text(block.text, encoding="utf-8")
            run = subprocess.run([sys.executable, str(script)], cwd=_checkout_view, capture_output=True, text=True,
                                 timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
            ran += 1
            if run.returncode != 0:
                failures.append(f"{block.where}: {run.stderr[-1500:]}")
            continue
        for words in commands(block.text):
            args = render_args(words)
            if args is None or any(re.search(r"<[^>]+>", w) for w in words):
                continue
            ctx = parse_render(args)
            name = ctx.info_name if ctx is not None else None
            if name in CHECKABLE:
                args = [*args, "--check"]
            elif name not in RUN_FOR_REAL and ctx is not None:
                continue  # train, explore, slides, page, inspect: the fast check parsed them
            result = CliRunner().invoke(cli, args, catch_exceptions=True)
            ran += 1
            if result.exit_code not in ((0, 1) if name == "doctor" else (0,)):
                failures.append(f"{block.where}: {shlex.join(words)} -> exit {result.exit_code}\n"
                                f"{result.output[-1500:]}\n{result.exception!r}")
    assert ran >= 15
    assert failures == []


# -- files named in the text ------------------------------------------------------------------------------------------

REPO_PATH = re.compile(r"(?<![\w/.])((?:cli|scenes|simulation|narration|tests|benchmarks|web|examples|residual_lecture"
                       r"|locale|docs)/[\w./-]*\.(?:py|md|toml|json|js|html|css|pot|po|bib|png|gif))(?![\w])")
PLACEHOLDERS = {"tests/test_x.py"}  # "a test file of yours"
ILLUSTRATIVE_BLOCK = re.compile(r"^<!-- illustrative -->\s*\n```.*?^```", re.MULTILINE | re.DOTALL)


def missing_paths(text: str) -> list[str]:
    """Paths of the checkout named in ``text`` (``scenes/kit/base.py``, ``docs/how-to/watch.md``) that do not exist."""
    return sorted({p for p in REPO_PATH.findall(text) if p not in PLACEHOLDERS and not (ROOT / p).exists()})


@pytest.mark.parametrize("path", doc_files() + [ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_the_docs_name_exists(path):
    text = ILLUSTRATIVE_BLOCK.sub("", path.read_text(encoding="utf-8"))  # a walkthrough may name files it creates
    assert missing_paths(text) == [], "a file was moved or renamed: update the text"


def test_tamper_twin_a_moved_file_is_reported():
    assert missing_paths("the scene base is `scenes/base.py`; the kit's is scenes/kit/base.py") == ["scenes/base.py"]


# -- the interpreter a command names ----------------------------------------------------------------------------------

BARE_PYTHON = re.compile(r"(?<![\w/.-])(?<!-m )(?:python3?|pytest) "
                         r"(?:render\.py|-m (?!(?:pip|venv|residual_lecture)\b)[\w.]+|tests/)")
ACTIVATED_BLOCK = re.compile(r"^```[^\n]*\n(?:(?!^```).)*\bactivate\b.*?^```", re.MULTILINE | re.DOTALL)
USER_PAGES = [p for p in doc_files() if "developers" not in p.parts]  # README too


def bare_python_commands(text: str) -> list[str]:
    """Commands in ``text`` that run the checkout's code with a bare ``python`` (``python render.py ...``,
    ``python -m benchmarks.X``, ``pytest -m slow``): outside an activated environment (a block that says
    ``activate``) that ``python`` has neither torch nor manim, and the command fails where README's set-up made
    ``.venv``. ``python -m pip``, ``python3 -m venv`` and the installed package (``python -m residual_lecture``) are
    fine anywhere."""
    return BARE_PYTHON.findall(ACTIVATED_BLOCK.sub("", text))


@pytest.mark.parametrize("path", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_user_commands_name_the_venv_python(path):
    """A new user copied ``python render.py render DepthTimeMap --trace ...`` from the watch pages and got
    ``ModuleNotFoundError: No module named 'manim'``: README sets up ``.venv``, so the pages say
    ``.venv/bin/python``."""
    assert bare_python_commands(path.read_text(encoding="utf-8")) == []


def test_tamper_twin_a_bare_python_is_reported():
    assert bare_python_commands("draw it: `python render.py render DepthTimeMap --trace run.npz`") == [
        "python render.py"]
    assert bare_python_commands("```\npython -m benchmarks.bench_watch\npytest -m slow tests/test_x.py\n```") == [
        "python -m benchmarks.bench_watch", "pytest -m slow"]
    assert bare_python_commands("`.venv/bin/python -m pytest -m slow tests/test_x.py`, `python3 -m venv .venv`") == []
    assert bare_python_commands("`.venv/bin/python render.py list`, `python -m pip install dask`") == []
    assert bare_python_commands("```bash\nconda activate lecture\npython render.py doctor\n```") == []


# -- commands in running text ----------------------------------------------------------------------------------------

INLINE_COMMAND = re.compile(r"`((?:\S*python3? )?(?:render\.py|residual-lecture) [^`]+)`")


def unknown_names_inline(text: str) -> list[str]:
    """The ``render.py`` commands quoted in running text (`` `render.py explore --lang de` ``) that name an option or
    a command that does not exist; a span with a placeholder (``COMMAND``, ``NAME``, ``...``) is left alone."""
    out = []
    for m in INLINE_COMMAND.finditer(ILLUSTRATIVE_BLOCK.sub("", FENCE.sub("", text))):
        try:
            words = shlex.split(m.group(1))
        except ValueError:
            continue
        if any(re.fullmatch(r"[A-Z][A-Z_]+|\.\.\.|…", w) for w in words):
            continue
        if words[0] == "render.py":
            words = ["python", *words]
        if problem := unknown_names(words):
            out.append(problem)
    return out


@pytest.mark.parametrize("path", doc_files() + [ROOT / "CONTRIBUTING.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_commands_in_the_text_name_options_that_exist(path):
    assert unknown_names_inline(path.read_text(encoding="utf-8")) == []


def test_tamper_twin_an_inline_command_with_a_wrong_option_is_reported():
    assert unknown_names_inline("spread it over the cores with `render.py --jobs`") == [
        "python render.py --jobs: No such option '--jobs'."]
    assert unknown_names_inline("`render.py explore --lang de` and `render.py -v COMMAND`") == [
        "python render.py explore --lang de: No such option '--lang'."]
    assert unknown_names_inline("`.venv/bin/python render.py all --jobs 2`") == []
