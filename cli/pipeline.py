"""Train and render at once: each scene goes to the render pool as soon as all of its traces are cached.

Example::

    python render.py all -q l                                   # local: the cores, memory permitting
    python render.py all -q k --scheduler tcp://10.0.0.5:8786   # every scene a task on a Dask cluster

The missing runs train in lecture order, one after the other, in a trainer process (``python -m
simulation.cache --stream``, so torch's memory goes back when it ends) or, with a scheduler, on the
cluster. Locally, runs that differ only in their seed go to the trainer as one group and train together as one
stacked model (:func:`simulation.runs.seed_groups`, :mod:`simulation.kinds.stacked`: the same traces, bit for bit). As soon as the last run a scene reads is in the cache, the scene is handed to the pool, while
the next runs train. Locally, the render slot beside the trainer is idle whenever no scene has all of its
traces yet; a :class:`TrainingHelper` then trains the last runs of the queue in a second trainer process
on that slot, as long as two trainers fit in memory (:class:`RunQueue`), and gives the slot back as soon
as a scene waits for it. Without it the one trainer was the cold lecture's critical path (docs/developers/speed.md).
Both pools render a scene the same way, with ``render.py _worker JOB`` in a process of its own
(:func:`run_worker`); they differ only in where that process runs:

- :class:`LocalPool`: here, at most ``--jobs`` at once (fewer while a trainer runs, see cli/jobs.py),
  writing straight into the output folder;
- :class:`ClusterPool`: in a Dask task (:func:`render_task`) on any worker of the cluster that trains
  sweeps. The task gets the job (RenderJob JSON) and the bytes of the traces it reads (workers share no
  disk), renders into a private folder on the worker and returns the bytes of every file a local render
  writes; this process places them with ``atomic_write`` where a local render puts them, record last
  (:func:`cli.media.place_files`). Dask runs a task again on another worker when its worker dies.

Ctrl-C or SIGTERM stops the trainer and every local render (each removes its private folder) and cancels
the cluster's tasks; files reach their final paths only complete. A scene that fails, or whose run failed
to train, is reported by name at the end; the other scenes are still rendered.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable

from cli import INSTALLED, ROOT, render_command
from cli.media import RECORD_SUFFIX, RenderError, RenderJob, place_files, remove_if_empty
from simulation.cache import digest_path

__all__ = ["train_before_render", "render_pipeline", "run_worker", "render_task", "LocalPool", "ClusterPool", "RunQueue", "Trainer", "TrainingHelper",
           "ClusterTrainer", "run_pipeline", "module_root"]

DIE_WITH_PARENT = "RESIDUAL_DIE_WITH_PARENT"  # render.py _worker: SIGTERM when the process that started it dies
# A helper's trainer process imports torch and, at its first optimiser, torch._dynamo (~2.5 CPU s together) before
# it trains anything: it starts only while the runs left hold more work than that, in simulation.runs.work's
# block-steps (~0.2 ms of one core each); less is done by the trainer alone about as soon.
HELPER_MIN_WORK = 10_000


def die_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its parent dies (a killed Dask worker, a killed
    render.py), so that it still removes its private folder; a no-op elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl: stop now
        os.kill(os.getpid(), signal.SIGTERM)


def module_root(module: str) -> str | None:
    """The folder to put on PYTHONPATH so that a fresh process imports ``module`` (a user's module:Class,
    tests/cli_scenes.py ...) as this one did; None for a module it finds anyway."""
    loaded = sys.modules.get(module)
    file = getattr(loaded, "__file__", None)
    if not file:
        return None
    root = Path(file).resolve().parent
    for _ in range(module.count(".")):
        root = root.parent
    # this project's modules: the checkout's root, or the site-packages folder holding residual_lecture
    return None if root == (ROOT.parent if INSTALLED else ROOT) else str(root)


def run_worker(job: RenderJob, env: dict[str, str] | None = None, pythonpath: str | None = None,
               started: Callable[[subprocess.Popen], None] | None = None) -> list[Path]:
    """Render ``job`` in a ``render.py _worker`` process; the paths it wrote. ``env``: extra variables
    (a private ``RESIDUAL_CACHE`` on a cluster worker); ``pythonpath``: a folder to import the scene's
    module from; ``started(proc)`` lets the caller stop the process. RenderError (one line) on failure."""
    command = [*render_command(), *(["-v"] if job.verbose else []), "_worker", job.to_json()]
    child_env = {**os.environ, **(env or {}), DIE_WITH_PARENT: "1"}
    if pythonpath:
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, child_env.get("PYTHONPATH")]))
    # A process group of its own, as the trainer's (_start_trainer): Ctrl-C reaches render.py, which stops it.
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env,
                            process_group=0)
    if started is not None:
        started(proc)
    out, err = proc.communicate()
    if job.verbose and err:
        sys.stderr.write(err)
    if proc.returncode:
        lines = [line for line in err.strip().splitlines() if line.strip()]
        reason = lines[-1].removeprefix("Error: ") if lines else f"exit status {proc.returncode}"
        raise RenderError(f"{job.scene}: {reason}")
    return [Path(p) for p in json.loads(out.strip().splitlines()[-1])["files"]]


def render_task(job_json: str, traces: dict[str, bytes], pythonpath: str | None = None) -> dict[str, bytes]:
    """A Dask task: render one scene on this worker; {file name: bytes} of what a local render writes
    (clip, subtitles, numbers, beats, beat videos; not the record, which the client writes).

    ``traces``: {config digest: .npz bytes} of every run the scene reads; they go into a private cache
    folder, so the scene finds them and trains nothing. Everything happens in a private folder inside the
    worker's local directory, removed at the end."""
    try:
        from distributed import get_worker

        parent = get_worker().local_directory
    except (ImportError, ValueError):
        parent = None
    with tempfile.TemporaryDirectory(prefix="residual-render-", dir=parent) as folder:
        root = Path(folder)
        cache = root / "cache"
        cache.mkdir()
        for digest, payload in traces.items():
            (cache / f"{digest}.npz").write_bytes(payload)
        job = RenderJob.from_json(job_json)
        job.output, job.verbose = str(root / "out"), False
        files = run_worker(job, env={"RESIDUAL_CACHE": str(cache)}, pythonpath=pythonpath)
        return {p.name: p.read_bytes() for p in files if not p.name.endswith(RECORD_SUFFIX)}


