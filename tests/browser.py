"""Headless Chromium for the browser tests (Debian's chromium driven by Playwright): the fixture and its helpers.

Test modules import what they use (``from browser import browser, open_logged, remote``); a test file is never
imported from another.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "browser", "open_logged", "remote"]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    if os.environ.get("CI"):  # CI's set-up installs both: a missing one is a failure there, not a skip
        from playwright import sync_api as playwright
        assert Path(CHROMIUM).is_file(), f"{CHROMIUM} is missing"
    else:
        playwright = pytest.importorskip("playwright.sync_api")
        if not Path(CHROMIUM).is_file():
            pytest.skip("chromium is not installed (bash bootstrap.sh setup installs it)")
    with playwright.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


FAST_MEDIA = "document.addEventListener('play', e => { e.target.playbackRate = 4; }, true);"  # an init script


def open_logged(browser, url: str, init_script: str | None = None, **page_options):
    """A new page at ``url`` with its request log and console errors: (page, requests, errors).
    ``init_script`` runs in the page before its own scripts (``FAST_MEDIA``: every video plays at 4x, so a test
    that waits for a beat to end waits a quarter as long); ``page_options`` go to ``browser.new_page``."""
    page = browser.new_page(**page_options)
    if init_script:
        page.add_init_script(init_script)
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"failed: {r.url}"))
    page.goto(url)
    return page, requests, errors


def remote(requests: list[str]) -> list[str]:
    """The requests that left the machine's files (anything but file:, data: and blob: URLs)."""
    return [url for url in requests if not url.startswith(("file:", "data:", "blob:"))]
