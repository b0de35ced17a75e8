"""The tests leave the user's checkout alone (issue 34): the guard (tests/checkout_guard.py, run by conftest.py) fails a
session that adds, changes or removes a file of the checkout, and the tests that read the commands' default folders
pass on a checkout that a lecture render has filled (README's command 1 before command 2)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checkout_guard import differences, snapshot
from support import ROOT

HERE = Path(__file__).resolve().parent


def test_snapshot_and_differences_name_every_added_changed_and_removed_file(tmp_path):
    for name in ("keep.txt", "edit.txt", "gone.txt", ".git/HEAD", ".venv/bin/python", "web/node_modules/x.js",
                 "pkg/__pycache__/m.pyc", ".hypothesis/examples/a", "scratch/ignored.bin"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("before")
    before = snapshot(tmp_path, skip=(tmp_path / "scratch",))
    assert sorted(before) == ["edit.txt", "gone.txt", "keep.txt"]
    (tmp_path / "edit.txt").write_text("after!")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "media" / "480p15").mkdir(parents=True)
    (tmp_path / "media" / "480p15" / "X.mp4").write_bytes(b"")
    for skipped in (".git/HEAD", "web/node_modules/x.js", "pkg/__pycache__/m.pyc", "scratch/ignored.bin"):
        (tmp_path / skipped).write_text("changed as well")
    after = snapshot(tmp_path, skip=(tmp_path / "scratch",))
    assert differences(before, after) == ["changed edit.txt", "removed gone.txt", "added media/480p15/X.mp4"]
    os.utime(tmp_path / "keep.txt", ns=(0, before["keep.txt"][1] + 1))  # same size, touched: a rewrite
    assert "changed keep.txt" in differences(before, snapshot(tmp_path, skip=(tmp_path / "scratch",)))


# -- the guard in a pytest session of its own ---------------------------------------------------------------------

PLANTED = '''
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_writes_a_clip_into_media():
    (ROOT / "media" / "480p15" / "en").mkdir(parents=True)
    (ROOT / "media" / "480p15" / "en" / "Leak.mp4").write_bytes(b"not a video")


def test_edits_a_file():
    (ROOT / "notes.txt").write_text("edited by a test")


def test_removes_a_file():
    (ROOT / "gone.txt").unlink()
'''

HARMLESS = '''
from pathlib import Path


def test_writes_where_tests_may(tmp_path):
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "Fine.mp4").write_bytes(b"x")
    Path("media").mkdir()  # the current folder: conftest's outside_the_checkout, not the checkout
    Path("media", "Default.mp4").write_bytes(b"x")
'''


def _project(tmp_path: Path, tests: str) -> Path:
    """A scratch checkout: this conftest.py and the guard, one planted test file, two files of its own."""
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    for name in ("conftest.py", "checkout_guard.py"):
        shutil.copy(HERE / name, project / "tests" / name)
    (project / "tests" / "test_planted.py").write_text(tests)
    (project / "notes.txt").write_text("the user's notes")
    (project / "gone.txt").write_text("a file a test removes")
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n')
    return project


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess:
    # The outer session's worker variables would make the inner conftest end its controller like a worker. Only
    # pytest-xdist of the installed plugins: the others' imports are most of a bare session's second.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RESIDUAL_"))}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "xdist.plugin", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_guard_fails_a_session_whose_tests_touch_the_checkout(tmp_path):
    """Three planted tests pass but write into media/, edit and remove a file of the (scratch) checkout: the run
    fails (exit 1) and names all three; under pytest-xdist, where the tests run in a worker and the guard on the
    controller."""
    project = _project(tmp_path, PLANTED)
    done = _pytest(project, "-n", "1")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "3 passed" in out and "checkout guard" in out and "3 file(s) of the checkout" in out, out
    for line in ("added media/480p15/en/Leak.mp4", "changed notes.txt", "removed gone.txt"):
        assert line in out, out


def test_the_guard_passes_a_session_that_writes_only_its_own_folders(tmp_path):
    """The twin of the test above: the same scratch checkout, a test that writes to tmp_path and to the current
    folder (the commands' default media/), exit 0 and no report."""
    project = _project(tmp_path, HARMLESS)
    done = _pytest(project, "-n", "0")
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "1 passed" in out and "checkout guard" not in out, out
    assert not (project / "media").exists()


# -- a checkout that a lecture render filled --------------------------------------------------------------------

PLANT = '''
import json, shutil, sys
from pathlib import Path
from click.testing import CliRunner
import render
from cli.media import place_files
from simulation.cache import cache_dir, is_cached, trace_path

plans = []
real = render.plan_render
render.plan_render = lambda *a, **k: plans.append(real(*a, **k)) or plans[-1]
result = CliRunner().invoke(render.cli, ["all", "--check"])
assert result.exit_code == 0, result.output
(plan,) = plans
for job in plan.jobs:  # what a render leaves: the clip and its record (cli/media.py: the way a worker's come back)
    place_files(job, {job.primary.name: b"a rendered clip"})
for config in plan.configs:  # a readable trace under each run's digest
    trace_path(config).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(sys.argv[1], trace_path(config))
assert plan.configs and all(is_cached(config) for config in plan.configs)
print(json.dumps({"scenes": len(plan.jobs), "traces": len(plan.configs), "cache": str(cache_dir())}))
'''

DEFAULT_READERS = [  # tests that run commands which read the default output folder media/
    "tests/test_loss_landscape.py::test_render_all_checks_the_chapter_and_renders_it_only_when_asked",
    "tests/test_cli.py::test_a_bad_memory_budget_is_one_line_and_list_still_works[abc]",
]


def _checkout_copy(target: Path) -> Path:
    """The checkout's files as a fresh clone has them (no media/, .cache/, venv or bytecode)."""
    ignore = shutil.ignore_patterns(".git", ".venv", "node_modules", "__pycache__", ".hypothesis", ".pytest_cache",
                                    "media", ".cache", "*.egg-info", "build", "output")
    shutil.copytree(ROOT, target, ignore=ignore, symlinks=True)
    return target


@pytest.mark.slow  # a copy of the checkout, the lecture's plan in a fresh interpreter, a pytest session in the copy
def test_the_tests_pass_in_a_checkout_that_a_lecture_render_filled(tmp_path):
    """README's command 1 (`bash bootstrap.sh lecture`) leaves every clip in media/ and every trace in .cache/;
    command 2 then runs the tests. Planted as a render leaves them (each clip with its record, each trace readable),
    `render.py all --check` in the copy says there is nothing to render (the planting is real), and the tests that
    read the default folders still pass there, with the guard on."""
    copy = _checkout_copy(tmp_path / "checkout")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RESIDUAL_"))}
    trace = ROOT / "tests" / "data" / "chain_rule" / "residual.npz"
    plant = subprocess.run([sys.executable, "-c", PLANT, str(trace)], cwd=copy, env=env, capture_output=True,
                           text=True, timeout=600)
    assert plant.returncode == 0, plant.stderr
    planted = json.loads(plant.stdout.splitlines()[-1])
    assert Path(planted["cache"]) == copy / ".cache" / "traces" and planted["scenes"] > 10
    check = subprocess.run([sys.executable, "render.py", "all", "--check"], cwd=copy, env=env, capture_output=True,
                           text=True, timeout=600)
    assert f"0 of {planted['scenes']} scenes would be rendered" in check.stdout, check.stdout + check.stderr
    run = [sys.executable, "-m", "pytest", "-q", "-n", "0", *DEFAULT_READERS]
    tests = subprocess.run(run, cwd=copy, env=env, capture_output=True, text=True, timeout=600)
    assert tests.returncode == 0 and f"{len(DEFAULT_READERS)} passed" in tests.stdout, tests.stdout + tests.stderr
    # The twin: the copy's tests run in the checkout itself again (conftest's outside_the_checkout without its
    # chdir), as before issue 34: the lecture's check finds every clip rendered and the test fails.
    conftest = copy / "tests" / "conftest.py"
    text = conftest.read_text()
    assert text.count("    monkeypatch.chdir(path)\n") == 1
    conftest.write_text(text.replace("    monkeypatch.chdir(path)\n", ""))
    tampered = subprocess.run(run, cwd=copy, env=env, capture_output=True, text=True, timeout=600)
    assert tampered.returncode == 1 and f"FAILED {DEFAULT_READERS[0]}" in tampered.stdout, tampered.stdout
    assert f"0 of {planted['scenes']} scenes would be rendered" in tampered.stdout, tampered.stdout
