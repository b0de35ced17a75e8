"""Real data that ships inside a package (sklearn's digits), split and standardised, as tensors.

Example::

    python -c "from simulation.data import load_dataset; print(load_dataset('digits', seed=0).x_train.shape)"
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["Dataset", "load_dataset"]


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


def load_dataset(name: str, seed: int, test_fraction: float = 0.2) -> Dataset:
    """Load ``name`` ("digits": 1797 8x8 grey images, 64 features, 10 classes; Alpaydin & Kaynak,
    UCI, shipped in scikit-learn) and split it with a permutation seeded by ``seed``."""
    if name != "digits":
        raise ValueError(f"unknown dataset {name!r}; available: digits")
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = bunch.data.astype(np.float32)
    y = bunch.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
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
