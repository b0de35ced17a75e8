"""Train runs as trace bytes, in this process or on a dask.distributed cluster; it writes nothing.

Example::

    python -m simulation.experiments depth_sweep --set seeds=0,1 --scheduler tcp://10.0.0.5:8786

Every run is a pure function of its config: :func:`run_to_bytes` takes the config as a dict and returns
the trace's ``.npz`` bytes, so workers need no shared disk and no cache. :func:`sweep` trains the runs it is
given (the cache's :func:`simulation.cache.run_sweep` gives it the ones the cache lacks) and yields each run's
bytes as it finishes, on

- an existing cluster: ``scheduler="tcp://HOST:PORT"`` (or ``$DASK_SCHEDULER_ADDRESS``);
- else a local cluster started for the sweep (one single-threaded worker process per core);
- else, when the work is small (:data:`LOCAL_MAX_WORK`, :func:`runs_here`), this process, one run after the
  other: starting worker processes (each imports torch) costs more than such a sweep (benchmarks/bench_sweep.py).

The caller checks and stores the bytes (:func:`simulation.cache.store`) as each run comes, so an interrupted
sweep keeps every finished run. A run that diverges comes back as a diverged trace (``meta.diverged``), as
it does locally. A worker that dies mid-run has its runs rescheduled by Dask (``retries`` covers runs that
raise).

The tasks name their function (:func:`submit_by_name`) instead of pickling it: the scheduler unpickles every task
graph it receives, and it may run on a machine with Dask and nothing of this project (docs/how-to/cluster.md).

A local cluster starts its workers with multiprocessing's "spawn": a script that sweeps needs the usual
``if __name__ == "__main__":`` guard (render.py and ``python -m simulation.experiments`` have it).
"""

from __future__ import annotations

import logging
import operator
import os
import pkgutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import urlsplit

from .atomic_io import shown_path
from .config import BaseConfig, ConfigError, RecordedConfig, config_from_dict, read_from
from .runs import seed_groups, start_line, train, train_group, work

__all__ = ["run_to_bytes", "group_to_bytes", "submit_by_name", "sweep", "sweep_note", "runs_here", "scheduler_address", "sweep_work", "LOCAL_MAX_WORK",
           "SweepError"]

log = logging.getLogger(__name__)

Config = BaseConfig

# Below this much work (sum over runs of sweep_work, ~0.2 ms of one core per unit) a sweep runs in this
# process: on 2 cores a local cluster's start (two worker processes importing torch, ~3-5 s) and its
# at most 2x speed-up only pay off above ~10 s of training (benchmarks/bench_sweep.py).
LOCAL_MAX_WORK = 50_000


class SweepError(RuntimeError):
    """A sweep could not run: no scheduler at the address, or a run failed on every retry."""


def run_to_bytes(config: dict[str, Any]) -> bytes:
    """Train ``config`` (a ``to_dict()`` of any registered run kind's config) and return its trace as
    ``.npz`` bytes. Pure: the result depends on the config only (one torch thread, seeded everything),
    so a run on any worker is bit-identical to the same run here. Writes nothing outside a private
    temporary folder, which it removes."""
    cfg = config_from_dict(dict(config))
    trace = train(cfg, progress=False)  # torch is imported here, on the worker
    with tempfile.TemporaryDirectory(prefix="residual-run-") as folder:
        path = trace.save(Path(folder) / "trace.npz")
        return path.read_bytes()


