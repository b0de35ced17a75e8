"""How many scenes render at once: the cores, capped so the whole process tree fits in memory.

Example::

    python -c "from cli.jobs import default_jobs; print(default_jobs('l'))"

A render worker is a ``render.py _worker`` process (Manim, one core). Its peak resident memory was measured
with one libx264 thread (:data:`ENCODER_THREADS`, as every render runs), traces cached, Manim 0.22,
Debian 12: 294 MiB at ``-q l`` (854x480; the largest maximum RSS, ``/usr/bin/time -f %M``, of IdentityHighway,
GradientPlusOne and ChainRuleProduct) and 436 MiB at ``-q h`` (1920x1080; ChainRuleExploding, the largest
worker of a whole ``render.py all -q h --jobs 2`` run, ``benchmarks/tree_rss.py``: 409 and 436 MiB in two runs
with a look-ahead of 3 frames, 432-453 with 5; the three scenes above peaked at 385-410 MiB with 5). With
Manim's encoder settings a ``-q h``
worker peaked at 730-780 MiB: libx264's look-ahead of 40 frames held ~8 MiB per frame and up to 8 frames
(7.9 MiB each) waited for the encoder; at ``-q m/h/k`` the look-ahead is 3 frames and the queue 2
(:func:`scenes.kit.encoder.video_options`, :func:`scenes.kit.encoder.queue_size`), and each segment's freed encoder
buffers go back to the system (:func:`scenes.kit.encoder.finish`); docs/developers/speed.md. ``-q m`` and ``-q k`` follow the
line through the two points (about 255 MiB + 94 MiB per megapixel; not measured). The command itself (click,
Manim and the scenes imported, no torch) peaks at about 140 MiB, and a trainer process (``python -m
simulation.cache``: torch, the data, one run) at about 400 MiB plus the run's own estimate
(:func:`simulation.runs.estimate`; 440 MiB measured for the lecture's largest run, a 20-layer conv net
estimated at 52 MB).

The default (``--jobs`` not given) is the cores this process may use (``os.sched_getaffinity``), capped so
that the tree, the command plus its render workers, stays within :data:`TREE_BUDGET` (1 GiB) and within the
memory budget of :func:`simulation.memory.budget_bytes` (half the available memory). An explicit
``--jobs N`` is honoured when N workers fit in the memory budget and refused before any work otherwise.
While a trainer runs beside the renders, fewer renders start (:func:`render_slots`), so the tree keeps to
the same bound; a second trainer takes an idle render slot only when both trainers, each counted as
:data:`TRAINER_BASE_MIB` plus its largest run, fit in :func:`training_room` (cli/pipeline.py, RunQueue).
Two ``-q h`` workers and the command by this rule need 2 x 436 + 140 = 1012 MiB, so the default at ``-q h`` on 2
cores is 2 jobs (a whole ``-q h`` lecture with two jobs and a look-ahead of 5 peaked at 955 MiB summed over the
tree: the two workers' peaks do not coincide).
"""

from __future__ import annotations

import os

from simulation.config import ConfigError

__all__ = ["WORKER_MIB", "MAIN_MIB", "TRAINER_BASE_MIB", "TREE_BUDGET", "worker_bytes", "cores", "tree_budget",
           "default_jobs", "check_jobs", "render_slots", "training_room", "describe_cap"]

MiB = 2**20
# Peak RSS of one render worker by quality (MiB): l and h measured, m and k on the line through them.
_PIXELS = {"l": 854 * 480, "m": 1280 * 720, "h": 1920 * 1080, "k": 3840 * 2160}
_MEASURED_MIB = {"l": 294, "h": 436}  # measured peaks, one x264 thread (see the docstring)
_SLOPE = (_MEASURED_MIB["h"] - _MEASURED_MIB["l"]) / (_PIXELS["h"] - _PIXELS["l"])  # MiB per pixel
WORKER_MIB = {q: round(_MEASURED_MIB["l"] + _SLOPE * (px - _PIXELS["l"])) for q, px in _PIXELS.items()}
MAIN_MIB = 140  # render.py itself: click, Manim, the scenes (measured 133-136 MiB for `all --check`)
TRAINER_BASE_MIB = 400  # python -m simulation.cache with torch imported, before the run's own memory
TREE_BUDGET = 1024 * MiB  # the default keeps the whole process tree within this (issue 11)
ENCODER_THREADS = 1  # libx264 threads of every render from -q m up (cli/media.py): the same segments pooled or alone


