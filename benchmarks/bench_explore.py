"""The explorer's redraw time, measured in the browser, and its folder size, for the default lecture's runs.

Example::

    .venv/bin/python -m benchmarks.bench_explore                                  # writes media/explore first
    .venv/bin/python -m benchmarks.bench_explore --screenshot docs/stills/explorer.png

Builds the explorer of the default lecture (``render.py explore``: the traces come from the cache, missing runs are
trained), opens it in headless Chromium (Debian's chromium, driven by Playwright) at 1280x720, and in every view
times each step change of the largest selection: ``performance.now()`` in the page around ``setStepIndex(k)``
(which redraws synchronously) plus a forced layout, so style and layout of the new SVG and table count too.
Every record is visited in turn, ``--rounds`` times. Targets (issue 22): <= 50 ms per step change; <= 10 MB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from benchmarks.measure import Figure, Target, format_table, load

REDRAW_MS = Target("<=", 50.0)
SIZE_MB = Target("<=", 10.0)  # issue 22: under 10 MB
# The largest selection of each view in the default lecture: the deepest pair, every seed drawn.
SELECTIONS = {"flow": "view=flow&family=vanishing&depth=56&act=sigmoid&seed=0",
              "chain": "view=chain&family=vanishing&depth=56&act=sigmoid&seed=0",
              "degradation": "view=degradation&family=degradation",
              "responses": "view=responses&family=residual_response"}

SCREENSHOT = "view=flow&family=vanishing&depth=20&act=sigmoid&seed=0&step=120"  # the lecture's depth (README)

TIME_STEPS = """(rounds) => {
  const out = [];
  const n = window.explore.timeline().length;
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < n; k++) {
      const t0 = performance.now();
      window.explore.setStepIndex(k);
      document.body.getBoundingClientRect();  // style and layout of what was drawn
      out.push(performance.now() - t0);
    }
  }
  return out;
}"""


def build(folder: Path) -> None:
    """``render.py explore -o folder`` (default experiments); exits with its error on failure."""
    done = subprocess.run([sys.executable, str(ROOT / "render.py"), "explore", "-o", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode:
        sys.exit(f"render.py explore failed ({done.returncode}):\n{done.stderr[-3000:]}")


def measure(folder: Path, rounds: int, screenshot: Path | None = None) -> dict[str, Figure]:
    """{view: Figure of step-change times in ms}, and the screenshot (``SCREENSHOT``: 1280 px wide, from the top
    of the page to the end of the chart) if asked."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM, CHROMIUM_ARGS  # the browser the explorer's tests drive

    figures = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto((folder / "index.html").as_uri())
        page.wait_for_selector("html[data-ready=true]")
        for view, fragment in SELECTIONS.items():
            page.evaluate(f"location.hash = '{fragment}'")
            page.wait_for_function(f"window.explore.state.view === '{view}'")
            times = page.evaluate(TIME_STEPS, rounds)
            if times:  # (a folder of other runs may lack the selection: nothing to time)
                figures[view] = Figure(times, REDRAW_MS, "ms", [load()])
        if screenshot is not None:
            page.evaluate(f"location.hash = '{SCREENSHOT}'")
            page.wait_for_function("window.explore.state.step === 120")
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            figure = page.locator("figure").bounding_box()  # from the top of the page to the chart's end
            page.screenshot(path=str(screenshot), full_page=True,
                            clip={"x": 0, "y": 0, "width": 1280, "height": figure["y"] + figure["height"] + 8})
        browser.close()
    return figures


def rows(folder: Path | None = None, rounds: int = 5, screenshot: Path | None = None) -> list[tuple[str, Figure]]:
    """The benchmark table's rows: per view, ms per step change (every record, ``rounds`` times); folder MB."""
    from cli.explore import folder_size

    with tempfile.TemporaryDirectory(prefix="bench-explore-") as tmp:
        target = folder or Path(tmp) / "explore"
        if folder is None:
            build(target)
        figures = measure(target, rounds, screenshot)
        size = folder_size(target) / 1e6
    out = [(f"explorer step change, {view} view, ms", fig) for view, fig in figures.items()]
    out.append(("explorer folder, default lecture, MB", Figure([size], SIZE_MB, "MB", [load()])))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, help="time this explorer folder instead of building the default one")
    parser.add_argument("--rounds", type=int, default=5, help="passes over every record of each view")
    parser.add_argument("--screenshot", type=Path, help="also save the flow view, 1280 px wide, here (PNG)")
    args = parser.parse_args(argv)
    from benchmarks.yardstick import measure

    yard = measure()  # the machine index, in the same run as the figures
    print(yard, flush=True)
    table = rows(args.folder, args.rounds, args.screenshot)
    print(format_table(table, yard))
    worst = max(max(fig.samples) for name, fig in table if fig.unit == "ms")
    print(f"(slowest single step change: {worst:.1f} ms; load average {load():.1f}; {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
