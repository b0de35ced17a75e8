"""A real Dask cluster for tests: a `dask scheduler` and ``n`` `dask worker` processes on 127.0.0.1.

Example::

    cluster = Cluster(tmp_path, n=2)      # tcp://127.0.0.1:<free port>, workers warmed up by the caller
    try: ... run_sweep(configs, scheduler=cluster.address) ...
    finally: cluster.stop()

Used by tests/test_sweep.py (sweeps) and tests/test_render_cluster.py (renders).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON_M = [sys.executable, "-m"]  # `dask scheduler` / `dask worker` are these modules

__all__ = ["Cluster", "free_port", "wait_for"]


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


class Cluster:
    """A real scheduler and ``n`` single-threaded workers (no nanny: killing one kills the worker)."""

    def __init__(self, tmp: Path, n: int = 2) -> None:
        port = free_port()
        self.address = f"tcp://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("DASK_SCHEDULER_ADDRESS", None)
        logs = tmp / "dask-logs"
        logs.mkdir(exist_ok=True)
        self.procs: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        self.scheduler = self._start(PYTHON_M + ["distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                                  "--port", str(port), "--no-dashboard"], env, logs / "scheduler")
        self.local_dirs = [tmp / f"w{i}" for i in range(n)]  # each worker's --local-directory
        self.workers = [self._start(PYTHON_M + ["distributed.cli.dask_worker", self.address, "--nthreads", "1",
                                                 "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                                                 "--local-directory", str(tmp / f"w{i}")],
                                    env, logs / f"worker{i}") for i in range(n)]
        from distributed import Client

        try:
            with Client(self.address, timeout=30) as client:
                client.wait_for_workers(n, timeout=30)
        except BaseException:
            self.stop()  # never leave processes behind
            raise

    def _start(self, cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
        with open(f"{log}.out", "wb") as out:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        """Kill the workers (nothing of theirs needs saving), then stop the scheduler."""
        for proc in self.workers:
            if proc.poll() is None:
                proc.kill()
        if self.scheduler.poll() is None:
            self.scheduler.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
