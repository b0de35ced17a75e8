"""bootstrap.sh installs what the job needs: `lecture` and `setup` no browser, no valgrind and no test or benchmark
packages; `test` all of them; `--voice` the voices. Read from the script's own plan (``BOOTSTRAP_PLAN=1`` prints
the system packages and pip extras of a job and installs nothing), and checked against pyproject.toml's extras.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_ONLY_APT = {"chromium", "valgrind"}


def plan(*args: str) -> tuple[set[str], list[str]]:
    """(apt packages, pip extras) that ``bash bootstrap.sh ARGS`` would install."""
    out = subprocess.run(["bash", str(ROOT / "bootstrap.sh"), *args], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "BOOTSTRAP_PLAN": "1"}, check=True).stdout
    lines = dict(line.split(": ", 1) for line in out.strip().splitlines())
    return set(lines["apt"].split()), lines["extras"].split(",")


def extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def expand(names: list[str]) -> set[str]:
    """Every requirement of the extras ``names``, with [test]'s own extras expanded."""
    table, out = extras(), set()
    for name in names:
        for req in table[name]:
            if req.startswith("residual-lecture["):
                out |= expand(req[len("residual-lecture["):-1].split(","))
            else:
                out.add(req.split("==")[0].split(">=")[0].split("[")[0].strip())
    return out


@pytest.mark.parametrize("job", [("lecture",), ("setup",), ("lecture", "--lang", "zh")])
def test_the_lecture_installs_no_test_packages(job):
    apt, names = plan(*job)
    assert apt & TEST_ONLY_APT == set()
    assert "espeak-ng" not in apt
    packages = expand(names)
    for test_only in ("pytest", "playwright", "hypothesis", "tensorboard", "piper-tts"):
        assert test_only not in packages, f"bootstrap.sh {' '.join(job)} installs {test_only}"
    assert {"python-pptx", "webvtt-py"} <= packages  # the deck and the page work after the lecture


def test_voice_adds_the_voices_and_test_adds_everything():
    apt, names = plan("lecture", "--voice")
    assert "espeak-ng" in apt and apt & TEST_ONLY_APT == set()
    assert {"piper-tts", "pypinyin"} <= expand(names)
    apt, names = plan("test", "-m", "slow")
    assert TEST_ONLY_APT | {"espeak-ng", "texlive-latex-base"} <= apt
    assert {"pytest", "playwright", "piper-tts", "python-pptx", "mkdocs", "tensorboard"} <= expand(names)


def test_tamper_twin_an_unknown_job_is_refused():
    bad = subprocess.run(["bash", str(ROOT / "bootstrap.sh"), "lectures"], capture_output=True, text=True,
                         env={**os.environ, "BOOTSTRAP_PLAN": "1"}, timeout=60)
    assert bad.returncode == 2 and "unknown job 'lectures'" in bad.stderr


@pytest.mark.parametrize("extra, installed, expected", [
    ("present", "present", True), ("voice", "present", False), ("voice", "test,bench", True),
    ("bench", "test", False), ("test", "present,voice", False), ("docs", "test", True),
])
def test_an_installed_extra_is_not_installed_again(extra, installed, expected):
    script = (ROOT / "bootstrap.sh").read_text(encoding="utf-8")
    function = script[script.index("has_extra() {"):script.index("\n}\n", script.index("has_extra() {")) + 3]
    run = subprocess.run(["bash", "-c", f'{function}\nhas_extra "$1" "$2"', "bash", extra, installed], timeout=30)
    assert (run.returncode == 0) == expected
