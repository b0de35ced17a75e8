"""Real data that ships inside a package (sklearn's digits) and a seeded scalar task, as tensors.

Example::

    python -c "from simulation.data import load_dataset; print(load_dataset('digits', seed=0).x_train.shape)"
"""

from __future__ import annotations

import gzip
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .config import DATASETS  # the allowed names are defined once, in simulation.config

__all__ = ["Dataset", "load_dataset", "load_digits", "DATASETS", "BANDS_RANGE"]

BANDS_RANGE = (-2.0, 2.0)  # the scalar input of "bands" lies in this interval (Balduzzi et al. 2017, Fig. 1)
BANDS_COUNT = 8  # alternating class bands of equal width across BANDS_RANGE


@dataclass(frozen=True)
class Dataset:
    """Train/test split. ``x_*``: float32 [N, features], standardised with train statistics;
    ``y_*``: int64 [N] class labels."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits (Alpaydin & Kaynak, UCI): pixels float64 [1797, 64] (0..16) and labels int [1797],
    read from the file scikit-learn ships (``sklearn/datasets/data/digits.csv.gz``) as
    ``sklearn.datasets.load_digits`` reads it (``np.loadtxt``, comma-separated, the label last), without importing
    scikit-learn: its import (scipy.stats ...) cost every trainer process ~1 CPU-s. Falls back to
    ``load_digits`` itself where the file is elsewhere; ModuleNotFoundError without scikit-learn."""
    spec = importlib.util.find_spec("sklearn")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the digits data ships with scikit-learn: pip install scikit-learn")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    if not path.is_file():
        from sklearn.datasets import load_digits as sklearn_digits

        return sklearn_digits(return_X_y=True)
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        data = np.loadtxt(lines, delimiter=",")
    return data[:, :-1], data[:, -1].astype(int, copy=False)


def load_dataset(name: str, seed: int, test_fraction: float = 0.2) -> Dataset:
    """Load ``name`` and split it with a permutation seeded by ``seed``.

    - ``"digits"``: 1797 8x8 grey images, 64 features, 10 classes (Alpaydin & Kaynak, UCI, shipped in
      scikit-learn), standardised with the training split's statistics.
    - ``"bands"``: 1797 scalars x ~ U[-2, 2] (1 feature, not standardised, so that an input sweep over
      [-2, 2] covers the data), class = index of the band of width 0.5 containing x, mod 2.
      A seeded synthetic task for networks with a scalar input (Balduzzi et al. 2017).

    Raises ValueError for an unknown name.
    """
    if name == "digits":
        data, target = load_digits()
        x = data.astype(np.float32)
        y = target.astype(np.int64)
    elif name == "bands":
        low, high = BANDS_RANGE
        x = np.random.default_rng([seed, 1]).uniform(low, high, size=(1797, 1)).astype(np.float32)
        band = np.floor((x[:, 0] - low) / (high - low) * BANDS_COUNT).clip(0, BANDS_COUNT - 1)
        y = (band % 2).astype(np.int64)
    else:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(DATASETS)}")
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    if name == "digits":
        mean, std = x[train].mean(0), x[train].std(0) + 1e-6  # some border pixels are always 0
        x = (x - mean) / std
    return Dataset(
        name=name,
        x_train=torch.from_numpy(x[train]),
        y_train=torch.from_numpy(y[train]),
        x_test=torch.from_numpy(x[test]),
        y_test=torch.from_numpy(y[test]),
        n_classes=int(y.max()) + 1,
    )
