"""Shared fixtures: every test gets its own trace cache, so nothing leaks between tests or runs."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Point RESIDUAL_CACHE at a fresh folder for each test."""
    path = tmp_path_factory.mktemp("trace-cache")
    monkeypatch.setenv("RESIDUAL_CACHE", str(path))
    return path


def pytest_addoption(parser):
    # Manim's frames_comparison reads these two (manim's own conftest defines them; ours must too).
    parser.addoption("--set_test", action="store_true", default=False,
                     help="Write the frame-comparison control data under tests/control_data/ instead of comparing.")
    parser.addoption("--show_diff", action="store_true", default=False,
                     help="Show a failing frame comparison side by side (needs a display).")
