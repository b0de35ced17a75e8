"""A signal at any moment of a run ends it without a Python traceback from any of its processes, and leaves nothing
half-written.

Example::

    pytest tests/test_signals.py -m slow

Hypothesis draws the moment (0 to 8 s after the start, about 0 included; on a 2-core machine the first 3 s load the
modules and plan, then the trainer and the render workers run) and the signal:
Ctrl-C in a terminal (SIGINT to the whole process group, as a terminal sends it) or a kill (SIGTERM to the command,
as ``kill`` and ``timeout`` send it), for a tiny real run: ``render.py train`` of a tiny config, and ``render.py
render`` of two cheap scenes with ``--jobs 2`` (a trainer process and two render workers). Every Python process of
the tree reports an uncaught exception to a log through a ``sitecustomize`` module put first on PYTHONPATH
(``sys.excepthook`` and ``threading.excepthook``); the command's own stderr, which the trainer shares, must hold no
"Traceback" either. One moment is out of any program's reach: Ctrl-C while the interpreter itself still imports
``site`` (the first tens of milliseconds), which Python reports as a fatal error before render.py's first line runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import CLI_TINY, ROOT, files_under

HOOK = '''\
"""Test hook (tests/test_signals.py): log every uncaught exception of this process to $RESIDUAL_TRACEBACK_LOG."""
import os, sys, threading, traceback

_LOG = os.environ.get("RESIDUAL_TRACEBACK_LOG")


def _record(exc_type, exc, tb):
    with open(_LOG, "a", encoding="utf-8") as fh:
        fh.write(f"--- pid {os.getpid()}: {' '.join(sys.argv)[:300]}\\n")
        fh.write("".join(traceback.format_exception(exc_type, exc, tb)))


if _LOG:
    _main, _thread = sys.excepthook, threading.excepthook
    sys.excepthook = lambda t, e, tb: (_record(t, e, tb), _main(t, e, tb))
    threading.excepthook = lambda args: (_record(args.exc_type, args.exc_value, args.exc_traceback), _thread(args))
'''

RUNS = {
    "train": ["train", "chain_rule", *CLI_TINY],
    "render": ["render", "cli_scenes:TinyTrace", "cli_scenes:TinySquare", *CLI_TINY, "--jobs", "2"],
}
SIGNALS = {"ctrl-c": signal.SIGINT, "kill": signal.SIGTERM}


def _run_and_signal(tmp: Path, run: str, how: str, delay: float) -> tuple[int, str, str, Path, Path]:
    """Start ``run`` in a session of its own, send the signal after ``delay`` s; (exit status, stderr, the
    tracebacks logged, the output folder, the cache)."""
    hook, out, cache, log = tmp / "hook", tmp / "out", tmp / "cache", tmp / "tracebacks.log"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    env = {**os.environ, "RESIDUAL_CACHE": str(cache), "RESIDUAL_TRACEBACK_LOG": str(log),
           "PYTHONPATH": os.pathsep.join([str(hook), str(ROOT / "tests")])}
    args = [*RUNS[run], *(["-o", str(out)] if run == "render" else [])]
    # A session of its own: the process group a terminal would send Ctrl-C to. SIGINT back to the default (a shell
    # without job control starts background jobs with SIGINT ignored, and Python keeps that; see test_cli).
    proc = subprocess.Popen([sys.executable, "render.py", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(delay)
    try:
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        pass  # it had finished
    _, err = proc.communicate(timeout=120)
    # Every process of the session is gone (a trainer or a worker left behind would go on writing).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"processes of the run were left behind after {how} at {delay:.3f} s")
    tracebacks = log.read_text(encoding="utf-8") if log.exists() else ""
    return proc.returncode, err.decode(errors="replace"), tracebacks, out, cache


def _leftovers(out: Path, cache: Path) -> list[Path]:
    """Half-written files: hidden temporaries (atomic_write's, the private render folders) in the output or cache."""
    return [p for p in [*files_under(out), *files_under(cache)]
            if any(part.startswith(".") for part in p.relative_to(out if p.is_relative_to(out) else cache).parts)]


def _check_signal(tmp: Path, run: str, how: str, delay: float) -> None:
    code, err, tracebacks, out, cache = _run_and_signal(tmp, run, how, delay)
    where = f"{run}, {how} at {delay:.3f} s (exit status {code})"
    if how == "ctrl-c" and err.startswith("Fatal Python error: init_import_site"):
        # Ctrl-C while the interpreter itself imports `site` (the venv's .pth files), before the first line of
        # render.py: Python prints this and exits 1 whatever the program; nothing of this project has run and
        # nothing is written. It can only happen in the first moments of the process.
        assert delay < 0.5 and code == 1 and not _leftovers(out, cache), f"{where}:\n{err[-3000:]}"
        return
    assert "Traceback" not in err, f"{where}:\n{err[-3000:]}"
    assert not tracebacks, f"{where}:\n{tracebacks[-3000:]}"
    # 0: it had finished; -2 or -15: the signal came before Python had started (its default action)
    assert code in (0, 130, 143, -signal.SIGINT, -signal.SIGTERM), f"{where}:\n{err[-3000:]}"
    assert not _leftovers(out, cache), f"{where}: {_leftovers(out, cache)}"


@pytest.mark.slow
@settings(max_examples=10, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(run=st.sampled_from(sorted(RUNS)), how=st.sampled_from(sorted(SIGNALS)),
       delay=st.one_of(st.sampled_from([0.0, 0.02, 0.1, 0.3, 0.6, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]), st.floats(0, 8)))
def test_a_signal_at_any_moment_leaves_no_traceback_and_nothing_half_written(tmp_path_factory, run, how, delay):
    _check_signal(tmp_path_factory.mktemp("signal"), run, how, delay)


@pytest.mark.parametrize("delay", [0.0, 0.4])
def test_ctrl_c_while_the_command_starts_leaves_no_traceback(tmp_path, delay):
    """The fast set's share: Ctrl-C at once and while the modules load (the first second)."""
    _check_signal(tmp_path, "train", "ctrl-c", delay)


def test_the_traceback_log_catches_a_traceback(tmp_path):
    """The twin: the hook does log an uncaught exception of a process started with it (here a KeyboardInterrupt,
    what Ctrl-C raised while render.py's modules loaded before cli.quiet_ctrl_c)."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    log = tmp_path / "log"
    env = {**os.environ, "RESIDUAL_TRACEBACK_LOG": str(log), "PYTHONPATH": str(hook)}
    done = subprocess.run([sys.executable, "-c", "raise KeyboardInterrupt"], env=env, capture_output=True, text=True)
    assert "Traceback" in done.stderr and "KeyboardInterrupt" in log.read_text()


@pytest.mark.parametrize("held", [True, False], ids=["held", "twin-not-held"])
def test_a_signal_while_a_trainer_module_loads_is_raised_after_the_import(held):
    """simulation.runs.signals_held: a Ctrl-C that comes while torch loads (whose import calls Python from C++, where
    a KeyboardInterrupt aborts the process: a CI run ended with status -6 so) runs its handler once the block has
    ended; the twin without it runs the handler inside the block."""
    from simulation.runs import signals_held

    seen: list = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with signals_held() if held else contextlib.nullcontext():
            signal.raise_signal(signal.SIGINT)
            seen.append("block ends")
        seen.append("after")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen == (["block ends", signal.SIGINT, "after"] if held else [signal.SIGINT, "block ends", "after"])


def test_an_ignored_signal_stays_ignored_while_held():
    from simulation.runs import signals_held

    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with signals_held():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            signal.raise_signal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)
