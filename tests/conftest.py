"""Shared fixtures: every test gets its own trace cache, so nothing leaks between tests or runs."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Point RESIDUAL_CACHE at a fresh folder for each test."""
    path = tmp_path_factory.mktemp("trace-cache")
    monkeypatch.setenv("RESIDUAL_CACHE", str(path))
    return path
