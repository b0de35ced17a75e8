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
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["run_forked", "SERVERS"]

ROOT = Path(__file__).resolve().parent.parent
# name: (what the server imports before it forks, variables it starts with). The Manim server hashes strings with
# PYTHONHASHSEED=0, which is fixed when an interpreter starts: tests/test_segment_key.py's "another process" hashes
# strings otherwise than the test's own, which hashes at random.
SERVERS = {"torch": (("torch",), {}), "manim": (("manim",), {"PYTHONHASHSEED": "0"})}

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
            if request["env"] is not None:
                os.environ.clear()
                os.environ.update(request["env"])
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

_servers: dict[str, subprocess.Popen] = {}


def _start(name: str) -> subprocess.Popen:
    server = _servers.get(name)
    if server is None or server.poll() is not None:
        modules, variables = SERVERS[name]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RESIDUAL_")}
        env.update(variables, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        server = _servers[name] = subprocess.Popen([sys.executable, "-c", SERVER, *modules], stdin=subprocess.PIPE,
                                                   stdout=subprocess.PIPE, text=True, env=env, cwd="/")
        atexit.register(_stop, server)
    return server


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.stdin.close()
        server.wait(timeout=60)


def run_forked(code: str, cwd: Path | str = ROOT, env: dict[str, str] | None = None,
               server: str = "torch") -> subprocess.CompletedProcess:
    """Run ``code`` as ``python -c code`` would in ``cwd``, in a child of ``server`` (its library loaded, see the
    module docstring), with ``env`` as os.environ (None: the server's, this process's without RESIDUAL_*); its exit
    status (negative: the signal that ended it), stdout and stderr, as subprocess.run gives them with
    ``capture_output=True, text=True``. sys.path holds the checkout's root (the server's PYTHONPATH) whatever
    ``env`` says: it is read when an interpreter starts."""
    process = _start(server)
    with tempfile.TemporaryDirectory(prefix="forked-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        out.touch()
        err.touch()
        process.stdin.write(json.dumps({"code": code, "cwd": str(cwd), "stdout": str(out), "stderr": str(err),
                                        "env": env}) + "\n")
        process.stdin.flush()
        answer = process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the {server} probe server stopped (exit status {process.wait()})")
        return subprocess.CompletedProcess(["python", "-c", code], json.loads(answer), out.read_text(),
                                           err.read_text())