def worker_bytes(quality: str) -> int:
    """Peak resident memory, in bytes, of one render worker at ``quality`` (l | m | h | k)."""
    return WORKER_MIB[quality] * MiB


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _memory_budget() -> tuple[int, str]:
    from simulation.memory import budget_bytes

    return budget_bytes()


def tree_budget() -> int:
    """Bytes the default may use: :data:`TREE_BUDGET`, or the memory budget if that is smaller."""
    return min(TREE_BUDGET, _memory_budget()[0])


def _fit(budget: int, quality: str, trainer: int = 0) -> int:
    return max(0, (budget - MAIN_MIB * MiB - trainer) // worker_bytes(quality))


def default_jobs(quality: str, n_cores: int | None = None, budget: int | None = None) -> int:
    """The cores (``n_cores``, default :func:`cores`), capped by how many workers fit in ``budget`` bytes
    (default :func:`tree_budget`) beside the command; at least 1 (one scene at a time always renders)."""
    n_cores = cores() if n_cores is None else n_cores
    budget = tree_budget() if budget is None else budget
    return max(1, min(n_cores, _fit(budget, quality)))


def check_jobs(jobs: int, quality: str) -> None:
    """Raise ConfigError (one line) unless ``jobs`` workers at ``quality`` fit in the memory budget
    (:func:`simulation.memory.budget_bytes`, ``$RESIDUAL_MEMORY_BUDGET`` to change it)."""
    budget, how = _memory_budget()
    need = MAIN_MIB * MiB + jobs * worker_bytes(quality)
    if jobs > 1 and need > budget:
        raise ConfigError(f"--jobs {jobs} at quality {quality} would need about {need / 2**30:.1f} GiB "
                          f"({jobs} x {WORKER_MIB[quality]} MiB per render worker + {MAIN_MIB} MiB), over the "
                          f"memory budget of {budget / 2**30:.1f} GiB ({how}); use --jobs "
                          f"{max(1, _fit(budget, quality))} or set RESIDUAL_MEMORY_BUDGET")


def render_slots(jobs: int, quality: str, trainer: int, explicit: bool, budget: int | None = None) -> int:
    """Renders that may run at once while a trainer needing ``trainer`` bytes runs (0 when none does).
    The default (``explicit`` False) keeps the tree within :func:`tree_budget`, an explicit ``--jobs`` within
    the memory budget; 0 means: wait for the training to end."""
    if not trainer:
        return jobs
    if budget is None:
        budget = _memory_budget()[0] if explicit else tree_budget()
    return min(jobs, _fit(budget, quality, trainer))


def training_room(explicit: bool, budget: int | None = None) -> int:
    """Bytes that trainer processes may hold together beside the command (the budget, as for
    :func:`render_slots`, less :data:`MAIN_MIB`): two trainers run at once only within it
    (cli/pipeline.py, RunQueue), each counted as :data:`TRAINER_BASE_MIB` plus its largest run."""
    if budget is None:
        budget = _memory_budget()[0] if explicit else tree_budget()
    return max(0, budget - MAIN_MIB * MiB)


def describe_cap() -> str:
    """One line for --help: the rule and the measured figures it uses."""
    per = ", ".join(f"{q} {WORKER_MIB[q]}" for q in ("l", "m", "h", "k"))
    try:
        here = ", ".join(f"{default_jobs(q)} at -q {q}" for q in ("l", "h"))
    except ConfigError:  # e.g. a bad $RESIDUAL_MEMORY_BUDGET: --help must still work; a render reports it
        here = "unknown (the memory budget setting is invalid)"
    return (f"Default: the cores, capped so the command and its workers stay within 1 GiB and half the "
            f"available memory (MiB per worker: {per}); here now: {here}.")
