"""Run sets of configs through dask.distributed; the client alone writes the trace cache.

Example::

    python -m simulation.sweep depth_sweep --set seeds=0,1 --scheduler tcp://10.0.0.5:8786

Every run is a pure function of its config: :func:`run_to_bytes` takes the config as a dict and returns
the trace's ``.npz`` bytes, so workers need no shared disk and no cache. :func:`run_sweep` sends only the
runs the cache lacks, to

- an existing cluster: ``scheduler="tcp://HOST:PORT"`` (or ``$DASK_SCHEDULER_ADDRESS``);
- else a local cluster started for the sweep (one single-threaded worker process per core);
- else, when the missing work is small (:data:`LOCAL_MAX_WORK`), this process, one run after the other:
  starting worker processes (each imports torch) costs more than such a sweep (see benchmarks/bench_sweep.py).

Traces come back as bytes, are checked (readable, the config's digest) and written atomically into the
cache as each run finishes, so an interrupted sweep keeps every finished run. A run that diverges comes
back as a diverged trace (``meta["diverged"]``), as it does locally. A worker that dies mid-run has its
runs rescheduled by Dask (``retries`` covers runs that raise).

A local cluster starts its workers with multiprocessing's "spawn": a script that calls :func:`run_sweep`
needs the usual ``if __name__ == "__main__":`` guard (render.py and ``python -m simulation.sweep`` have it).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from .atomic_io import atomic_write
from .config import ConfigError, RunConfig, TransformerConfig, config_from_dict
from .trace import Trace, TraceError

__all__ = ["run_to_bytes", "run_sweep", "scheduler_address", "sweep_work", "LOCAL_MAX_WORK", "SweepError"]

log = logging.getLogger(__name__)

Config = RunConfig | TransformerConfig

# Below this much work (sum over runs of sweep_work, ~0.2 ms of one core per unit) a sweep runs in this
# process: on 2 cores a local cluster's start (two worker processes importing torch, ~3-5 s) and its
# at most 2x speed-up only pay off above ~10 s of training (benchmarks/bench_sweep.py).
LOCAL_MAX_WORK = 50_000


class SweepError(RuntimeError):
    """A sweep could not run: no scheduler at the address, or a run failed on every retry."""


def run_to_bytes(config: dict[str, Any]) -> bytes:
    """Train ``config`` (a ``to_dict()`` of RunConfig or TransformerConfig) and return its trace as
    ``.npz`` bytes. Pure: the result depends on the config only (one torch thread, seeded everything),
    so a run on any worker is bit-identical to the same run here. Writes nothing outside a private
    temporary folder, which it removes."""
    from .cache import _trainer  # torch is imported here, on the worker

    cfg = config_from_dict(dict(config))
    trace = _trainer(cfg)(cfg, progress=False)
    with tempfile.TemporaryDirectory(prefix="residual-run-") as folder:
        path = trace.save(Path(folder) / "trace.npz")
        return path.read_bytes()


def sweep_work(config: Config) -> int:
    """A rough cost of one run in MLP block-steps (~0.2 ms of one core each at batch 128, width 32):
    steps x blocks; a conv block (two 3x3 convs on 8x8 maps) costs about 20 MLP blocks (measured); an
    identity fit (IdentityFitConfig, no ``depth``) is one block."""
    if getattr(config, "kind", "") == "user_model":  # blocks unknown until the model is built: a conv net's cost
        return config.steps * 20 * 10
    if getattr(config, "model", "mlp") == "conv":
        return config.steps * 20 * (config.depth - 2) // 2
    return config.steps * max(getattr(config, "depth", 1), 1)


def scheduler_address(scheduler: str | None = None) -> str | None:
    """``scheduler``, else ``$DASK_SCHEDULER_ADDRESS``, else None (a local sweep). "local" forces the
    in-process path. Raises ConfigError for an address Dask cannot parse."""
    address = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    if address is None or address == "local":
        return address
    if "://" not in address:
        raise ConfigError(f"scheduler must look like tcp://HOST:PORT; got {address!r}")
    return address


def _store(config: Config, payload: bytes, path: Path) -> Trace:
    """Check the bytes a worker sent (an .npz trace of this config) and write them atomically to ``path``."""
    with atomic_write(path, suffix=".npz") as tmp:
        tmp.write_bytes(payload)
        try:
            trace = Trace.load(tmp)
        except TraceError as exc:
            raise SweepError(f"run {config.digest()} came back unreadable: {exc}") from None
        if trace.meta.get("digest") != config.digest():
            raise SweepError(f"run {config.digest()} came back as {trace.meta.get('digest')}: the worker runs "
                             "other simulation code (start `dask worker` from the same checkout)")
    return trace


def run_sweep(configs: Iterable[Config], scheduler: str | None = None, progress: bool | None = None,
              retries: int = 2, workers: int | None = None, connect_timeout: float = 10.0,
              here: bool | None = None, on_trace: Callable[[Config, Trace], None] | None = None,
              in_order: bool = False) -> list[Trace]:
    """Traces of ``configs`` in order: cached ones loaded, missing ones trained (see the module docstring
    for where) and cached. ``workers``: local cluster size (default: the cores this process may use).
    ``progress=None`` shows a bar over runs on a terminal only; ``connect_timeout``: seconds to wait for a
    scheduler; ``here``: True runs in this process, False on a (local) cluster, None decides by the work
    (:data:`LOCAL_MAX_WORK`). ``on_trace(config, trace)`` is called in this thread as each missing run is
    stored (render.py starts a scene's render then); ``in_order`` sends runs to a cluster in the given order
    (the lecture's) instead of heaviest first. Raises SweepError or ConfigError."""
    from .cache import _try_load, trace_path

    configs = list(configs)
    unique = list(dict.fromkeys(configs))
    traces: dict[Config, Trace | None] = {c: _try_load(trace_path(c)) for c in unique}
    missing = [c for c, t in traces.items() if t is None]
    address = scheduler_address(scheduler)
    if missing:
        show = sys.stderr.isatty() if progress is None else progress
        small = len(missing) == 1 or sum(map(sweep_work, missing)) < LOCAL_MAX_WORK
        local = address == "local" or (address is None and (small if here is None else here))
        started = time.perf_counter()
        if local:
            traces.update(_run_here(missing, show, on_trace))
        else:
            traces.update(_run_on_dask(missing, address, show, retries, workers, connect_timeout, on_trace,
                                       in_order))
        log.info("sweep: %d runs trained in %.1f s (%s)", len(missing), time.perf_counter() - started,
                 "this process" if local else (address or "local cluster"))
    return [traces[c] for c in configs]


def _bar(total: int, show: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="runs", unit="run", disable=not show, file=sys.stderr)


def _log_training(config: Config) -> None:
    from .cache import _describe

    logging.getLogger("simulation.cache").info("training %s (%s)", config.digest(), _describe(config))


def _run_here(missing: list[Config], show: bool, on_trace=None) -> dict[Config, Trace]:
    from .cache import trace_path

    out = {}
    with _bar(len(missing), show) as bar:
        for config in missing:
            _log_training(config)
            out[config] = _store(config, run_to_bytes(config.to_dict()), trace_path(config))
            bar.update()
            if on_trace is not None:
                on_trace(config, out[config])
    return out


def _run_on_dask(missing: list[Config], address: str | None, show: bool, retries: int,
                 workers: int | None, connect_timeout: float, on_trace=None,
                 in_order: bool = False) -> dict[Config, Trace]:
    from distributed import Client, LocalCluster, as_completed

    from .cache import trace_path

    distributed_log = logging.getLogger("distributed")
    if distributed_log.level == logging.NOTSET:  # its INFO lines (every worker start) would bury ours
        distributed_log.setLevel(logging.WARNING)
    cluster = None
    try:
        if address is None:
            n = workers or len(os.sched_getaffinity(0))
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(address, timeout=connect_timeout)
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        raise SweepError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    out: dict[Config, Trace] = {}
    for config in missing:  # only now: the scheduler answered (an unreachable one fails before these lines)
        _log_training(config)
    try:
        futures = {}
        # Heaviest first, so that the last runs to finish are short ones (less idle time at the end); in the
        # given order when the caller uses each run as it comes (Dask runs tasks roughly as submitted).
        for config in (missing if in_order else sorted(missing, key=sweep_work, reverse=True)):
            future = client.submit(run_to_bytes, config.to_dict(), key=f"trace-{config.digest()}",
                                   pure=False, retries=retries)
            futures[future] = config
        with _bar(len(futures), show) as bar:
            for future in as_completed(futures):
                config = futures[future]
                try:
                    payload = future.result()
                except Exception as exc:  # the run raised on every try: report which run
                    raise SweepError(f"run {config.digest()} failed on the cluster: {type(exc).__name__}: {exc}") from exc
                out[config] = _store(config, payload, trace_path(config))
                future.release()
                bar.update()
                if on_trace is not None:
                    on_trace(config, out[config])
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m simulation.sweep EXPERIMENT [--set k=v ...] [--scheduler ADDRESS]``: train an
    experiment's missing runs as one sweep."""
    import argparse

    from .experiments import build_runs

    parser = argparse.ArgumentParser(prog="python -m simulation.sweep", description=main.__doc__)
    parser.add_argument("experiment")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--scheduler", default=None, help="tcp://HOST:PORT of a running `dask scheduler`")
    parser.add_argument("--workers", type=int, default=None, help="local cluster size (default: cores)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        overrides = {}
        for pair in args.sets:
            key, sep, value = pair.partition("=")
            if not sep:
                raise ConfigError(f"expected key=value, got {pair!r}")
            overrides[key.strip()] = value.strip()
        runs = build_runs(args.experiment, overrides)
        run_sweep(list(runs.values()), scheduler=args.scheduler, workers=args.workers)
    except ValueError as exc:  # ConfigError, or a --set without '='
        sys.exit(f"error: {exc}")
    except SweepError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
