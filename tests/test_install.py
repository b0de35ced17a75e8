"""The installed package: one ``residual_lecture`` in site-packages, the code's imports resolved inside it.

The fast tests check that pyproject.toml's package lists, ``residual_lecture.ALIASES`` and the checkout's folders
agree, and the alias finder on a toy installed package (in a process without the checkout on its path; its twin
shows the same imports fail without the finder). The slow test builds the wheel, installs it into a fresh
virtual environment (the dependencies come from this one's site-packages, so nothing is downloaded), renders a
scene with the console command from another folder and starts the processes the code starts (~25 CPU s).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOT_INSTALLED = {"tests", "benchmarks", "residual_lecture", "notebooks", "docs", "web", "locale"}  # folders, not code
DATA = {"residual_lecture.web", "residual_lecture.locale"}  # data folders shipped as packages (page assets, catalogs)


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_the_wheel_holds_every_package_of_the_checkout_under_one_name():
    """Every package folder of the checkout (its subpackages too) is a subpackage of residual_lecture, mapped to
    its folder; the alias list names exactly those top-level folders plus render.py; nothing else is installed."""
    import residual_lecture

    tool = _pyproject()
    packages, dirs = set(tool["packages"]), tool["package-dir"]
    assert all(p == "residual_lecture" or p.startswith("residual_lecture.") for p in packages)
    assert "py-modules" not in tool  # a top-level module (render) would land beside residual_lecture
    top = {d.name for d in ROOT.iterdir() if (d / "__init__.py").is_file() and d.name not in NOT_INSTALLED}
    assert {f"residual_lecture.{name}" for name in top} | DATA == {
        p for p in packages if p.count(".") == 1}
    assert all(dirs[f"residual_lecture.{name}"] == name for name in top)
    assert set(residual_lecture.ALIASES) == top | {"render"}
    for name in top:  # subpackages (scenes/kit ...) need their own entry in `packages`
        for init in (ROOT / name).rglob("__init__.py"):
            dotted = ".".join(init.parent.relative_to(ROOT).parts)
            assert f"residual_lecture.{dotted}" in packages, f"add residual_lecture.{dotted} to pyproject.toml"
    render = ROOT / "residual_lecture" / "render.py"
    assert render.is_symlink() and render.resolve() == (ROOT / "render.py").resolve()


def test_the_code_starts_its_own_modules_by_the_name_it_was_imported_under():
    """``python -m simulation.x`` written out would not run from an installed copy (the module is
    residual_lecture.simulation.x there): processes are started with ``cli.render_command()`` or a module's
    ``__spec__.name`` / ``__package__``. The twin: the check finds such a literal."""
    import re

    literal = re.compile(r"""["']-m["']\s*,\s*f?["'](?:%s)\b""" % "|".join(
        __import__("residual_lecture").ALIASES))
    found = [f"{path.relative_to(ROOT)}:{n}" for name in __import__("residual_lecture").ALIASES
             for path in ([ROOT / f"{name}.py"] if (ROOT / f"{name}.py").is_file() else (ROOT / name).rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if literal.search(line)]
    assert found == [], f"start these by the imported name (cli.render_command, __spec__.name): {found}"
    assert literal.search("""subprocess.run([sys.executable, "-m", "simulation.cache", "--stream"])""")


TOY_MODULES = {
    "simulation/__init__.py": "",
    "simulation/a.py": "class Thing:\n    pass\n",
    "simulation/b.py": "from simulation.a import Thing\nimport cli\n",
    "simulation/tool.py": "import sys\nfrom simulation.b import Thing\n"
                          "if __name__ == '__main__':\n    print('tool', __spec__.name, Thing.__module__)\n",
    "cli/__init__.py": "",
    "scenes/__init__.py": "",
    "render.py": "import simulation.b\n",
}


def _toy(tmp_path: Path) -> Path:
    """site/residual_lecture: this package's __init__.py with toy subpackages inside, as a wheel lays them out."""
    package = tmp_path / "site" / "residual_lecture"
    for name, text in TOY_MODULES.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    (package / "__init__.py").write_text((ROOT / "residual_lecture" / "__init__.py").read_text())
    return package.parent


