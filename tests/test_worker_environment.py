"""The test workers' environment (tests/conftest.py: WORKER_ENVIRONMENT) reaches them, and torch reads it."""

import os

import pytest

from conftest import WORKER_ENVIRONMENT


@pytest.mark.skipif(not os.environ.get("PYTEST_XDIST_WORKER"), reason="set for pytest-xdist's workers only")
def test_each_worker_runs_one_torch_thread_with_the_malloc_thresholds():
    import torch

    for name, value in WORKER_ENVIRONMENT.items():
        assert os.environ.get(name), name  # a caller's own value may differ; it must be there
    if os.environ["OMP_NUM_THREADS"] == WORKER_ENVIRONMENT["OMP_NUM_THREADS"]:
        assert torch.get_num_threads() == 1
