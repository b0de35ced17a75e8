"""Trace files: the numbers one training run recorded, as ``.npz`` plus JSON metadata (torch-free).

Example::

    python -c "from simulation.trace import Trace; print(Trace.load('.cache/traces/<digest>.npz').meta)"

A trace is never unpickled: arrays are read with ``np.load(..., allow_pickle=False)`` and the
metadata is a JSON string stored as a unicode array under the key ``__meta__``.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Trace", "TraceError", "SCHEMA_VERSION", "atomic_write"]

SCHEMA_VERSION = 1
_META_KEY = "__meta__"


class TraceError(ValueError):
    """A trace file is missing, corrupt, truncated or of another schema version."""


@dataclass
class Trace:
    """One run's recorded statistics.

    ``arrays`` maps flat keys to numpy arrays. Keys written by :mod:`simulation.train`:

    - ``step``: int64 [T], the optimiser step of each record (step 0 = before any update).
    - ``loss``, ``error``: float32 [T], training loss (cross-entropy, nats) and error (fraction
      misclassified) on the recorded batch; ``test_error``: float32 [T] on the held-out split.
    - ``loss_curve``: float32 [steps], training loss of every step.
    - ``act_mean``, ``act_std``, ``act_norm``: float32 [T, depth], statistics of each block's output
      h_l (``act_norm``: mean over examples of the L2 norm ||h_l||).
    - ``input_norm``: float32 [T, depth], mean ||x|| of each block's input; ``branch_norm``,
      ``branch_std``: of the residual branch F(x) (for plain nets F(x) is the block output).
    - ``grad_norm``: float64 [T, depth], L2 norm of dL/dW over all weight matrices of each block
      (float64 so that vanishing gradients below 1e-38 do not flush to 0).
    - ``out_grad_norm``: float64 [T, depth], L2 norm of dL/dh_l over the batch.
    - ``nonfinite``: int64 [T, depth], count of non-finite values seen in each block at each record.

    ``meta`` holds ``schema``, ``config`` (the full RunConfig as a dict), ``digest``, ``seed``,
    ``versions`` (torch, numpy, python) and free-form facts such as ``diverged``.
    """

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def __getitem__(self, key: str) -> np.ndarray:
        try:
            return self.arrays[key]
        except KeyError:
            raise KeyError(f"trace has no array {key!r}; it has {sorted(self.arrays)}") from None

    @property
    def config(self) -> dict[str, Any]:
        return self.meta["config"]

    def save(self, path: str | os.PathLike) -> Path:
        """Write atomically: a temporary file in the same folder, then ``os.replace``."""
        meta = {"schema": SCHEMA_VERSION, **self.meta}
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
        """Read a trace; raises :class:`TraceError` with a one-line reason on any defect."""
        path = Path(path)
        if not path.is_file():
            raise TraceError(f"trace {path} does not exist")
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
        schema = meta.get("schema")
        if schema != SCHEMA_VERSION:
            raise TraceError(
                f"trace {path} has schema version {schema}, this tool reads {SCHEMA_VERSION}; "
                "delete it and train again"
            )
        return cls(meta=meta, arrays=arrays)


class atomic_write:
    """Context manager yielding a temporary path next to ``path``; renamed onto it on success.

    On an exception (Ctrl-C included) the temporary file is removed and ``path`` is untouched.
    """

    def __init__(self, path: str | os.PathLike, suffix: str = "") -> None:
        self.path = Path(path)
        self.suffix = suffix

    def __enter__(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp" + self.suffix,
                                    dir=self.path.parent)
        os.close(fd)
        self.tmp = Path(name)
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)
