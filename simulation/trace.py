"""Trace files: the numbers one training run recorded, as ``.npz`` plus JSON metadata (torch-free).

Example::

    python -c "from simulation.trace import Trace; print(Trace.load('.cache/traces/<digest>.npz').meta)"

A trace is never unpickled: arrays are read with ``np.load(..., allow_pickle=False)`` and the
metadata is a JSON string stored as a unicode array under the key ``__meta__``.

A trace written while training runs (``residual_lecture.watch``: :class:`TraceWriter`) grows as parts in the folder
``<path>.parts/`` beside it: ``meta.json`` and one ``.npz`` per flush, each renamed into place atomically. Closing
the writer consolidates them into ``<path>`` (atomically) and removes the folder; a run killed before that (SIGKILL,
out of memory) leaves the parts, and :meth:`Trace.load` of ``<path>`` then reads them as a partial trace
(``meta.watch["complete"]`` false) holding every record flushed before the kill.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import zipfile
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from simulation.atomic_io import atomic_write, input_file

__all__ = ["Trace", "TraceMeta", "TraceError", "SCHEMA_VERSION", "atomic_write", "ARRAY_AXES", "TraceWriter",
           "parts_dir", "load_parts"]

SCHEMA_VERSION = 1
_META_KEY = "__meta__"

# Every array a trainer records, with its axes: sizes named by Trace.sizes ("records": recorded steps; "steps":
# every optimiser step; "layers": meta.layers, the MLP / conv blocks, the Transformer's layers, a user model's
# residual additions; "branches": where a branch F(x) is added, the Transformer's sublayers, else the layers;
# "layers+1"; "depth+1": the config's depth + 1; "init_batches"; "grid": a loss slice's points per axis; "streams":
# the residual streams of a hyper-connection run) or a fixed size. Trace.blank fills one a trace lacks from this table.
_PER_LAYER = ("act_mean", "act_std", "act_norm", "grad_norm", "out_grad_norm", "in_grad_norm", "nonfinite",
              "nonfinite_act", "nonfinite_grad", "ffn_grad_norm", "input_cos",
              "gate_mean")  # gate_mean: a highway block's mean T(x) (simulation.kinds.highway; NaN without a gate)
_PER_BRANCH = ("input_norm", "branch_norm", "branch_std", "shortcut_norm", "sum_norm", "out_norm")
ARRAY_AXES: dict[str, tuple[str | int, ...]] = {
    **{key: ("records",) for key in ("step", "loss", "error", "test_error", "test_loss", "branch_ratio")},
    **{key: ("steps",) for key in ("loss_curve", "error_curve", "grad_norm_curve", "lr_curve")},
    **{key: ("records", "layers") for key in _PER_LAYER},
    **{key: ("records", "branches") for key in _PER_BRANCH},
    "final_test_error": (), "tolerance_step": (),  # scalars
    "lesion_test_error": ("layers",),  # Veit et al. 2016, Fig. 3
    "path_length_fraction": ("layers+1",),  # residual runs only
    "input_sweep": (256,), "input_grad": (2, 256), "input_grad_autocorr": (2, 64),  # Balduzzi et al. 2017
    "init_grad_norm": ("init_batches", "layers"), "init_ffn_grad_norm": ("init_batches", "layers"),  # Xiong 2020
    "rank_residual": (2, "depth+1"),  # Dong et al. 2021: the encoder's input and every encoder layer's output
    # the logit lens (nostalgebraist 2020): at init and after training, the stream's input and every layer's output
    **{key: (2, "depth+1") for key in ("lens_kl", "lens_top1", "lens_accuracy")},
    # Li et al. 2018: the slice's grid coordinates, the loss and error at each grid point, the two directions' norms
    "coords": ("grid",), "loss_grid": ("grid", "grid"), "error_grid": ("grid", "grid"), "direction_norm": (2,),
    **{key: ("records", "layers") for key in ("composite_row_gain", "composite_col_gain", "composite_sigma")},
    "res_matrices": ("records", "layers", "streams", "streams"),  # hyper-connections: every block's H_res
    # residual_lecture.watch (a user's own loop): per record
    **{key: ("records",) for key in ("total_grad_norm", "total_grad_norm_before_clip", "scale", "skipped",
                                     "micro_batches")},
    **{key: ("records", "layers") for key in ("grad_norm_before_clip", "update_ratio")},
    "lr": ("records", "param_groups"),
    "scale_curve": ("steps",),
}


class TraceError(ValueError):
    """A trace file is missing, corrupt, truncated or of another schema version."""


@dataclass(frozen=True)
class TraceMeta:
    """What a trace says about the run that made it: the contract between trainers and scenes.

    Read it as attributes (``meta.diverged``); the run's config typed as :attr:`Trace.run_config`. Written to the
    ``.npz`` as JSON by :meth:`to_dict`.
    """

    config: dict[str, Any] = field(default_factory=dict)  # the full config as JSON (to_dict); typed: Trace.run_config
    digest: str = ""  # the config's digest: the cache key and file name
    seed: int | None = None  # config["seed"], repeated for readers that show it
    versions: dict[str, str] = field(default_factory=dict)  # torch, numpy, python that trained it
    layers: list[str] | None = None  # names of the recorded layers, in array order: "block.3", "decoder.1"
    sublayers: list[str] | None = None  # Transformer: names of the sublayers, e.g. "decoder.2.ffn"
    block_widths: list[list[int]] | None = None  # MLP / conv: (width in, width out) of every block
    blocks: int | None = None  # MLP / conv / user model: number of blocks (the length of every per-block array)
    shortcuts: list[str] | None = None  # user model: "identity" | "functional" | "projection" per block
    diverged: bool = False  # a loss or gradient became non-finite; training stopped there
    diverged_step: int | None = None  # the step where it did (null for a finite run)
    diverged_layer: int | None = None  # first layer with a non-finite value; -1: stem, head or loss
    diverged_pass: str | None = None  # "forward" | "backward" | "stem_or_head" (MLP, conv); null otherwise
    # The seeds of the runs trained together with this one as one stacked model (simulation.kinds.stacked), this one's
    # included; null: trained alone. Either way the arrays are the same, bit for bit (tests/test_stacked.py).
    trained_with_seeds: list[int] | None = None
    # A run recorded in the user's own loop by residual_lecture.watch: its own schema version ("schema"), "complete"
    # (false: a partial trace read from parts), "world_size", "accumulation", "dtype", "every", "scaler", "model",
    # "param_groups", "steps_recorded", "update_ratio" ... (docs/how-to/watch.md). Null for every other run.
    watch: dict[str, Any] | None = None
    schema: int = SCHEMA_VERSION  # file format version (see SCHEMA_VERSION)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TraceMeta":
        """Raises :class:`TraceError` for a key this version does not know."""
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise TraceError(f"trace metadata has unknown key(s) {', '.join(unknown)}; written by another version")
        return cls(**data)


@dataclass
class Trace:
    """One run's recorded statistics.

    ``arrays`` maps flat keys to numpy arrays. Keys written by :mod:`simulation.kinds.mlp` (T records,
    ``steps`` optimiser steps, ``depth`` blocks (3n for a conv net), P = 256 sweep points):

    - ``step``: int64 [T], the optimiser step of each record (step 0 = before any update).
    - ``loss``, ``error``: float32 [T], training loss (cross-entropy, nats) and error (fraction
      misclassified) on the recorded batch; ``test_error``: float32 [T] on the held-out split.
    - ``loss_curve``, ``error_curve``: float32 [steps], training loss and error of every step's batch;
      ``grad_norm_curve``: float64 [steps], L2 norm of the gradient over all parameters at every step.
      NaN marks steps that were never run (after a divergence).
    - ``act_mean``, ``act_std``, ``act_norm``: float32 [T, depth], statistics of each block's output
      h_l (``act_norm``: mean over examples of the L2 norm ||h_l||).
    - ``input_norm``: float32 [T, depth], mean ||x|| of each block's input; ``branch_norm``,
      ``branch_std``: of the residual branch F(x) (for plain nets F(x) is the block output; He et al.
      2015, Fig. 7); ``shortcut_norm``: mean ||shortcut(x)|| (= ``input_norm`` for an identity
      shortcut, ||W_s x|| for a projection, 0 for plain blocks).
    - ``grad_norm``: float64 [T, depth], L2 norm of dL/dW over all weight matrices of each block
      (float64 so that vanishing gradients below 1e-38 do not flush to 0; an exact 0 means the float32
      gradient itself underflowed).
    - ``out_grad_norm``: float64 [T, depth], L2 norm of dL/dh_l over the batch.
    - ``nonfinite``: int64 [T, depth], count of non-finite values seen in each block at each record:
      ``nonfinite_act`` (in h_l) plus ``nonfinite_grad`` (in dL/dh_l and the weight gradients).
    - ``final_test_error``: float32 [], test error after the last update (NaN if the run diverged).
    - ``lesion_test_error``: float32 [depth], test error of the trained net with block l deleted at
      test time (Veit et al. 2016, Fig. 3); NaN for a plain block that changes the width, or after a
      divergence.
    - ``input_sweep``: float32 [P], t on [-2, 2]; ``input_grad``: float64 [2, P], d(z_1 - z_0)/dt for
      the input x = t u (u = 1 for a scalar input), row 0 at initialisation, row 1 after training;
      ``input_grad_autocorr``: float64 [2, 64], its autocorrelation at lags 0..63 (Balduzzi et al.
      2017, Fig. 1 and 2).
    - ``path_length_fraction`` (residual runs only): float64 [depth + 1], C(depth, k) / 2**depth.

    ``meta`` is a :class:`TraceMeta` (a dict given here is converted). A trace holds at least one record:
    :meth:`load` refuses one whose ``step`` array is missing or empty. A conv net of ``depth`` = 6n + 2 layers
    has ``meta.blocks`` = 3n, the length of its per-block arrays (docs/how-to/sweeps.md).
    """

    meta: TraceMeta
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.meta, dict):
            self.meta = TraceMeta.from_dict(self.meta)

    def __getitem__(self, key: str) -> np.ndarray:
        try:
            return self.arrays[key]
        except KeyError:
            raise KeyError(f"trace has no array {key!r}; it has {sorted(self.arrays)}") from None

    @property
    def run_config(self) -> Any:
        """The config that made this trace, typed (RunConfig, TransformerConfig, ... by its kind:
        :func:`simulation.config.config_from_dict`). Raises ConfigError for a config this version cannot read."""
        from simulation.config import config_from_dict

        return config_from_dict(dict(self.meta.config))

    def sizes(self) -> dict[str, int]:
        """The sizes :data:`ARRAY_AXES` names, those this trace says: ``records`` (its ``step`` array), ``steps``,
        ``init_batches``, ``grid`` and ``streams`` (its config), ``layers`` (``meta.layers``, else ``meta.blocks``,
        else the config's
        ``depth``), ``branches`` (``meta.sublayers``, else the layers), ``layers+1`` and ``depth+1`` (the config's)."""
        config, meta = self.meta.config, self.meta
        out = {key: config[key] for key in ("steps", "init_batches", "grid", "streams")
               if isinstance(config.get(key), int)}
        if meta.watch and isinstance(meta.watch.get("param_groups"), int):
            out["param_groups"] = meta.watch["param_groups"]
        if isinstance(config.get("depth"), int):
            out["depth+1"] = config["depth"] + 1
        if "step" in self.arrays:
            out["records"] = len(np.atleast_1d(self.arrays["step"]))
        layers = len(meta.layers) if meta.layers else meta.blocks if meta.blocks is not None else config.get("depth")
        if isinstance(layers, int):
            out["layers"], out["layers+1"] = layers, layers + 1
            out["branches"] = len(meta.sublayers) if meta.sublayers else layers
        return out

    def blank(self, key: str, sizes: dict[str, int] | None = None) -> np.ndarray | None:
        """Array ``key`` of :data:`ARRAY_AXES` as all NaN (float64) in this trace's :meth:`sizes` (``sizes``
        overrides them), for a trace that lacks it; None for a key not in the table or a size this trace does
        not say."""
        axes = ARRAY_AXES.get(key)
        known = {**self.sizes(), **(sizes or {})}
        if axes is None or any(isinstance(a, str) and a not in known for a in axes):
            return None
        return np.full([a if isinstance(a, int) else known[a] for a in axes], np.nan)

    def save(self, path: str | os.PathLike) -> Path:
        """Write atomically: a temporary file in the same folder, then ``os.replace``."""
        meta = self.meta.to_dict()  # schema: SCHEMA_VERSION unless the meta says otherwise
        payload = {_META_KEY: np.array(json.dumps(meta, sort_keys=True))}
        for key, value in self.arrays.items():
            if key == _META_KEY:
                raise TraceError(f"array key {_META_KEY!r} is reserved")
            payload[key] = np.asarray(value)
            if payload[key].dtype == object:
                raise TraceError(f"array {key!r} has dtype object, which would need pickle")
        with atomic_write(path, suffix=".npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, **payload)
        return Path(path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Trace":
        """Read a trace; raises :class:`TraceError` with a one-line reason on any defect. A missing ``path`` whose
        :func:`parts_dir` holds parts (a watched run not closed: running, or killed) is read as a partial trace."""
        if not os.path.lexists(path) and os.path.isdir(parts_dir(path)):
            return load_parts(path)
        path = input_file(path, "trace", TraceError)
        if not zipfile.is_zipfile(path):  # np.load would try to unpickle anything else
            raise TraceError(f"trace {path} is corrupt or truncated (not an .npz archive)")
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {key: data[key] for key in data.files}
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
            raise TraceError(f"trace {path} is corrupt or truncated ({type(exc).__name__}: {exc})") from None
        if _META_KEY not in arrays:
            raise TraceError(f"trace {path} has no metadata; it was not written by this tool")
        try:
            meta = json.loads(str(arrays.pop(_META_KEY)))
        except json.JSONDecodeError as exc:
            raise TraceError(f"trace {path} has corrupt metadata ({exc})") from None
        schema = meta.get("schema") if isinstance(meta, dict) else None
        if schema != SCHEMA_VERSION:
            raise TraceError(
                f"trace {path} has schema version {schema}, this tool reads {SCHEMA_VERSION}; "
                "delete it and train again"
            )
        if "step" not in arrays or not len(np.atleast_1d(arrays["step"])):
            raise TraceError(f"trace {path} has no records (its 'step' array is missing or empty)")
        if not isinstance(meta, dict):
            raise TraceError(f"trace {path} has corrupt metadata (not a JSON object)")
        try:
            return cls(meta=TraceMeta.from_dict(meta), arrays=arrays)
        except (TypeError, TraceError) as exc:
            raise TraceError(f"trace {path} has unreadable metadata ({exc})") from None


# -- a trace written while training runs ---------------------------------------------------------------

_PART_META = "meta.json"
MERGE_PARTS = 64  # a writer merges its last this many one-flush parts into one (a long run keeps few files)


def parts_dir(path: str | os.PathLike) -> Path:
    """The folder of the parts of a trace being written to ``path``: ``<path>.parts``."""
    return Path(f"{os.fspath(path)}.parts")


def _is_curve(key: str) -> bool:
    return ARRAY_AXES.get(key) == ("steps",)


def _read_part(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _assemble(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One set of arrays from parts in write order: per-record arrays joined along records (a record step held
    twice, by a merged part and a part it merged, kept once), curves (``*_curve``, indexed by each part's
    ``curve_step``) placed at their steps, NaN at steps no part holds."""
    records: dict[str, list[np.ndarray]] = {}
    curves: dict[str, dict[int, float]] = {}
    for part in parts:
        steps = part.get("curve_step", np.zeros(0, np.int64))
        for key, value in part.items():
            if key == "curve_step":
                continue
            if _is_curve(key):
                curves.setdefault(key, {}).update(zip(steps.tolist(), value.tolist()))
            else:
                records.setdefault(key, []).append(value)
    out: dict[str, np.ndarray] = {}
    if records.get("step"):
        step = np.concatenate(records["step"])
        _, first = np.unique(step, return_index=True)  # sorted by step, each step once
        for key, values in records.items():
            joined = np.concatenate(values)
            out[key] = joined[first] if len(joined) == len(step) else joined
    last = max((max(c) for c in curves.values() if c), default=-1)
    for key, by_step in curves.items():
        dtype = np.float64 if key == "grad_norm_curve" else np.float32
        curve = np.full(last + 1, np.nan, dtype=dtype)
        for step, value in by_step.items():
            curve[step] = value
        out[key] = curve
    return out


def load_parts(path: str | os.PathLike) -> Trace:
    """The partial trace in :func:`parts_dir` of ``path``: every record flushed so far, ``meta.watch["complete"]``
    false. Raises :class:`TraceError` (one line) when the folder has no metadata, an unreadable part, or no
    record yet."""
    folder = parts_dir(path)
    try:
        meta = json.loads((folder / _PART_META).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise TraceError(f"trace {path} is being written and its parts have no readable metadata "
                         f"({type(exc).__name__})") from None
    files = sorted(folder.glob("part-*.npz"))
    try:
        parts = [_read_part(f) for f in files]
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
        raise TraceError(f"trace {path}: part {files and files[-1].name} is corrupt ({type(exc).__name__})") from None
    arrays = _assemble(parts)
    if "step" not in arrays or not len(arrays["step"]):
        raise TraceError(f"trace {path} is being written and holds no record yet")
    watch = dict(meta.get("watch") or {}, complete=False, steps_recorded=len(arrays["step"]))
    meta["watch"] = watch
    # the steps the loop took: those the records and curves hold, or more where the writer said so since
    written = (meta.get("config") or {}).get("steps")
    steps = max(len(arrays.get("loss_curve", ())), int(arrays["step"][-1]) + 1,
                written if isinstance(written, int) and not isinstance(written, bool) else 0)
    meta["config"] = {**meta.get("config", {}), "steps": steps}
    try:
        return Trace(meta=TraceMeta.from_dict(meta), arrays=arrays)
    except (TypeError, TraceError) as exc:
        raise TraceError(f"trace {path} has unreadable metadata ({exc})") from None


class TraceWriter:
    """Writes a trace while it is recorded: each :meth:`append` is one part file, renamed into place atomically,
    so that a run killed at any moment keeps every record appended before; :meth:`close` consolidates the parts
    into ``path`` (one atomic rename) and removes them.

    ``meta``: the :class:`TraceMeta` fields as a dict (JSON). Opening removes a trace already at ``path`` and any
    parts left there by a killed run: the path now names this run. Every :data:`MERGE_PARTS` parts
    of one flush each are merged into one (written before they are removed; a reader keeps each record once)."""

    def __init__(self, path: str | os.PathLike, meta: dict[str, Any]) -> None:
        self.path = Path(path)
        self.folder = parts_dir(path)
        if self.folder.exists():
            shutil.rmtree(self.folder)
        self.path.unlink(missing_ok=True)
        self.folder.mkdir(parents=True)
        self.count = 0
        self.small: list[tuple[Path, dict]] = []  # the parts of one flush each since the last merge, with their arrays
        self.set_meta(meta)

    def set_meta(self, meta: dict[str, Any]) -> None:
        """Replace the metadata (atomically)."""
        TraceMeta.from_dict(meta)  # an unknown key fails here, not when the trace is read
        self.meta = meta
        with atomic_write(self.folder / _PART_META) as tmp:
            tmp.write_text(json.dumps(meta, sort_keys=True))

    def append(self, arrays: dict[str, np.ndarray]) -> None:
        """One part: per-record arrays with a leading axis of records (``step`` among them, possibly empty) and
        curves (``*_curve`` keys of :data:`ARRAY_AXES`) with their steps in ``curve_step``."""
        for key, value in arrays.items():
            if np.asarray(value).dtype == object:
                raise TraceError(f"array {key!r} has dtype object, which would need pickle")
        self.count += 1
        self._write_part(arrays)
        self.small.append((self.folder / f"part-{self.count:09d}.npz", arrays))
        if len(self.small) >= MERGE_PARTS:
            self._merge()

    def _write_part(self, arrays: dict[str, np.ndarray]) -> None:
        """``part-<count>.npz``, atomically; the archive is built in memory and written at once (zipfile seeks back
        over a real file once per array)."""
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        with atomic_write(self.folder / f"part-{self.count:09d}.npz") as tmp:
            tmp.write_bytes(buffer.getbuffer())

    def _merge(self) -> None:
        """The last :data:`MERGE_PARTS` one-flush parts as one (written before they are removed; assembled from the
        arrays kept since, not read back): a run keeps one file per 64 flushes, and no flush rewrites what an
        earlier merge wrote."""
        merged = _assemble([arrays for _, arrays in self.small])
        curve_steps = None
        for key in [k for k in merged if _is_curve(k)]:
            held = np.flatnonzero(~np.isnan(merged[key]))
            curve_steps = held if curve_steps is None else np.union1d(curve_steps, held)
        if curve_steps is not None:
            for key in [k for k in merged if _is_curve(k)]:
                merged[key] = merged[key][curve_steps]
            merged["curve_step"] = curve_steps.astype(np.int64)
        self.count += 1
        self._write_part(merged)
        for f, _ in self.small:
            f.unlink()
        self.small = []

    def close(self, meta: dict[str, Any] | None = None) -> Path | None:
        """Consolidate into ``path`` with ``meta`` (default: the last one set), ``watch.complete`` true; remove the
        parts. Returns the path, or None (and removes the parts) when no record was appended."""
        if meta is not None:
            self.set_meta(meta)
        try:
            trace = load_parts(self.path)
        except TraceError:
            shutil.rmtree(self.folder, ignore_errors=True)
            return None
        watch = dict(trace.meta.watch or {}, complete=True)
        trace.meta = dataclasses.replace(trace.meta, watch=watch)
        trace.save(self.path)
        shutil.rmtree(self.folder, ignore_errors=True)
        return self.path