class LocalPool:
    """Renders on this machine, each scene in a ``render.py _worker`` process, at most ``slots`` at once."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.procs: list[subprocess.Popen] = []
        self._gate = threading.Semaphore(slots)
        self._held = 0
        self.waiting = 0  # renders waiting for a slot
        self._stopped: int | None = None  # the signal that stopped the pool
        self._lock = threading.Lock()

    def limit(self, slots: int) -> None:
        """Let at most ``slots`` renders run (while a trainer runs beside them); renders already running go on."""
        while self._held < self.slots - slots:
            self._gate.acquire()
            self._held += 1

    def unlimit(self) -> None:
        while self._held:
            self._gate.release()
            self._held -= 1

    def render(self, job: RenderJob) -> list[Path]:
        with self._lock:
            self.waiting += 1
        try:
            self._gate.acquire()
        finally:
            with self._lock:
                self.waiting -= 1
        try:
            if self._stopped is not None:
                raise RenderError(f"{job.scene}: not started (stopped)")
            return run_worker(job, pythonpath=module_root(job.module), started=self._started)
        finally:
            self._gate.release()

    def idle(self) -> bool:
        """No render is waiting for a slot."""
        return not self.waiting and self._stopped is None

    def try_take_slot(self) -> bool:
        """Take a free render slot for something else (a :class:`TrainingHelper`); False when none is free."""
        return self._gate.acquire(blocking=False)

    def give_slot(self) -> None:
        self._gate.release()

    def _started(self, proc: subprocess.Popen) -> None:
        with self._lock:  # a render started while stop() ran is stopped too
            self.procs.append(proc)
            if self._stopped is not None:
                proc.send_signal(signal.SIGTERM)

    def stop(self, sig: int) -> None:
        """Stop every render: SIGTERM whatever stopped render.py (``sig``), which a worker obeys at any moment
        without a traceback (the default action while its modules load; cli.options.Terminated after)."""
        with self._lock:
            self._stopped = sig
            for proc in self.procs:
                if proc.poll() is None:  # each worker removes its private folder, then exits 143
                    proc.send_signal(signal.SIGTERM)
        self.unlimit()  # renders waiting for a slot see the stop and do not start

    def close(self) -> None:
        pass


class ClusterPool:
    """Renders on a Dask cluster: one :func:`render_task` per scene; the files come back as bytes."""

    slots = 64  # the scheduler decides what runs where; this only bounds the client's waiting threads

    def __init__(self, address: str, connect_timeout: float = 10.0) -> None:
        from distributed import Client

        from simulation.sweep import SweepError

        try:
            self.client = Client(address, timeout=connect_timeout)
        except (OSError, TimeoutError) as exc:
            raise SweepError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        self.futures: list = []
        self._scattered: dict[str, Any] = {}
        self._lock = threading.Lock()

    def limit(self, slots: int) -> None:
        """The cluster's memory is its own: nothing to hold back here."""

    def unlimit(self) -> None:
        pass

    def _trace(self, digest: str):
        with self._lock:  # each trace goes to the cluster once, however many scenes read it
            if digest not in self._scattered:
                payload = digest_path(digest).read_bytes()
                self._scattered[digest] = self.client.scatter(payload, hash=False)
            return self._scattered[digest]

    def render(self, job: RenderJob) -> list[Path]:
        from simulation.sweep import submit_by_name

        traces = {digest: self._trace(digest) for digest in dict.fromkeys(job.traces.values())}
        future = submit_by_name(self.client, render_task, job.to_json(), traces, module_root(job.module),
                                key=f"render-{job.scene}-{job.key()[:16]}", pure=False, retries=0)
        self.futures.append(future)
        try:
            blobs = future.result()
        except RenderError:
            raise
        except Exception as exc:  # a scene's error comes back as the worker raised it
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RenderError(f"{job.scene}: {message}") from None
        return place_files(job, blobs)

    def stop(self, sig: int) -> None:
        self.client.cancel(self.futures)

    def close(self) -> None:
        self.client.close()


