"""Fresh-interpreter probes that share one import of torch or of Manim: :func:`run_forked`.

Example::

    done = run_forked("import sys, simulation.data; print('sklearn' in sys.modules)")
    assert done.returncode == 0 and done.stdout.strip() == "False"

A probe that asks what an import loads, or that trains a few steps, ran in an interpreter of its own, and each
paid for importing torch (~1.2 CPU s) or Manim (~1 CPU s). Here one server process per test worker and per
``server`` (:data:`SERVERS`) imports that library once (and nothing of this project's: it starts from an empty
folder) and forks a child for each probe: the child runs the code as ``python -c`` would, in ``cwd``, with stdout
and stderr of its own (and ``env`` for os.environ, when given), then exits; the answer is what ``subprocess.run``
would have returned. A probe therefore starts with the server's library and what it imports loaded (torch: numpy,
tqdm, the standard library; Manim: numpy, scipy, PIL, cairo, Pango, not torch): it may ask about any module but
those. Nothing of the library runs in the server before a fork, and a server reads no variable of this project's.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["run_forked", "start_forked", "Forked", "SERVERS"]

ROOT = Path(__file__).resolve().parent.parent
# name: (what the server imports before it forks, variables it starts with). The Manim server hashes strings with
# PYTHONHASHSEED=0, which is fixed when an interpreter starts: tests/test_segment_key.py's "another process" hashes
# strings otherwise than the test's own, which hashes at random.
SERVERS = {"torch": (("torch",), {}), "manim": (("manim",), {"PYTHONHASHSEED": "0"})}

SERVER = r"""
import atexit, gc, json, os, sys, traceback
for name in sys.argv[1:]:
    __import__(name)
os.chdir("/")
gc.freeze()  # the library's objects: the children's collections leave them (and their pages) alone
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.chdir(request["cwd"])
            if request["env"] is not None:
                os.environ.clear()
                os.environ.update(request["env"])
                sys.path[1:1] = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
            for fd, name, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY),
                                    (2, request["stderr"], os.O_WRONLY)):
                os.dup2(os.open(name, flags), fd)
            sys.argv = request["argv"]
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            status = 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                atexit._run_exitfuncs()  # what an interpreter does as it exits
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)  # the child never goes on into the server's loop
    print(json.dumps({"pid": pid}), flush=True)
    print(json.dumps({"returncode": os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}), flush=True)
"""

_servers: dict[str, subprocess.Popen] = {}


def _start(name: str) -> subprocess.Popen:
    server = _servers.get(name)
    if server is None or server.poll() is not None:
        modules, variables = SERVERS[name]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RESIDUAL_")}
        env.update(variables, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        # Unbuffered: an answer is read byte by byte up to its newline, so the next one stays in the pipe for select.
        # SIGINT back to the default, so that Python gives the server (and its children) its own handler: a shell
        # without job control starts background jobs with SIGINT ignored, and Python keeps an inherited SIG_IGN.
        server = _servers[name] = subprocess.Popen([sys.executable, "-c", SERVER, *modules], stdin=subprocess.PIPE,
                                                   stdout=subprocess.PIPE, bufsize=0, env=env, cwd="/",
                                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        atexit.register(_stop, server)
    return server


def _stop(server: subprocess.Popen) -> None:
    for name, child in list(_running.items()):
        if child._process is server:
            child.kill()
    if server.poll() is None:
        server.stdin.close()
        server.wait(timeout=60)


_running: dict[str, "Forked"] = {}  # server name: its child not waited for yet (a test that failed before its wait)


class Forked:
    """A child started by :func:`start_forked`: ``pid`` (to signal it) and :meth:`wait`."""

    def __init__(self, server: str, process: subprocess.Popen, args: list[str], folder: Path) -> None:
        self.server, self._process, self.args, self._folder = server, process, args, folder
        self.pid = self._answer(None)["pid"]

    def _answer(self, timeout: float | None) -> dict:
        fd, answer = self._process.stdout.fileno(), b""
        while not answer.endswith(b"\n"):
            if not select.select([fd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            byte = os.read(fd, 1)
            if not byte:
                raise RuntimeError(f"the {self.server} probe server stopped (exit status {self._process.wait()})")
            answer += byte
        return json.loads(answer)

    def kill(self) -> None:
        """SIGKILL it, if it still runs, and wait: the server can take the next probe."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.wait(timeout=60)

    def wait(self, timeout: float | None = None) -> subprocess.CompletedProcess:
        """Its exit status (negative: the signal that ended it), stdout and stderr, as subprocess.run gives them with
        ``capture_output=True, text=True``; TimeoutExpired after ``timeout`` s."""
        returncode = self._answer(timeout)["returncode"]
        _running.pop(self.server, None)
        try:
            return subprocess.CompletedProcess(self.args, returncode, (self._folder / "stdout").read_text(),
                                               (self._folder / "stderr").read_text())
        finally:
            shutil.rmtree(self._folder, ignore_errors=True)


def start_forked(code: str, cwd: Path | str = ROOT, env: dict[str, str] | None = None, server: str = "torch",
                 argv: list[str] | None = None) -> Forked:
    """Start ``code`` as ``python -c code`` would in ``cwd`` (``argv``: its sys.argv, default ["-c"]), in a child of
    ``server`` (its library loaded, see the module docstring), with ``env`` as os.environ (None: the server's, this
    process's without RESIDUAL_*; its PYTHONPATH goes before the rest of sys.path, as at a start). sys.path also
    holds the checkout's root (the server's PYTHONPATH). Only one child of a server runs at a time: wait for it."""
    if server in _running:  # a test that failed before it waited for its child
        _running[server].kill()
    process = _start(server)
    folder = Path(tempfile.mkdtemp(prefix="forked-"))
    (folder / "stdout").touch()
    (folder / "stderr").touch()
    args = argv or ["-c"]
    process.stdin.write(json.dumps({"code": code, "cwd": str(cwd), "stdout": str(folder / "stdout"),
                                    "stderr": str(folder / "stderr"), "env": env, "argv": args}).encode() + b"\n")
    child = _running[server] = Forked(server, process, ["python", *args] if argv else ["python", "-c", code], folder)
    return child


def run_forked(code: str, cwd: Path | str = ROOT, env: dict[str, str] | None = None,
               server: str = "torch") -> subprocess.CompletedProcess:
    """:func:`start_forked` and wait: what ``subprocess.run([python, "-c", code], cwd=cwd, env=env,
    capture_output=True, text=True)`` would return, run in a child of ``server``."""
    return start_forked(code, cwd, env, server).wait()