def submit_by_name(client, func: Callable[..., Any], *args: Any, **options: Any):
    """``Client.submit`` of ``func`` on ``args`` (``options``: its keywords, ``key``, ``pure``, ``retries`` ...) with
    ``func`` sent by name: the task is
    ``operator.call(pkgutil.resolve_name("module:function"), *args)``, the name resolved inside the task, on the
    worker (a nested :class:`dask.task_spec.Task`, Dask's documented task specification).

    The scheduler unpickles every graph it receives (distributed >= 2023.4); a function pickled by reference would
    make it import this project (``ModuleNotFoundError: No module named 'simulation'`` on a scheduler without the
    checkout). Named, the graph holds only the standard library, Dask and ``args``, which must be plain data
    (str, bytes, numbers, lists, dicts) or futures: the workers alone import ``func``. ``func``: a module-level
    function (its ``__module__`` and ``__qualname__`` must name it again, which a lambda or a nested function does
    not: ValueError). Returns the Future."""
    from dask.task_spec import Task

    name = f"{func.__module__}:{func.__qualname__}"
    try:
        found = pkgutil.resolve_name(name)
    except (ImportError, AttributeError, ValueError):
        found = None
    if found is not func:
        raise ValueError(f"{name} does not name {func!r}: only a module-level function can be sent by name")
    return client.submit(operator.call, Task(None, pkgutil.resolve_name, name), *args, **options)


def group_to_bytes(configs: list[dict[str, Any]]) -> list[bytes]:
    """:func:`run_to_bytes` of several configs (``to_dict()`` s) of one :func:`simulation.runs.seed_groups` group,
    trained together (:func:`simulation.runs.train_group`): the same bytes as each alone but for the
    metadata's ``trained_with_seeds``."""
    cfgs = [config_from_dict(dict(c)) for c in configs]
    out = []
    with tempfile.TemporaryDirectory(prefix="residual-run-") as folder:
        for index, trace in enumerate(train_group(cfgs, progress=False)):
            out.append(trace.save(Path(folder) / f"trace{index}.npz").read_bytes())
    return out


def sweep_work(config: Config) -> int:
    """A rough cost of one run in MLP block-steps (~0.2 ms of one core each at batch 128, width 32): the run
    kind's work estimate (:func:`simulation.runs.work`)."""
    return work(config)


def runs_here(configs: list[Config], scheduler: str | None = None, here: bool | None = None) -> bool:
    """Whether :func:`sweep` trains ``configs`` in this process: ``here`` when given (True / False), else yes
    for the scheduler "local", no for another address, and without one yes for one run or less than
    :data:`LOCAL_MAX_WORK` of work (else a local cluster)."""
    address = scheduler_address(scheduler)
    small = len(configs) == 1 or sum(map(sweep_work, configs)) < LOCAL_MAX_WORK
    return address == "local" or (address is None and (small if here is None else here))


SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")  # the comm back-ends distributed registers (port: 8786 when left out)


def scheduler_address(scheduler: str | None = None) -> str | None:
    """``scheduler``, else ``$DASK_SCHEDULER_ADDRESS``, else None (a local sweep). "local" forces the
    in-process path. Raises ConfigError for an address Dask cannot parse."""
    address = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    if address is None or address == "local":
        return address
    usage = f"scheduler must look like tcp://HOST:PORT (a running `dask scheduler`); got {shown_path(address)}"
    if not address.isprintable() or any(c.isspace() for c in address):  # urlsplit would drop a newline silently
        raise ConfigError(usage)
    try:
        parts = urlsplit(address)
        port = parts.port  # ValueError for a port that is not a number, or one outside 0-65535
    except ValueError as exc:
        raise ConfigError(f"{usage} ({exc})") from None
    if (parts.scheme not in SCHEMES or not parts.hostname or port == 0 or parts.path not in ("", "/")
            or parts.query or parts.fragment or parts.username is not None):
        raise ConfigError(usage)
    return address


def sweep(configs: Iterable[Config], scheduler: str | None = None, progress: bool | None = None,
          retries: int = 2, workers: int | None = None, connect_timeout: float = 10.0, here: bool | None = None,
          in_order: bool = False) -> Iterator[tuple[Config, bytes]]:
    """Train ``configs`` and yield ``(config, trace .npz bytes)`` for each as it finishes (see the module
    docstring for where; :func:`runs_here`). ``workers``: local cluster size (default: the cores this process
    may use). ``progress=None`` shows a bar over runs on a terminal only; ``connect_timeout``: seconds to wait
    for a scheduler; ``in_order`` sends runs to a cluster in the given order (the lecture's) instead of
    heaviest first. Close the generator (or exhaust it) to stop a cluster. Raises SweepError or ConfigError."""
    configs = list(configs)
    address = scheduler_address(scheduler)
    local = runs_here(configs, address, here)
    show = sys.stderr.isatty() if progress is None else progress
    started = time.perf_counter()
    if local:
        yield from _here(configs, show)
    else:
        yield from _on_dask(configs, address, show, retries, workers, connect_timeout, in_order)
    log.info("sweep: %s in %.1f s (%s)", sweep_note(configs), time.perf_counter() - started,
             "this process" if local else (address or "local cluster"))


