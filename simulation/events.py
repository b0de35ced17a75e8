"""Run events: a JSON line when each training run starts and ends, for programs (the human log stays as it is).

Example::

    RESIDUAL_EVENTS=/tmp/events.jsonl python render.py train IdentityHighway --set steps=20
    python -c "import json; print([json.loads(l)['event'] for l in open('/tmp/events.jsonl')])"

Nothing is written unless ``$RESIDUAL_EVENTS`` names a file; then every process that trains a run (render.py, its
``python -m simulation.cache`` trainer, a Dask worker on this machine) appends to it, one ``write`` per line on a
file opened for appending, so lines of several processes never mix. Each line is one of::

    {"event": "run_start", "time": 1764640000.25, "pid": 4242, "digest": "2a06d4783f93ee87", "kind": "mlp",
     "seed": 0, "label": "arch=plain depth=20 ..."}
    {"event": "run_end", ... the same fields ..., "ok": true, "wall_s": 3.1, "cpu_s": 3.0}

``time``: seconds since the epoch (``time.time()``), comparable across processes; ``cpu_s``: user + system CPU
seconds of the training process during the run (all its threads; ``time.process_time``); ``wall_s``: seconds;
``ok``: false when the run raised (its ``error`` says what). :mod:`benchmarks.bench_timeline` reads them.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

__all__ = ["EVENTS_ENV", "emit", "training_run", "read_events"]

EVENTS_ENV = "RESIDUAL_EVENTS"  # the file the events are appended to; unset: none are written


def emit(event: str, **fields: Any) -> None:
    """Append ``{"event": event, "time", "pid", **fields}`` as one line to ``$RESIDUAL_EVENTS`` (if set)."""
    path = os.environ.get(EVENTS_ENV)
    if not path:
        return
    line = json.dumps({"event": event, "time": time.time(), "pid": os.getpid(), **fields}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


@contextmanager
def training_run(digest: str, kind: str, seed: int | None, label: str) -> Iterator[None]:
    """``run_start`` on entry, ``run_end`` (with ``ok``, ``wall_s``, ``cpu_s``) on exit, also when the body raises."""
    run = {"digest": digest, "kind": kind, "seed": seed, "label": label}
    emit("run_start", **run)
    wall, cpu = time.perf_counter(), time.process_time()
    end: dict[str, Any] = {"ok": True}
    try:
        yield
    except BaseException as exc:
        end = {"ok": False, "error": f"{type(exc).__name__}: {exc}".strip().splitlines()[0]}
        raise
    finally:
        emit("run_end", **run, **end, wall_s=time.perf_counter() - wall, cpu_s=time.process_time() - cpu)


def read_events(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The events in the file ``path`` in the order written ([] when there is none); a line cut short by a
    process killed mid-write is skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events