class RunQueue:
    """The runs still to train, shared by the trainer (which takes them from the head, lecture order) and a
    :class:`TrainingHelper` (from the tail); it keeps the two trainer processes within ``room`` bytes. An item
    is a config, or a list of configs that train together (their estimates summed).

    ``estimates``: bytes of each config beyond a trainer's base (:func:`simulation.runs.estimate`); ``works``: the
    work of each (:func:`simulation.runs.work`, block-steps), and ``min_helper_work``: the least work left in the
    queue for which a helper process is worth starting (:meth:`could_help`; 0: any). A
    trainer process counts as ``base`` plus the largest run it has taken (its memory does not shrink after
    a run). The trainer waits before a run that would not fit beside the helper, and the helper, which sees
    that (:attr:`head_waiting`), stops after its current run.

    A run too large to ever share the room with a second trainer ("large") is taken out of order while
    ``backlog()`` is true (scenes wait for the render slot, so no helper could use it anyway), and once a
    helper found no room beside the trainer's large run, the trainer is told to start a fresh process before
    its next small run, which gives that memory back (:meth:`take_head`)."""

    def __init__(self, configs: list, estimates: list[int] | None = None, base: int = 0,
                 room: int | None = None, backlog: Callable[[], bool] = lambda: False,
                 works: list[int] | None = None, min_helper_work: int = 0) -> None:
        self._items = list(zip(configs, estimates or [0] * len(configs), works or [0] * len(configs)))
        self.min_helper_work = min_helper_work
        self.base, self.room, self.backlog = base, room, backlog
        self.trainer_bytes = 0  # base + largest run the trainer's process has taken (0 before its first)
        self.helper_bytes = 0  # the same for the helper's process while it lives, else 0
        self.head_waiting = False
        self._helper_starved = False  # a helper found no room beside the trainer's largest run
        self._cond = threading.Condition()

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def _large(self, size: int) -> bool:
        return self.room is not None and 2 * self.base + size > self.room

    def take_head(self):
        """The next run for the trainer, as (config, restart), None when none is left; waits while it does not
        fit beside the helper. ``restart``: start a fresh trainer process for it (see the class docstring)."""
        with self._cond:
            while self._items:
                index = 0
                if self.backlog():
                    index = next((i for i, (_, size, _) in enumerate(self._items) if self._large(size)), 0)
                config, size, _ = self._items[index]
                fresh = self.base + size
                restart = (self._helper_starved and not self._large(size) and self.trainer_bytes > fresh
                           and self._large(self.trainer_bytes - self.base))
                need = fresh if restart else max(self.trainer_bytes, fresh)
                if self.room is None or not self.helper_bytes or need + self.helper_bytes <= self.room:
                    self.head_waiting = False
                    del self._items[index]
                    self.trainer_bytes = need
                    if restart:
                        self._helper_starved = False
                    return config, restart
                self.head_waiting = True
                self._cond.wait()
            return None

    def take_tail(self, helper_bytes: int):
        """The last run that fits beside the trainer in a helper process holding ``helper_bytes`` (0: not started
        yet), as (config, the helper's bytes after it); None when none does or the trainer waits for room."""
        with self._cond:
            if self.head_waiting or self.room is None:
                return None
            for index in range(len(self._items) - 1, -1, -1):
                config, size, _ = self._items[index]
                need = max(helper_bytes, self.base + size)
                if need + max(self.trainer_bytes, self.base) <= self.room:
                    del self._items[index]
                    self.helper_bytes = need
                    return config, need
            return None

    def could_help(self) -> bool:
        """Whether a helper process starting now would find a run that fits (if one would but for the trainer's
        large run, the trainer starts afresh before its next small run), and the runs left hold at least
        ``min_helper_work`` (fewer: the trainer has them done before a second process could start)."""
        with self._cond:
            if self.room is None or self.head_waiting:
                return False
            if sum(work for *_, work in self._items) < self.min_helper_work:
                return False
            trainer = max(self.trainer_bytes, self.base)
            if any(self.base + size + trainer <= self.room for _, size, _ in self._items):
                return True
            if any(not self._large(size) for _, size, _ in self._items):
                self._helper_starved = True
            return False

    def helper_gone(self) -> None:
        with self._cond:
            self.helper_bytes = 0
            self._cond.notify_all()


