"""A run read from its trace file: ``--trace FILE [--twin FILE]`` draws what a watched run recorded (torch-free).

Example::

    python render.py render GradientFlowOverTraining --trace runs/resnet.npz --twin runs/resnet-plain.npz
    python render.py render DepthTimeMap --trace runs/resnet.npz
    python render.py inspect runs/resnet.npz

A trace from a file enters as one more run kind (``recorded``, :mod:`simulation.runs`), never as a special case in
a scene: ``--trace FILE`` and ``--twin FILE`` set the parameters ``trace`` and ``twin`` of the experiment ``model``
(as ``--model`` sets its ``spec``), whose runs are then ``residual`` (the file of ``--trace``) and ``plain`` (the
file of ``--twin``, when given) as :class:`~simulation.config.RecordedConfig`. Their "trainer" :func:`run` reads the
file; the trace cache keeps a copy under the config's digest (which hashes the file's bytes), with ``meta.config``
and ``meta.digest`` of the config and every array and the rest of the metadata (``meta.layers``, ``meta.watch``)
as the file has them. Every output then reads it as it reads a trained run: the scenes, the deck, the page and the
explorer.

A file may lack what a scene draws (a watched run records no test error; a run without ``--twin`` has no plain
twin): :func:`missing` says what, and the render planner refuses such a scene in one line before any work.
"""

from __future__ import annotations

import functools
import json
import os
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..atomic_io import input_file
from ..config import ConfigError, RecordedConfig, UserModelConfig, file_stamp, spec_title, trace_source
from ..runkeys import RunKey
from ..trace import Trace, TraceError, TraceMeta

__all__ = ["run", "recorded_runs", "file_meta", "file_keys", "file_records", "missing", "check_file", "RUN_FLAGS"]

RUN_FLAGS = {"residual": "--trace", "plain": "--twin"}  # the option that names each run's file


def _arch_of(meta: TraceMeta) -> str | None:
    """What the file says it recorded: "residual" (a network with its shortcuts) or "plain" (a twin), if it says."""
    watch = meta.watch if isinstance(getattr(meta, "watch", None), dict) else {}
    arch = watch.get("arch", meta.config.get("arch"))
    return arch if arch in ("plain", "residual") else None


