"""A real Dask cluster for tests, started with the very commands of docs/how-to/cluster.md and sweeps.md.

Example::

    cluster = Cluster(tmp_path, n=2)      # tcp://127.0.0.1:<free port>; the scheduler knows nothing of this project
    try: ... run_sweep(configs, scheduler=cluster.address) ...
    finally: cluster.stop()

The commands come out of the pages' fenced ``bash`` blocks (:func:`documented_commands`), so the docs cannot drift
from what the tests run. Only the placeholders change: ``HOST`` and ``0.0.0.0`` become 127.0.0.1, the port 8786 a
free port, ``--nworkers 4`` the number of workers the test asks for, ``.venv/bin/`` the folder of the Python running
the tests. The scheduler runs in an empty folder outside the checkout with a clean environment (``PATH`` = the
venv's ``bin`` alone, no ``PYTHONPATH``), as on a machine with Dask and no checkout; the workers run in the
checkout, as the page says (their scratch folders under the test's tmp: ``DASK_TEMPORARY_DIRECTORY``).

Used by tests/test_sweep.py (sweeps) and tests/test_render_cluster.py (renders).
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent  # holds `dask` (and this python)
PAGES = (ROOT / "docs" / "how-to" / "cluster.md", ROOT / "docs" / "how-to" / "sweeps.md")

__all__ = ["Cluster", "free_port", "wait_for", "documented_commands", "unpickle_without_project", "PAGES"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def documented_commands(page: Path) -> dict[str, str]:
    """The page's command lines (fenced ``bash`` blocks, comments dropped) that start the scheduler
    (``"scheduler"``), the workers (``"worker"``) and the client (``"client"``: the first line that runs
    render.py). AssertionError when the page lacks one or shows two different ones."""
    blocks = re.findall(r"^```bash\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    lines = [line.split(" #")[0].strip() for block in blocks for line in block.splitlines()]
    found: dict[str, list[str]] = {"scheduler": [], "worker": [], "client": []}
    for line in lines:
        if re.match(r"^dask scheduler\b", line):
            found["scheduler"].append(line)
        elif re.search(r"\bdask worker\b", line):
            found["worker"].append(line)
        elif "render.py" in line and "--scheduler" in line:
            found["client"].append(line)
    for what, hits in found.items():
        assert hits, f"{page.name}: no {what} command in a ```bash block"
        if what != "client":
            assert len(set(hits)) == 1, f"{page.name}: different {what} commands: {hits}"
    return {what: hits[0] for what, hits in found.items()}


def _fill(line: str, port: int, n: int | None = None) -> str:
    line = line.replace("0.0.0.0", "127.0.0.1").replace("HOST", "127.0.0.1").replace("8786", str(port))
    line = line.replace(".venv/bin/", f"{VENV_BIN}/")  # the environment running the tests (the checkout's .venv)
    return line.replace("--nworkers 4", f"--nworkers {n}") if n is not None else line


# This project's top-level modules as a machine without the checkout lacks them (residual_lecture.ALIASES and
# residual_lecture itself, which an editable install would find).
PROJECT_MODULES = ("residual_lecture", "render", "cli", "narration", "scenes", "simulation", "cli_scenes")

_UNPICKLE = """
import pickle, sys
for name in {modules!r}:
    sys.modules[name] = None  # import NAME raises ModuleNotFoundError, as on a machine without the checkout
from distributed.protocol import deserialize
for header, frames in pickle.load(sys.stdin.buffer):
    try:
        deserialize(header, frames)
        print("ok")
    except Exception as exc:
        print(f"{{type(exc).__name__}}: {{exc}}".replace(chr(10), " "))
"""


def unpickle_without_project(graphs: list, folder: Path) -> list[str]:
    """Deserialise task graphs as the client sent them (each the ``expr_ser`` of an ``update-graph`` message) the
    way the scheduler does (``distributed.protocol.deserialize``), in a Python started isolated (``-I``: no
    ``PYTHONPATH``, no current folder) in ``folder`` with this project's modules made unimportable: "ok" for each
    graph that unpickles, else its error in one line."""
    payload = pickle.dumps([(g.header, [bytes(f) for f in g.frames]) for g in graphs])
    done = subprocess.run([sys.executable, "-I", "-c", _UNPICKLE.format(modules=PROJECT_MODULES)], input=payload,
                          cwd=folder, capture_output=True, timeout=120, env={"PATH": str(VENV_BIN)})
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().splitlines()


class Cluster:
    """A scheduler and ``n`` workers started with the commands of ``page`` (docs/how-to/cluster.md by default); the
    workers run under nannies (``--nworkers``), so a worker killed is started again."""

    def __init__(self, tmp: Path, n: int = 2, page: Path = PAGES[0]) -> None:
        commands = documented_commands(page)
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.client_command = _fill(commands["client"], self.port)
        logs = tmp / "dask-logs"
        logs.mkdir(exist_ok=True)
        self.scheduler_folder = tmp / "scheduler"  # empty, outside the checkout
        self.scheduler_folder.mkdir()
        assert not self.scheduler_folder.resolve().is_relative_to(ROOT)
        self.scheduler_env = {"PATH": str(VENV_BIN)}
        self.procs: list[subprocess.Popen] = []
        self.scheduler = self._start(_fill(commands["scheduler"], self.port), self.scheduler_folder,
                                     self.scheduler_env, logs / "scheduler")
        # The workers: in the checkout, as the page says; their scratch folders under tmp (Dask's own setting).
        worker_env = {k: v for k, v in os.environ.items()
                      if k != "PYTHONPATH" and not k.startswith(("DASK_", "RESIDUAL_"))}
        worker_env["DASK_TEMPORARY_DIRECTORY"] = str(tmp / "workers")
        self.workers = self._start(_fill(commands["worker"], self.port, n), ROOT, worker_env, logs / "workers")
        from distributed import Client

        try:
            with Client(self.address, timeout=30) as client:
                client.wait_for_workers(n, timeout=60)
        except BaseException:
            self.stop()  # never leave processes behind
            raise

    def _start(self, line: str, cwd: Path, env: dict, log: Path) -> subprocess.Popen:
        with open(f"{log}.out", "wb") as out:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(["/bin/bash", "-c", line], env=env, cwd=cwd, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def worker_info(self) -> list[dict]:
        """Each live worker: the scheduler's record of it (``local_directory`` ...) and its process id ``pid``."""
        from distributed import Client

        with Client(self.address, timeout=10) as client:
            pids = client.run(os.getpid)
            workers = client.scheduler_info(n_workers=-1)["workers"]
            return [{**workers[address], "pid": pid} for address, pid in pids.items() if address in workers]

    def stop(self) -> None:
        """Kill the workers' process group (nannies, workers, their renders: nothing needs saving), then stop the
        scheduler."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL if proc is not self.scheduler else signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
