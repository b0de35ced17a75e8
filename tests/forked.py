"""Fresh-interpreter probes that share one import of torch: :func:`run_forked`.

Example::

    done = run_forked("import sys, simulation.data; print('sklearn' in sys.modules)")
    assert done.returncode == 0 and done.stdout.strip() == "False"

A probe that asks what an import loads, or that trains a few steps, ran in an interpreter of its own, and each
paid for importing torch (~1.2 CPU s). Here one server process per test worker imports torch once (and nothing of
this project's: it starts from an empty folder) and forks a child for each probe: the child runs the code as
``python -c`` would, in ``cwd``, with stdout and stderr of its own, then exits; the answer is what
``subprocess.run`` would have returned. A probe therefore starts with torch and what torch imports loaded (numpy,
tqdm, the standard library): it may ask about any module but those, and must not ask whether torch is loaded
(tests/test_house.py's twin does, in an interpreter of its own). Nothing of torch runs in the server before a fork.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["run_forked", "PRELOADED"]

ROOT = Path(__file__).resolve().parent.parent
PRELOADED = ("torch",)  # what the server imports before it forks

SERVER = r"""
import json, os, sys, traceback
for name in sys.argv[1:]:
    __import__(name)
os.chdir("/")
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.chdir(request["cwd"])
            for fd, name, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY),
                                    (2, request["stderr"], os.O_WRONLY)):
                os.dup2(os.open(name, flags), fd)
            sys.argv = ["-c"]
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            status = 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)  # the child never goes on into the server's loop
    print(json.dumps(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])), flush=True)
"""

_server: subprocess.Popen | None = None


def _start() -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        _server = subprocess.Popen([sys.executable, "-c", SERVER, *PRELOADED], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True, env=env, cwd="/")
        atexit.register(_stop, _server)
    return _server


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.stdin.close()
        server.wait(timeout=60)


def run_forked(code: str, cwd: Path | str = ROOT) -> subprocess.CompletedProcess:
    """Run ``code`` as ``python -c code`` would in ``cwd``, in a child of the server (torch loaded, see the module
    docstring); its exit status (negative: the signal that ended it), stdout and stderr, as subprocess.run gives
    them with ``capture_output=True, text=True``. The server's PYTHONPATH starts with the checkout's root."""
    server = _start()
    with tempfile.TemporaryDirectory(prefix="forked-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        out.touch()
        err.touch()
        server.stdin.write(json.dumps({"code": code, "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}) + "\n")
        server.stdin.flush()
        answer = server.stdout.readline()
        if not answer:
            raise RuntimeError(f"the probe server stopped (exit status {server.wait()})")
        return subprocess.CompletedProcess(["python", "-c", code], json.loads(answer), out.read_text(),
                                           err.read_text())