@functools.lru_cache(maxsize=32)
def _described(path: str, stamp: tuple) -> tuple[TraceMeta, frozenset[str], int]:
    if not os.path.lexists(path) and os.path.isdir(f"{path}.parts"):  # a watched run not closed: read the parts
        trace = Trace.load(path)
        return trace.meta, frozenset(trace.arrays), len(np.atleast_1d(trace["step"]))
    input_file(path, "trace", TraceError)
    # Trace.load's checks, without reading the arrays
    if not zipfile.is_zipfile(path):
        raise TraceError(f"trace {path} is corrupt or truncated (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as data:
            keys = frozenset(k for k in data.files if k != "__meta__")
            if "__meta__" not in data.files:
                raise TraceError(f"trace {path} has no metadata; it was not written by this tool")
            meta = json.loads(str(data["__meta__"]))
            steps = len(np.atleast_1d(data["step"])) if "step" in data.files else 0
    except TraceError:  # a ValueError too, but already the one line to say ("has no metadata ...")
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:  # JSONDecodeError: a ValueError
        raise TraceError(f"trace {path} is corrupt or truncated ({type(exc).__name__}: {exc})") from None
    if not isinstance(meta, dict) or meta.get("schema") != TraceMeta().schema:
        raise TraceError(f"trace {path} has schema version {meta.get('schema') if isinstance(meta, dict) else None}, "
                         f"this tool reads {TraceMeta().schema}")
    if not steps:
        raise TraceError(f"trace {path} has no records (its 'step' array is missing or empty)")
    try:
        return TraceMeta.from_dict(meta), keys, steps
    except TypeError as exc:
        raise TraceError(f"trace {path} has unreadable metadata ({exc})") from None


def file_meta(path: str) -> TraceMeta:
    """The metadata of the trace at ``path`` (its arrays are not read). Raises TraceError (one line)."""
    return _described(os.path.abspath(path), file_stamp(os.path.abspath(path)))[0]


def file_keys(path: str) -> frozenset[str]:
    """The names of the arrays of the trace at ``path`` (not read). Raises TraceError (one line)."""
    return _described(os.path.abspath(path), file_stamp(os.path.abspath(path)))[1]


def file_records(path: str) -> int:
    """How many steps the trace at ``path`` recorded (the length of its ``step`` array; at least 1). Raises
    TraceError (one line)."""
    return _described(os.path.abspath(path), file_stamp(os.path.abspath(path)))[2]


def check_file(path: str, arch: str) -> TraceMeta:
    """The metadata of the trace given as the run ``arch`` ("residual": ``--trace``, "plain": ``--twin``), checked:
    readable, with blocks (``meta.layers``), and of that arch where it says. Raises ConfigError (one line)."""
    flag = RUN_FLAGS[arch]
    try:
        meta = file_meta(path)
    except TraceError as exc:
        raise ConfigError(f"{flag}: {exc}") from None
    if not meta.layers:
        raise ConfigError(f"{flag} {path}: the trace names no residual blocks (meta.layers); record the run with "
                          "residual_lecture.watch or render.py train --model")
    said = _arch_of(meta)
    if said is not None and said != arch:
        other = "--twin" if arch == "residual" else "--trace"
        raise ConfigError(f"{flag} {path}: the trace is of a {said} network; give it as {other} "
                          "(--trace: your network, --twin: its plain_twin)")
    return meta


def _title(meta: TraceMeta) -> str:
    """The model's name a trace gives: the watched model's class, or the factory of a ``--model`` run's spec."""
    watch = meta.watch if isinstance(getattr(meta, "watch", None), dict) else {}
    return str(watch.get("model") or spec_title(meta.config.get("spec")) or "")


def _other_blocks(twin: list[str], trace: list[str]) -> str:
    """How the twin's block names differ from the trace's: their counts, or the first block named otherwise (a
    new user was told "its blocks (4) are not those of --trace (4)" for two nets of four blocks named apart)."""
    if len(twin) != len(trace):
        return f"it has {len(twin)} blocks, --trace has {len(trace)}"
    index = next(i for i, (a, b) in enumerate(zip(twin, trace)) if a != b)
    return f"its block {index} is {twin[index]!r}, --trace's is {trace[index]!r}"


def recorded_runs(base: UserModelConfig, trace: str, twin: str) -> dict[str, RecordedConfig]:
    """The runs of the experiment ``model`` read from files: ``residual`` (``trace``) and ``plain`` (``twin``, if
    given). Refuses (ConfigError, one line) a twin without a trace, a --model beside them, training parameters
    (nothing is trained) and files that cannot be drawn together (other blocks)."""
    if not trace:
        raise ConfigError("--twin needs --trace: the trace of your network, recorded beside its plain twin")
    changed = sorted(k for k, v in base.to_dict().items()
                     if k not in base.not_parameters and v != getattr(UserModelConfig(), k))
    if "spec" in changed:
        raise ConfigError("give --model (train your network here) or --trace (draw a run recorded elsewhere), not both")
    if changed:
        raise ConfigError(f"--trace draws a run recorded elsewhere: nothing is trained, so {changed[0]} "
                          f"(set to {getattr(base, changed[0])!r}) does not apply; leave it out")
    metas = {"residual": check_file(os.path.abspath(trace), "residual")}
    title = _title(metas["residual"])
    runs = {"residual": RecordedConfig(path=trace, arch="residual", title=title)}
    if twin:
        metas["plain"] = check_file(os.path.abspath(twin), "plain")
        runs["plain"] = RecordedConfig(path=twin, arch="plain", title=title)
        if metas["plain"].layers != metas["residual"].layers:
            raise ConfigError(f"--twin {twin}: {_other_blocks(metas['plain'].layers, metas['residual'].layers)}; "
                              "record the twin of the same model (residual_lecture.plain_twin)")
    return runs


def missing(runs: dict[RunKey, Any], needs_runs: Iterable[str], needs_keys: Iterable[str],
            min_records: int = 1) -> str | None:
    """What a scene that reads the runs ``needs_runs``, their arrays ``needs_keys`` and at least ``min_records``
    recorded steps of each (a course over training needs two) lacks among ``runs`` (keys :class:`RunKey`), where
    those are read from files; None when nothing is missing or no run is read from a file."""
    recorded = {key.name: config for key, config in runs.items() if isinstance(config, RecordedConfig)}
    if not recorded:
        return None
    names = {key.name for key in runs}
    for name in needs_runs:
        if name not in names:
            return f"it draws the run {name!r} too: give {RUN_FLAGS.get(name, name)} FILE" + (
                " (the trace of plain_twin(model), recorded with watch in the same loop)" if name == "plain" else "")
    for name, config in recorded.items():
        lacking = [key for key in needs_keys if key not in file_keys(config.path)]
        if lacking:
            return (f"{RUN_FLAGS.get(name, name)} {config.path} has no {', '.join(lacking)}"
                    + (" (a watched run records no classification error)"
                       if set(lacking) & {"error_curve", "test_error", "error"} else ""))
        records = file_records(config.path)
        if records < min_records:
            return (f"{RUN_FLAGS.get(name, name)} {config.path} recorded {records} "
                    f"{'step' if records == 1 else 'steps'}; the scene draws a course over training and needs "
                    f"{min_records} or more: record more often (watch(..., every=N), N below the steps the loop runs)")
    return None


def run(config: RecordedConfig, progress: bool | None = None) -> Trace:
    """The trace in ``config.path``, stamped as this config's run (``meta.config``, ``meta.digest``; every array and
    the rest of the metadata as the file has them). Raises ConfigError (one line) for a file that cannot be read,
    is not of ``config.arch`` or changed since the config was made (a run still being recorded)."""
    check_file(config.path, config.arch)
    try:
        trace = Trace.load(config.path)
    except TraceError as exc:
        raise ConfigError(f"{RUN_FLAGS[config.arch]}: {exc}") from None
    if trace_source(config.path) != config.source:
        raise ConfigError(f"{RUN_FLAGS[config.arch]} {config.path} changed while it was read (a run still being "
                          "recorded?); run the command again")
    return Trace(replace(trace.meta, config=config.to_dict(), digest=config.digest()), trace.arrays)