def _python(site: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    # -I -S: no PYTHONPATH, no current folder, no site-packages (this venv's editable install maps the checkout's
    # names): only the toy site and the standard library to import from
    return subprocess.run([sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {code}",
                           *args], capture_output=True, text=True, cwd=site, timeout=60)


ALIAS_PROBE = """
import residual_lecture, importlib
assert residual_lecture.INSTALLED
import simulation.b, render
from simulation.a import Thing
m = sys.modules
assert m["simulation.b"] is m["residual_lecture.simulation.b"], "two copies of one module"
assert m["cli"] is m["residual_lecture.cli"] and m["render"] is m["residual_lecture.render"]
assert Thing is m["residual_lecture.simulation.a"].Thing and Thing.__module__ == "residual_lecture.simulation.a"
assert simulation.b.__name__ == simulation.b.__spec__.name == "residual_lecture.simulation.b"  # python -m NAME
assert m["simulation"].__spec__.name == "residual_lecture.simulation"
try:
    import cli.nonexistent
except ModuleNotFoundError as exc:
    assert exc.name in ("cli.nonexistent", "residual_lecture.cli.nonexistent"), exc.name
else:
    raise AssertionError("a missing submodule imported")
try:
    import clix  # a name that only starts like ours is not ours
except ModuleNotFoundError:
    pass
print("ok")
"""


def test_the_alias_finder_gives_one_module_under_both_names(tmp_path):
    site = _toy(tmp_path)
    done = _python(site, ALIAS_PROBE)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    # A process the code starts: python -m residual_lecture.simulation.tool, the real name (cli.python_module)
    done = subprocess.run([sys.executable, "-S", "-m", "residual_lecture.simulation.tool"], capture_output=True,
                          text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["tool", "residual_lecture.simulation.tool", "residual_lecture.simulation.a"]


def test_without_the_finder_the_same_imports_fail(tmp_path):
    """The twin: the toy's absolute imports resolve only through residual_lecture's finder."""
    site = _toy(tmp_path)
    done = _python(site, "import simulation.b")
    assert done.returncode != 0 and "No module named 'simulation'" in done.stderr
    (site / "residual_lecture" / "__init__.py").write_text("")  # a package without the finder
    done = _python(site, "import residual_lecture.simulation.b")
    assert done.returncode != 0 and "No module named 'simulation'" in done.stderr


def test_a_checkout_uses_its_folders_and_installs_no_alias():
    code = ("import residual_lecture, simulation.config; "
            "from residual_lecture import AliasFinder; "
            "assert not residual_lecture.INSTALLED and simulation.config.__name__ == 'simulation.config'; "
            "assert not any(isinstance(f, AliasFinder) for f in sys.meta_path); "
            "from cli import INSTALLED, render_command; assert not INSTALLED; print(render_command()[1])")
    done = subprocess.run([sys.executable, "-c", f"import sys; {code}"], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ROOT / "render.py")


@pytest.mark.slow
def test_the_wheel_installs_and_renders_from_another_folder(tmp_path):
    """pip wheel . ; a fresh venv (this venv's site-packages on its path through a .pth, so no dependency is
    downloaded); the wheel installed without dependencies (only residual_lecture at the top of the fresh
    site-packages); `residual-lecture render NestedFunctionClasses` (no training) in another folder; a training
    subprocess and the command line started by the installed code; reveal.js found in the installed copy."""
    wheels, venv, elsewhere = tmp_path / "wheels", tmp_path / "venv", tmp_path / "elsewhere"
    # No PYTHONPATH: a checkout on it would show pip a build's residual_lecture.egg-info as an installed copy
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # Built from a copy: pip builds in the source folder, whose build/ could hold modules deleted since
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", ".cache", "media", "output", "__pycache__", ".hypothesis", "tests"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(wheels)], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("residual_lecture-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    before = {p.name for p in site.iterdir()}
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
                              str(wheel)], capture_output=True, text=True, timeout=600, env=env)
    assert install.returncode == 0, install.stderr[-3000:]
    added = {p.name for p in site.iterdir()} - before - {"__pycache__"}
    assert {name for name in added if not name.endswith(".dist-info")} == {"residual_lecture"}, added
    # After the install (pip would take this venv's editable copy for an installed one): torch, manim ... from here.
    # A path in a .pth is not a site folder: the .pth files there (its editable install's finder) do not run.
    (site / "zz_host_packages.pth").write_text(sysconfig.get_path("purelib") + "\n")
    elsewhere.mkdir()
    env["RESIDUAL_CACHE"] = str(tmp_path / "cache")
    probe = subprocess.run([str(python), "-c", "import cli"], capture_output=True, text=True, cwd=elsewhere, env=env)
    assert probe.returncode != 0, "a top-level `cli` is importable from the fresh venv"
    done = subprocess.run([str(venv / "bin" / "residual-lecture"), "render", "NestedFunctionClasses", "-q", "l",
                           "-o", "out"], capture_output=True, text=True, cwd=elsewhere, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (elsewhere / "out" / "480p15" / "en" / "NestedFunctionClasses.mp4").stat().st_size > 0
    # The processes the code starts, from the installed copy: a scene's training subprocess
    # (python -m residual_lecture.simulation.cache) and a render worker's command line (python -m residual_lecture).
    code = ("import residual_lecture; from simulation.cache import get_traces; "
            "from simulation.experiments import build_runs; from cli import render_command; "
            "get_traces(list(build_runs('chain_rule', {'steps': 20, 'depth': 3}).values())[:1], in_subprocess=True); "
            "import subprocess; print(subprocess.run([*render_command(), '--help'], capture_output=True, text=True, "
            "check=True).stdout.splitlines()[0])")
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=elsewhere, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("Usage: residual-lecture ")
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 1, "the trace was not cached in $RESIDUAL_CACHE"
    reveal = subprocess.run([str(python), "-c", "import residual_lecture; from cli.deck import reveal_dir; "
                                                "print(reveal_dir())"], capture_output=True, text=True, env=env,
                            cwd=elsewhere)
    if (ROOT / "web" / "node_modules" / "reveal.js" / "package.json").is_file():  # shipped when present at build
        assert reveal.returncode == 0 and Path(reveal.stdout.strip()).is_relative_to(site), reveal.stderr
    else:
        assert "RESIDUAL_REVEAL_DIR" in reveal.stderr
    # the explorer's page assets travel with the installed copy (render.py explore copies them)
    explore = subprocess.run([str(python), "-c", "import residual_lecture; from cli.explore import WEB_DIR; "
                                                 "print(' '.join(p.name for p in WEB_DIR.iterdir()))"],
                             capture_output=True, text=True, env=env, cwd=elsewhere)
    assert explore.returncode == 0, explore.stderr
    # the catalogs travel too: the installed copy says its Chinese title from them
    words = subprocess.run([str(python), "-c", "import residual_lecture; from narration import i18n; "
                                               "print(i18n.coverage('zh')[0], i18n.LOCALE_DIR)"],
                           capture_output=True, text=True, env=env, cwd=elsewhere)
    assert words.returncode == 0 and int(words.stdout.split()[0]) > 400, words.stderr
    assert Path(words.stdout.split()[1]).is_relative_to(site)
    assert {"index.html", "explore.js", "explore.css"} <= set(explore.stdout.split()), explore.stdout