class Trainer:
    """``python -m simulation.cache --stream``: trains configs one at a time as this object hands them over
    (from ``queue``'s head, or all of ``configs`` in order), one JSON line back per run."""

    def __init__(self, configs: list, queue: RunQueue | None = None) -> None:
        self.queue = queue if queue is not None else RunQueue(configs)
        self.proc = _start_trainer()

    def run(self, done: Callable[[str, str | None], None]) -> None:
        """Call ``done(digest, error or None)`` for each run as it is cached, until the queue is empty."""
        while (taken := self.queue.take_head()) is not None:
            config, restart = taken
            if restart:  # a fresh process: the memory of the last large run goes back
                self.proc.stdin.close()
                self.proc.wait()
                self.proc = _start_trainer()
            for digest, error in _train_one(self.proc, config):
                done(digest, error)
        self.proc.stdin.close()
        if self.proc.wait():
            raise RenderError(f"training stopped (exit status {self.proc.returncode})")

    def stop(self, sig: int) -> None:
        _stop(self.proc, sig)


def _start_trainer() -> subprocess.Popen:
    from simulation import cache

    # An installed copy finds its modules anywhere; a checkout's folders are found from its root.
    env = os.environ if INSTALLED else {
        **os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    # A process group of its own: Ctrl-C in a terminal reaches render.py only, which stops this process with
    # SIGTERM (_stop); a SIGINT while its modules load would print a KeyboardInterrupt traceback.
    return subprocess.Popen([sys.executable, "-m", cache.__spec__.name, "--stream"], cwd=None if INSTALLED else ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, env=env,
                            process_group=0)


def _train_one(proc: subprocess.Popen, item) -> list[tuple[str, str | None]]:
    """Hand one run, or a group of runs to train together (a list), to a ``--stream`` process and wait for its
    lines: [(digest, error or None)], one per run."""
    group = item if isinstance(item, list) else [item]
    try:
        payload = [c.to_dict() for c in group] if isinstance(item, list) else item.to_dict()
        proc.stdin.write(json.dumps(payload) + "\n")
        proc.stdin.flush()
    except (BrokenPipeError, OSError):
        pass  # it has exited: the empty read below says so
    out = []
    for _ in group:
        line = proc.stdout.readline()
        while line and not line.strip():
            line = proc.stdout.readline()
        if not line:
            proc.wait()
            raise RenderError(f"training stopped (exit status {proc.returncode})")
        answer = json.loads(line)
        out.append((answer["digest"], answer.get("error")))
    return out


def _stop(proc: subprocess.Popen | None, sig: int) -> None:
    """Stop a trainer: SIGTERM whatever stopped render.py (``sig``): it ends quietly at any moment, while its modules
    load (the default action) as while it trains (simulation.cache.main: SystemExit, the temporary trace removed)."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


class TrainingHelper:
    """Trains runs from the tail of the queue on a render slot that nothing renders on.

    While the trainer works through the runs in lecture order, the render slot beside it is idle whenever
    no scene has all of its traces yet (the lecture's later scenes read many runs). This thread then takes
    that slot from ``pool`` (so no render starts beside it), starts a second ``--stream`` process and trains
    the last runs of the queue that fit in memory beside the trainer (:class:`RunQueue`), one at a time. It
    stops after the current run, and its process exits so that its memory goes back, as soon as a scene is
    waiting for a slot, the trainer is waiting for room, or nothing fitting is left; it starts again when
    the slot is idle once more. Each run is still trained by ``python -m simulation.cache`` from its config
    alone, so its trace is the same whichever process trains it."""

    POLL = 0.2  # seconds between looks at an idle slot

    def __init__(self, queue: RunQueue, pool: "LocalPool") -> None:
        self.queue, self.pool = queue, pool
        self.proc: subprocess.Popen | None = None
        self.error: BaseException | None = None
        self.trained: list[str] = []
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, done: Callable[[str, str | None], None]) -> None:
        self._thread = threading.Thread(target=self._run, args=(done,), name="training-helper", daemon=True)
        self._thread.start()

    def join(self) -> None:
        """Wait until it has stopped (the queue is empty); re-raise its error, if any."""
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise self.error

    def _run(self, done: Callable[[str, str | None], None]) -> None:
        try:
            while len(self.queue) and not self._stopped.is_set():
                if self.pool.idle() and self.queue.could_help() and self.pool.try_take_slot():
                    try:
                        self._help(done)
                    finally:
                        self.pool.give_slot()
                else:
                    self._stopped.wait(self.POLL)
        except BaseException as exc:  # reported by join() in the pipeline's thread
            self.error = exc

    def _help(self, done: Callable[[str, str | None], None]) -> None:
        held = 0
        try:
            while not self._stopped.is_set() and not self.pool.waiting:
                taken = self.queue.take_tail(held)
                if taken is None:
                    break
                config, held = taken
                if self.proc is None:
                    self.proc = _start_trainer()
                for digest, error in _train_one(self.proc, config):
                    self.trained.append(digest)
                    done(digest, error)
        finally:
            proc, self.proc = self.proc, None
            if proc is not None:
                try:
                    proc.stdin.close()
                except OSError:  # it was stopped
                    pass
                proc.wait()
            self.queue.helper_gone()

    def stop(self, sig: int) -> None:
        self._stopped.set()
        _stop(self.proc, sig)


class ClusterTrainer:
    """The missing runs as one sweep on the Dask cluster (simulation.sweep), sent in the given order."""

    def __init__(self, configs: list, scheduler: str) -> None:
        self.configs, self.scheduler = configs, scheduler

    def run(self, done: Callable[[str, str | None], None]) -> None:
        from simulation.cache import get_traces

        get_traces(self.configs, scheduler=self.scheduler, in_order=True,
                   on_trace=lambda config, trace: done(config.digest(), None))

    def stop(self, sig: int) -> None:
        """The sweep's client closes as the interruption unwinds through it; its tasks are dropped."""


def run_pipeline(todo: list[RenderJob], pool, trainer, training_slots: int, note: Callable[[str], None],
                 stop_signal: Callable[[], int], progress: bool = False,
                 helper: TrainingHelper | None = None) -> tuple[list[Path], list[str]]:
    """Render ``todo`` (lecture order) through ``pool`` as their traces arrive; (files written, failures).

    ``trainer.run(done)`` trains the missing runs in order and calls ``done(digest, error)`` for each as it
    is cached (``trainer`` None: nothing to train); while it runs at most ``training_slots`` renders run.
    ``helper`` (a :class:`TrainingHelper` sharing the trainer's queue) trains runs on a render slot that
    no scene needs meanwhile; it may call ``done`` from its own thread.
    ``stop_signal()``: the signal to pass on when interrupted (SIGINT for Ctrl-C, SIGTERM for a kill)."""
    from tqdm.auto import tqdm

    waiting = list(todo)
    failed_runs: dict[str, str] = {}
    ready: set[str] = set()
    written: list[Path] = []
    failures: list[str] = []
    futures: dict = {}
    files: dict[str, list[Path]] = {}
    started = [0]
    lock = threading.Lock()
    executor = ThreadPoolExecutor(max_workers=max(1, min(pool.slots, len(todo))))

    def render(job: RenderJob) -> list[Path]:
        with lock:
            started[0] += 1
            index = started[0]
        note(f"rendering {job.scene} ({index}/{len(todo)})")
        return pool.render(job)

    def submit_ready() -> None:
        for job in list(waiting):
            needed = set(job.traces.values())
            bad = needed & set(failed_runs)
            if bad:
                waiting.remove(job)
                digest = sorted(bad)[0]
                failures.append(f"{job.scene}: training run {digest} failed: {failed_runs[digest]}")
            elif needed <= ready:
                waiting.remove(job)
                futures[executor.submit(render, job)] = job

    def done(digest: str, error: str | None) -> None:
        with lock:  # the trainer's thread and the helper's
            if error:
                failed_runs[digest] = error
            else:
                ready.add(digest)
            submit_ready()

    try:
        if trainer is not None:
            pool.limit(training_slots)
            ready.update(d for job in todo for d in job.traces.values() if digest_path(d).is_file())
            submit_ready()
            if helper is not None:
                helper.start(done)
            trainer.run(done)
            if helper is not None:
                helper.join()
            pool.unlimit()
        else:
            ready.update(d for job in todo for d in job.traces.values())
        submit_ready()
        for job in waiting:  # the trainer ended without this scene's runs
            failures.append(f"{job.scene}: its traces were not trained")
        with tqdm(total=len(futures), desc="scenes", unit="scene", disable=not progress) as bar:
            for future in as_completed(futures):
                try:
                    files[futures[future].scene] = future.result()
                except RenderError as exc:
                    failures.append(str(exc))
                bar.update()
        written = [path for job in todo for path in files.get(job.scene, [])]  # lecture order
    except BaseException:
        sig = stop_signal()
        for future in futures:
            future.cancel()
        if helper is not None:
            helper.stop(sig)
        if trainer is not None:
            trainer.stop(sig)
        pool.stop(sig)
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        pool.close()
    return written, failures


def train_before_render(configs: list, scheduler: str | None, quality: str) -> None:
    """Train ``configs`` before a render in this process: here (torch stays loaded) when this process, a
    trainer and a render worker fit in the tree budget together, else in a trainer process that hands
    its memory back before the render (cli/jobs.py). Raises RenderError naming the runs that failed."""
    from cli.jobs import MAIN_MIB, TRAINER_BASE_MIB, MiB, tree_budget, worker_bytes
    from simulation.cache import get_traces
    from simulation.runs import estimate

    trainer = TRAINER_BASE_MIB * MiB + max(estimate(c).total for c in configs)
    if scheduler is not None or MAIN_MIB * MiB + trainer + worker_bytes(quality) <= tree_budget():
        get_traces(configs, scheduler=scheduler)
        return
    errors = []
    Trainer(configs).run(lambda digest, error: errors.append(f"run {digest}: {error}") if error else None)
    if errors:
        raise RenderError("training failed: " + "; ".join(errors))


def render_pipeline(todo: list, fresh: list, scheduler: str | None, n_jobs: int, quality: str, explicit: bool,
                    note: Callable[[str], None], stop_signal: Callable[[], int]) -> tuple[list[Path], list[str]]:
    """Train ``fresh`` in lecture order while the scenes of ``todo`` render as their traces arrive, on
    the cluster at ``scheduler`` or in up to ``n_jobs`` local processes; (written, failures). ``note`` prints
    progress lines; ``stop_signal()`` says which signal stops the trainer and every render when the main
    thread is interrupted (Ctrl-C: SIGINT, a SIGTERM: SIGTERM)."""
    from cli.jobs import TRAINER_BASE_MIB, MiB, render_slots, training_room
    from simulation.runs import estimate, seed_groups, work

    pool = ClusterPool(scheduler) if scheduler else LocalPool(n_jobs)
    trainer, helper, slots = None, None, n_jobs
    if fresh and scheduler:
        trainer = ClusterTrainer(fresh, scheduler)
    elif fresh:
        # Runs that differ only in their seed train together (simulation.runs.seed_groups), bit for bit as alone.
        groups = [group if len(group) > 1 else group[0] for group in seed_groups(fresh)]
        sizes = [sum(estimate(c).total for c in (g if isinstance(g, list) else [g])) for g in groups]
        # A second trainer may use an idle render slot when two trainers fit where a trainer and renders do.
        queue = RunQueue(groups, sizes, TRAINER_BASE_MIB * MiB, training_room(explicit) if n_jobs > 1 else None,
                         backlog=lambda: pool.waiting > 0,
                         works=[sum(map(work, g if isinstance(g, list) else [g])) for g in groups],
                         min_helper_work=HELPER_MIN_WORK)
        trainer = Trainer(fresh, queue=queue)
        helper = TrainingHelper(queue, pool) if n_jobs > 1 else None
        slots = render_slots(n_jobs, quality, TRAINER_BASE_MIB * MiB + max(sizes), explicit)
    # the output folders no job has made yet go again if Ctrl-C or SIGTERM leaves them empty (each render_job does
    # the same for its own, but jobs in parallel race to make them: the loser thinks it made only the deepest)
    made = sorted({p for job in todo for p in (job.final_dir, *job.final_dir.parents) if not p.exists()},
                  key=lambda p: len(p.parts), reverse=True)
    try:
        return run_pipeline(todo, pool, trainer, slots, note, stop_signal, progress=sys.stderr.isatty(),
                            helper=helper)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "Terminated":  # cli.options.Terminated
            remove_if_empty(made)
        raise