def sweep_note(configs: list[Config]) -> str:
    """What the sweep did: "2 runs trained", "1 run read from its file" (``--trace``: nothing trained), or both."""
    read = sum(isinstance(c, RecordedConfig) for c in configs)
    trained = len(configs) - read
    parts = [f"{trained} run{'s' * (trained != 1)} trained"] if trained or not read else []
    if read:
        parts.append(f"{read} run{'s' * (read != 1)} {read_from(read)}")
    return ", ".join(parts)


def _bar(total: int, show: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="runs", unit="run", disable=not show, file=sys.stderr)


def _log_training(config: Config) -> None:
    logging.getLogger("simulation.cache").info("%s", start_line(config))


def _here(configs: list[Config], show: bool) -> Iterator[tuple[Config, bytes]]:
    with _bar(len(configs), show) as bar:
        for group in seed_groups(configs):  # runs that differ only in their seed train at once
            for config in group:
                _log_training(config)
            if len(group) == 1:
                yield group[0], run_to_bytes(group[0].to_dict())
            else:
                yield from zip(group, group_to_bytes([c.to_dict() for c in group]))
            bar.update(len(group))


class _quiet_when_stopped:
    """Context manager: when Ctrl-C or SIGTERM (a BaseException that is no Exception) stops the sweep, Dask's own
    log goes quiet before the cluster closes: stopping is what the user asked for, and the nannies and the event
    loop log each task they cancel with a CancelledError traceback."""

    def __init__(self, log: logging.Logger) -> None:
        self.log = log

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and not issubclass(exc_type, Exception):
            self.log.setLevel(logging.CRITICAL)

    @staticmethod
    def now(log: logging.Logger) -> None:
        """The same, for the exception being handled now (in a ``finally``)."""
        _quiet_when_stopped(log).__exit__(*sys.exc_info())


def _on_dask(configs: list[Config], address: str | None, show: bool, retries: int, workers: int | None,
             connect_timeout: float, in_order: bool = False) -> Iterator[tuple[Config, bytes]]:
    from distributed import Client, LocalCluster, as_completed

    distributed_log = logging.getLogger("distributed")
    if distributed_log.level == logging.NOTSET:  # its INFO lines (every worker start) would bury ours
        distributed_log.setLevel(logging.WARNING)
    cluster = None
    try:
        if address is None:
            n = workers or len(os.sched_getaffinity(0))
            with _quiet_when_stopped(distributed_log):
                cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
                client = Client(cluster)
        else:
            client = Client(address, timeout=connect_timeout)
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        raise SweepError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    for config in configs:  # only now: the scheduler answered (an unreachable one fails before these lines)
        _log_training(config)
    try:
        futures = {}
        # Heaviest first, so that the last runs to finish are short ones (less idle time at the end); in the
        # given order when the caller uses each run as it comes (Dask runs tasks roughly as submitted).
        for config in (configs if in_order else sorted(configs, key=sweep_work, reverse=True)):
            future = submit_by_name(client, run_to_bytes, config.to_dict(), key=f"trace-{config.digest()}",
                                    pure=False, retries=retries)
            futures[future] = config
        with _bar(len(futures), show) as bar:
            for future in as_completed(futures):
                config = futures[future]
                try:
                    payload = future.result()
                except Exception as exc:  # the run raised on every try: report which run
                    raise SweepError(f"run {config.digest()} failed on the cluster: {type(exc).__name__}: {exc}") from exc
                future.release()
                yield config, payload
                bar.update()
    finally:
        _quiet_when_stopped.now(distributed_log)
        client.close()
        if cluster is not None:
            cluster.close()
