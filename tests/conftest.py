"""Shared fixtures: every test gets its own trace cache and its own current folder, so nothing leaks between tests
or runs and nothing reaches the user's checkout (the guard at the end checks: tests/checkout_guard.py); the claim
tests share one more cache, read-only to them (tests/support.py: shared_traces), for the whole session."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

import checkout_guard

ROOT = Path(__file__).resolve().parent.parent  # the checkout (support.ROOT)

SHARED_CACHE_ENV = "RESIDUAL_TEST_CACHE"  # support.SHARED_CACHE_ENV (conftest is not imported by name)

# Hypothesis: a third of the examples in the default run ("fast"), new ones at every run, so that a developer's runs
# keep looking for inputs that break the scenes (three layout bugs were found that way). .ci/run sets
# HYPOTHESIS_PROFILE=ci: every example each test asks for, in both of its runs, the same ones at every CI run
# (derandomize: seeded from each test), so that a red CI means the change broke something, not that the search
# happened on an old bug; a failing input found locally goes in as an @example. A test that names its count takes
# support.examples(n).
settings.register_profile("fast", max_examples=34)
settings.register_profile("ci", max_examples=100, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))


# The environment pytest-xdist's workers start with (set on the controller, before they start; each is read once, at
# a process's start, so it cannot be set in a worker). A caller's own values win.
# - OMP_NUM_THREADS: torch gives each worker as many threads as the machine has cores, so two workers on two cores
#   ran four threads, and every small op's parallel region waited for a core: the conv autograd test took 0.03 s
#   alone and 4.8 s beside the other worker. One thread each, as the trainer uses (simulation/loop.py). Default run,
#   warm checkout, interleaved: 77.9 / 85.3 s with torch's threads, 69.9 / 71.8 s with one (docs/developers/speed.md).
# - glibc hands freed blocks of 128 KiB+ back to the kernel at once (mmap / heap trim), and the next frame or tensor
#   faults them in again page by page: the slow set spent 26 % of its CPU in the kernel (590 of 2230 s, 262 million
#   page faults). Larger thresholds keep them: a -q l render of ChainRuleProduct 5.7-5.9 -> 5.0-5.4 s, sys 0.9-1.2
#   -> 0.7-0.8 s, peak RSS 226 -> 268 MB.
WORKER_ENVIRONMENT = {"OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "33554432",
                      "MALLOC_TRIM_THRESHOLD_": "268435456"}


def pytest_configure(config):
    """On the controller, before pytest-xdist starts its workers (they inherit the environment): the workers'
    environment (WORKER_ENVIRONMENT), and one trace cache for the claim tests of this session, unless the caller
    gives one (.ci/run gives one folder to both of its pytest runs). Removed at the end if made here.

    In every process (controller and workers): bytecode is written as a default Python writes it. Where
    PYTHONDONTWRITEBYTECODE is set (containers often set it; this machine does), pytest never kept the ~90 test
    modules it rewrites for their asserts, and every worker rewrote them on every run: collection took 6.5 CPU s per
    worker, 4.9 with the cache (docs/developers/speed.md). The files go where any Python puts them
    (``__pycache__``, which the checkout guard ignores)."""
    sys.dont_write_bytecode = False
    if hasattr(config, "workerinput"):
        return
    if getattr(config.option, "numprocesses", None):
        for name, value in WORKER_ENVIRONMENT.items():
            os.environ.setdefault(name, value)
    if os.environ.get(SHARED_CACHE_ENV):
        return
    os.environ[SHARED_CACHE_ENV] = config._shared_trace_cache = tempfile.mkdtemp(prefix="claim-traces-")


# Python 3.11's cyclic collector runs a full (generation 2) pass each time the tracked objects have grown by a
# quarter, and every pass walks all of them: the built scenes the tests keep (tests/dry_run.built_scene), their
# texts, torch's and Manim's modules. In the default run that was ~28 full passes of ~0.18 s per worker, plus ~8,000
# young ones: ~6 CPU s a worker, 10 % of the run. Collecting the young generation every 50,000 allocations rather
# than 700, and the old ones rarely, leaves the same garbage for later passes (cycles only: reference counting
# frees the rest at once); the workers' peak RSS went from 1.11 to 1.17 GB. Default run, warm checkout, three
# interleaved rounds: 85.5 / 91.2 / 77.9 s with Python's thresholds, 76.9 / 70.6 / 72.4 s with these (docs/developers/speed.md).
GC_THRESHOLDS = (50_000, 20, 100)
gc.set_threshold(*GC_THRESHOLDS)


def _skip_interpreter_teardown() -> None:
    """The last exit handler of a pytest-xdist worker: every other one has run (the test caches removed) and the
    controller has its results, so end the process without the interpreter's teardown of torch, Manim and Chromium's
    driver (~2 s of every default run's end, both workers; the trainer does the same: simulation/cache.py)."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if os.environ.get("PYTEST_XDIST_WORKER"):  # registered before any other exit handler of the tests, so it runs last
    atexit.register(_skip_interpreter_teardown)


def pytest_unconfigure(config):
    folder = getattr(config, "_shared_trace_cache", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(SHARED_CACHE_ENV, None)


@pytest.fixture(scope="session")
def per_test_folders(tmp_path_factory) -> Path:
    """The folder of the autouse fixtures' per-test folders (this process's). They are made in it with
    tempfile.mkdtemp: pytest's mktemp lists the whole base folder to number each new one, which grows with every
    test (two autouse folders and a tmp_path each): ~1.3 CPU s of a default run's worker, O(n^2)."""
    return tmp_path_factory.mktemp("per-test")


@pytest.fixture(autouse=True)
def isolated_cache(per_test_folders, monkeypatch):
    """Point RESIDUAL_CACHE at a fresh folder for each test."""
    path = Path(tempfile.mkdtemp(prefix="trace-cache-", dir=per_test_folders))
    monkeypatch.setenv("RESIDUAL_CACHE", str(path))
    return path


@pytest.fixture(autouse=True)
def outside_the_checkout(per_test_folders, monkeypatch):
    """Run each test in a fresh empty current folder: what the commands write or read by default (``media/``,
    ``media/explore``, Manim's ``./media``) is there, never the user's checkout, which a render has filled (README's
    command 1 before command 2; issue 34). A test that needs a file of the checkout names it from ROOT."""
    path = Path(tempfile.mkdtemp(prefix="cwd-", dir=per_test_folders))
    monkeypatch.chdir(path)
    return path


# -- the checkout guard: the session fails if a file of the checkout appeared, changed or disappeared ------------

def _guard_skips(config) -> tuple[Path, ...]:
    """Folders of the checkout the tests may write: a --basetemp there, and the control data with --set_test."""
    skips = [Path(config.option.basetemp).resolve()] if getattr(config.option, "basetemp", None) else []
    if config.getoption("--set_test", default=False):
        skips.append(ROOT / "tests" / "control_data")
    return tuple(skips)


def pytest_sessionstart(session):
    """The checkout's files before any test module is imported; on the controller only under pytest-xdist (its
    session spans every worker's)."""
    config = session.config
    if hasattr(config, "workerinput"):
        return
    skips = _guard_skips(config)
    config._checkout_before = (skips, checkout_guard.snapshot(ROOT, skips))


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_checkout_before", None)
    if before is None:
        return
    skips, files = before
    changed = checkout_guard.differences(files, checkout_guard.snapshot(ROOT, skips))
    if changed:
        session.config._checkout_changed = changed
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    changed = getattr(config, "_checkout_changed", None)
    if changed:
        terminalreporter.section("checkout guard", sep="=", red=True, bold=True)
        terminalreporter.line(checkout_guard.message(ROOT, changed), red=True)


@pytest.fixture
def one_thread():
    """One torch thread, as the trainer uses: same numbers on any machine, and no oversubscribed cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_addoption(parser):
    # Manim's frames_comparison reads these two (manim's own conftest defines them; ours must too).
    parser.addoption("--set_test", action="store_true", default=False,
                     help="Write the frame-comparison control data under tests/control_data/ instead of comparing.")
    parser.addoption("--show_diff", action="store_true", default=False,
                     help="Show a failing frame comparison side by side (needs a display).")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """``--dist loadgroup`` (pyproject's addopts): give each test with an ``xdist_group`` mark the ``@group``
    suffix on its node id, which is how pytest-xdist's scheduler sends a group to one worker.

    pytest-xdist 3.8 writes the suffix into ``item._nodeid``; pytest 9.2 keeps node ids in ``item._id``, so the
    suffix is lost and every grouped test is scheduled alone (pytest-dev/pytest-xdist#1386): the scene
    builds the groups exist to share (tests/dry_run.py) were made on both workers. Where xdist's own suffix
    took, nothing is changed."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        suffix = f"@{'_'.join(names)}"
        if names and not item.nodeid.endswith(suffix):
            from _pytest.nodeid import NodeId  # pytest >= 9.2 only; older pytest took xdist's suffix above

            item._id = NodeId.parse(item.nodeid + suffix)
