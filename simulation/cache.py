"""Trace cache: one ``.npz`` per run, named by the config digest (torch-free).

Example::

    python -m simulation.cache '{"arch": "residual", "depth": 20}'
    echo '{"depth": 8}' | python -m simulation.cache --stream    # one JSON line per run as it is cached
    echo '[{"seed": 0}, {"seed": 1}]' | python -m simulation.cache --stream    # two seeds trained together

``get_traces`` loads cached runs and trains the missing ones. It trains in this process only when
asked (``render.py`` does); scenes ask for ``in_subprocess=True`` so that they never import torch. This module
alone reads and writes the cache: :func:`load` (a readable trace or None) and :func:`store` (checked bytes,
written atomically); :func:`simulation.sweep.sweep` only hands back bytes.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any, Callable, Iterable

from .atomic_io import atomic_write
from .config import BaseConfig, config_from_dict
from .runs import check_memory, hit_line, start_line, train
from .sweep import SweepError, group_to_bytes, run_to_bytes, sweep
from .trace import Trace, TraceError

__all__ = ["cache_dir", "digest_path", "trace_path", "get_trace", "get_traces", "load", "store", "is_cached",
           "run_sweep", "stream"]

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parent.parent
# Imported as residual_lecture.simulation.cache: an installed copy (residual_lecture/__init__.py), whose folder in
# site-packages is no place for a cache.
INSTALLED = __package__.startswith("residual_lecture.")


def cache_dir() -> Path:
    """``$RESIDUAL_CACHE``, else ``.cache/traces`` beside render.py in a checkout, else (an installed copy)
    ``$XDG_CACHE_HOME/residual-lecture/traces`` (``~/.cache/residual-lecture/traces``)."""
    if os.environ.get("RESIDUAL_CACHE"):
        return Path(os.environ["RESIDUAL_CACHE"])
    if INSTALLED:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "residual-lecture" / "traces"
    return ROOT / ".cache" / "traces"


def digest_path(digest: str) -> Path:
    """Where the trace of the config with this digest lives in the cache."""
    return cache_dir() / f"{digest}.npz"


def trace_path(config: BaseConfig) -> Path:
    return digest_path(config.digest())


def get_trace(config: BaseConfig, progress: bool | None = None) -> Trace:
    """The trace of ``config``: from the cache (no training, logged) or trained now and cached."""
    return get_traces([config], progress=progress)[0]


def get_traces(configs: list[BaseConfig], progress: bool | None = None,
               in_subprocess: bool = False, log_hits: bool = True, scheduler: str | None = None,
               on_trace=None, in_order: bool = False) -> list[Trace]:
    """Traces of ``configs`` in order. Missing or unreadable cache entries are trained (again); before any
    is, each must pass :func:`simulation.runs.check_memory` (ConfigError otherwise). Several missing runs
    go through :func:`run_sweep` (a Dask cluster at ``scheduler`` or
    ``$DASK_SCHEDULER_ADDRESS``, else a local one, else this process when the work is small).

    ``in_subprocess=True`` trains in ``python -m simulation.cache`` so the caller never imports torch.
    ``log_hits=False`` logs cache hits at debug level only (a scene loading what render.py just checked).
    ``on_trace(config, trace)`` is called as each missing run is stored; ``in_order`` keeps the given order
    on a cluster too (see :func:`run_sweep`).
    """
    traces = {c: load(c) for c in configs}
    missing = [c for c, trace in traces.items() if trace is None]
    for config in missing:  # every run that would be trained must fit before the first one starts
        check_memory(config)
    for config, trace in traces.items():
        if trace is not None:
            log.log(logging.INFO if log_hits else logging.DEBUG, "%s", hit_line(config))
    if missing and in_subprocess:
        payload = [json.dumps(c.to_dict()) for c in missing]
        # Its own process group: Ctrl-C reaches this process only, whose KeyboardInterrupt kills the child.
        subprocess.run([sys.executable, "-m", __spec__.name, *payload], check=True, cwd=None if INSTALLED else ROOT,
                       process_group=0)
        traces.update({c: Trace.load(trace_path(c)) for c in missing})
    elif len(missing) == 1 and scheduler is None and not os.environ.get("DASK_SCHEDULER_ADDRESS"):
        config = missing[0]
        log.info("%s", start_line(config))
        traces[config] = train(config, progress=progress)
        traces[config].save(trace_path(config))
        if on_trace is not None:
            on_trace(config, traces[config])
    elif missing:
        # run_sweep says "training ..." per run once it runs (after a scheduler answered, on a cluster)
        traces.update(zip(missing, run_sweep(missing, scheduler=scheduler, progress=progress, on_trace=on_trace,
                                             in_order=in_order)))
    return [traces[c] for c in configs]


def load(config: BaseConfig) -> Trace | None:
    """The cached trace of ``config``, or None when there is none or it cannot be read (corrupt, truncated, an
    older schema): such a file is removed, with one warning, so that the run is trained again and nothing
    counts it as cached."""
    path = trace_path(config)
    if not path.is_file():
        return None
    try:
        return Trace.load(path)
    except TraceError as exc:
        log.warning("ignoring cached trace, training again: %s", exc)
        path.unlink(missing_ok=True)
        return None


def store(config: BaseConfig, payload: bytes) -> Trace:
    """Check ``payload`` (the ``.npz`` bytes of a trace of ``config``, e.g. from a worker) and write it
    atomically as the cached trace of ``config``. Raises SweepError for bytes that are no readable trace
    or a trace of another config (a worker running other simulation code); nothing is written then."""
    with atomic_write(trace_path(config), suffix=".npz") as tmp:
        tmp.write_bytes(payload)
        try:
            trace = Trace.load(tmp)
        except TraceError as exc:
            raise SweepError(f"run {config.digest()} came back unreadable: {exc}") from None
        if trace.meta.digest != config.digest():
            raise SweepError(f"run {config.digest()} came back as {trace.meta.digest}: the worker runs "
                             "other simulation code (start `dask worker` from the same checkout)")
    return trace


def run_sweep(configs: Iterable[BaseConfig], scheduler: str | None = None,
              progress: bool | None = None, retries: int = 2, workers: int | None = None,
              connect_timeout: float = 10.0, here: bool | None = None,
              on_trace: Callable[[BaseConfig, Trace], None] | None = None,
              in_order: bool = False) -> list[Trace]:
    """Traces of ``configs`` in order: cached ones loaded, missing ones trained by
    :func:`simulation.sweep.sweep` (in this process, on a local cluster or at ``scheduler``; the other
    arguments are its own) and stored as each comes back. ``on_trace(config, trace)`` is called in this
    thread as each missing run is stored (render.py starts a scene's render then). Raises SweepError or
    ConfigError."""
    configs = list(configs)
    traces = {c: load(c) for c in dict.fromkeys(configs)}
    missing = [c for c, t in traces.items() if t is None]
    if missing:
        runs = sweep(missing, scheduler=scheduler, progress=progress, retries=retries, workers=workers,
                     connect_timeout=connect_timeout, here=here, in_order=in_order)
        with closing(runs):  # a failed store stops a cluster too
            for config, payload in runs:
                traces[config] = store(config, payload)
                if on_trace is not None:
                    on_trace(config, traces[config])
    return [traces[c] for c in configs]


def is_cached(config: BaseConfig) -> bool:
    """Whether the cache holds a readable trace of ``config`` (an unreadable one is removed: see :func:`load`)."""
    return load(config) is not None


def stream(configs: Iterable[BaseConfig | list[BaseConfig]], out=None) -> None:
    """Train ``configs`` here, one after the other in the given order, skipping cached ones, and print one
    JSON line per config to ``out`` (stdout) as soon as its trace is in the cache: ``{"digest": ...}``, or
    ``{"digest": ..., "error": "..."}`` for a run that failed (the others still train). render.py reads
    these lines to start each scene's render while the next runs train (cli/pipeline.py). ``configs`` may be
    a lazy iterable: ``--stream`` reads stdin one line at a time, so render.py can hand out one run at a
    time and decide the next when this one is cached. An item may be a list, a group of runs that differ only in
    their seed (:func:`simulation.runs.seed_groups`): trained together, one line per run once all are cached."""
    out = out or sys.stdout
    for item in configs:
        group = item if isinstance(item, list) else [item]
        try:
            missing = [c for c in group if load(c) is None]
            for config in missing:
                log.info("%s", start_line(config))
            if len(missing) == 1:
                store(missing[0], run_to_bytes(missing[0].to_dict()))
            elif missing:
                for config, payload in zip(missing, group_to_bytes([c.to_dict() for c in missing])):
                    store(config, payload)
            lines = [{"digest": c.digest()} for c in group]
        except Exception as exc:  # one run's failure is that run's scenes' failure, not the others'
            error = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
            lines = [{"digest": c.digest()} if load(c) is not None else {"digest": c.digest(), "error": error}
                     for c in group]
        for line in lines:
            out.write(json.dumps(line) + "\n")
        out.flush()


def _stream_item(data: Any) -> BaseConfig | list[BaseConfig]:
    """A ``--stream`` line: one config (a JSON object) or a group to train together (an array of them)."""
    return [config_from_dict(c) for c in data] if isinstance(data, list) else config_from_dict(data)


def main(argv: list[str]) -> None:
    import signal

    # SIGTERM (render.py stopping) and SIGINT unwind as SystemExit: the half-written temporary trace is removed,
    # and no traceback is printed (render.py starts this process in a process group of its own and stops it with
    # SIGTERM, which ends it quietly while its modules still load: cli/pipeline.py).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if argv[:1] == ["--stream"]:  # configs as JSON lines on stdin
        stream(_stream_item(json.loads(line)) for line in sys.stdin if line.strip())
        # Every trace is in the cache and every line sent: skip the interpreter's teardown of torch (~1 s),
        # which a render waiting for this process's memory would otherwise wait for (cli/pipeline.py).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    get_traces([config_from_dict(json.loads(arg)) for arg in argv])


if __name__ == "__main__":
    main(sys.argv[1:])
