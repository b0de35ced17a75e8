"""The explorer (cli/explore.py, web/explore/) driven in headless Chromium, on the small committed traces of tests/data.

Each browser check is a function returning the problems it found; a test asserts none on the page as written, and
its tamper twin alters the page or its data and asserts the same check reports a problem. The default run drives
the page in the browser twice (the step slider against the trace, and its twin; the views of runs with two
activations against theirs); the other browser checks, each with its twin, are slow (CI runs them).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cli.explore import VIEWS, ui_strings, jsonable, export_data, write_explorer
from simulation.config import UserModelConfig
from simulation.experiments import vanishing_run
from simulation.runkeys import RunKey, key_texts
from simulation.trace import Trace

from browser import browser, open_logged, remote  # noqa: F401 (browser: a fixture)
from data.make_traces import tiny_trace_files_with_seeds, user_like_trace_files
from support import ROOT

EXPERIMENTS = ("vanishing", "chain_rule", "degradation", "residual_response", "layernorm")
PHONE = {"viewport": {"width": 390, "height": 844}}
DESKTOP = {"viewport": {"width": 1280, "height": 720}}
pytestmark = pytest.mark.xdist_group("explore")  # one worker builds the pages and starts the browser


def committed_traces(experiments=EXPERIMENTS) -> dict[str, dict[RunKey, Trace]]:
    """{experiment: {RunKey: Trace}} of tests/data's tiny traces, every committed seed."""
    out = {}
    for experiment in experiments:
        files = tiny_trace_files_with_seeds(experiment)
        assert files, f"tests/data lacks the tiny traces of {experiment}"
        out[experiment] = {key: Trace.load(path) for key, path in files.items()}
    return out


def shown_as(runs: dict[RunKey, Trace]) -> dict[str, Trace]:
    """``{run as the page names it: Trace}`` (the first seed's by their bare names; simulation.runkeys.key_texts)."""
    texts = key_texts(runs)
    return {texts[key]: trace for key, trace in runs.items()}


@pytest.fixture(scope="module")
def traces():
    return committed_traces()


@pytest.fixture(scope="module")
def explorer(tmp_path_factory, traces) -> Path:
    target = tmp_path_factory.mktemp("explore") / "explore"
    write_explorer(traces, target, page="../480p15/{lang}/page/lecture.html")
    return target


@pytest.fixture(scope="module")
def untrained(tmp_path_factory) -> Path:
    """The vanishing runs without the residual sigmoid net of depth 8: that combination was not trained."""
    runs = committed_traces(("vanishing",))
    del runs["vanishing"][RunKey(vanishing_run("residual", "sigmoid", 8), 0)]
    target = tmp_path_factory.mktemp("untrained") / "explore"
    write_explorer(runs, target)
    return target


TANH_SCALE = 0.5


def with_tanh_twins(runs: dict[RunKey, Trace]) -> dict[RunKey, Trace]:
    """The vanishing runs and a tanh twin of each: its config says tanh (named ``plain_tanh_d8`` ...) and every
    recorded float but ``input_norm`` is ``TANH_SCALE`` times the sigmoid run's, so ||F(x)|| / ||x||, the error
    curve and ||dL/dh_l|| all differ from its twin's: a view that shows the wrong activation's run shows wrong numbers."""
    out = dict(runs)
    for key, trace in runs.items():
        config = dict(trace.meta.config, activation="tanh")
        arrays = {name: a * TANH_SCALE if a.dtype.kind == "f" and name != "input_norm" else a
                  for name, a in trace.arrays.items()}
        twin = RunKey(vanishing_run(config["arch"], "tanh", config["depth"]), key.seed)
        out[twin] = Trace(meta=dataclasses.replace(trace.meta, config=config), arrays=arrays)
    return out


@pytest.fixture(scope="module")
def two_activations(tmp_path_factory) -> tuple[Path, dict[str, Trace]]:
    """The explorer of the vanishing runs, sigmoid and (made here) tanh; and its runs by the names the page shows."""
    runs = with_tanh_twins(committed_traces(("vanishing",))["vanishing"])
    target = tmp_path_factory.mktemp("two-activations") / "explore"
    write_explorer({"vanishing": runs}, target)
    return target, shown_as(runs)


def copy(folder: Path, tmp_path: Path) -> Path:
    shutil.copytree(folder, tmp_path / "explore")
    return tmp_path / "explore"


def read_data(folder: Path) -> dict:
    text = (folder / "data.js").read_text(encoding="utf-8")
    return json.loads(text.removeprefix("window.EXPLORE_DATA = ").rstrip().removesuffix(";"))


def write_data(folder: Path, data: dict) -> None:
    (folder / "data.js").write_text("window.EXPLORE_DATA = " + json.dumps(data, ensure_ascii=False) + ";\n",
                                    encoding="utf-8")


def edit(folder: Path, name: str, old: str, new: str) -> None:
    text = (folder / name).read_text(encoding="utf-8")
    assert old in text, f"{old!r} is not in {name}"
    (folder / name).write_text(text.replace(old, new, 1), encoding="utf-8")


def open_page(browser, folder: Path, fragment: str = "", **options):
    page, requests, errors = open_logged(browser, (folder / "index.html").as_uri() + fragment, **options)
    page.wait_for_selector("html[data-ready=true]", timeout=10_000)
    return page, requests, errors


def state(page) -> dict:
    return page.evaluate("() => Object.assign({}, window.explore.state)")


# -- 1. nothing leaves file:// --------------------------------------------------------------------

def offline_problems(browser, folder: Path) -> list[str]:
    """Every view in both languages and themes: requests that left file://, and console errors."""
    page, requests, errors = open_page(browser, folder)
    for view in VIEWS:
        for lang, theme in (("en", "dark"), ("zh", "light")):
            page.evaluate(f"location.hash = 'view={view}&lang={lang}&theme={theme}'")
            page.wait_for_function(f"window.explore.state.view === '{view}' && window.explore.state.lang === '{lang}'")
            for control in ("#play", "#pulse"):  # play a few records, send the pulse: no error, nothing fetched
                if page.is_visible(control):
                    page.click(control)
            page.wait_for_timeout(150)
    page.wait_for_timeout(200)
    page.close()
    return [f"request: {url}" for url in remote(requests)] + [f"console: {e}" for e in errors] + \
        ([] if requests else ["no request logged at all"])


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_explorer_opens_offline(browser, explorer):
    assert offline_problems(browser, explorer) == []


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_offline_check_catches_a_page_that_reaches_out(browser, explorer, tmp_path):
    """A tracking pixel loaded by the script (it does not hold up the page's load, as a stylesheet would)."""
    folder = copy(explorer, tmp_path)
    edit(folder, "explore.js", "  readHash();\n", "  new Image().src = 'http://127.0.0.1:9/pixel.png';\n  readHash();\n")
    assert any("127.0.0.1:9" in p for p in offline_problems(browser, folder))


# -- 2. the slider moves the drawn values to the trace's numbers ----------------------------------

def flow_problems(page, traces: dict[str, Trace]) -> list[str]:
    """The drawn blocks (SVG) and the numbers table of the flow view against ``out_grad_norm`` of the runs
    shown, at the step shown: exactly equal (the page draws the float64 it was given)."""
    s = state(page)
    problems = []
    for arch in ("plain", "residual"):
        trace = traces[vanishing_run(arch, s["act"], s["depth"])]
        k = list(trace["step"]).index(s["step"])
        expected = np.asarray(trace["out_grad_norm"], np.float64)[k]
        for what, selector, read in (("svg", f"#chart rect.blk.{arch}", "e => [+e.dataset.block, e.dataset.value]"),
                                     ("table", f"#numbers td[data-arch={arch}]", "e => [+e.dataset.block, e.textContent]")):
            drawn = dict(page.eval_on_selector_all(selector, f"els => els.map({read})"))
            if sorted(drawn) != list(range(len(expected))):
                problems.append(f"{arch} {what}: blocks {sorted(drawn)} drawn, {len(expected)} recorded")
            problems += [f"{arch} {what} block {l} at step {s['step']}: {drawn[l]} != {expected[l]!r}"
                         for l in drawn if l < len(expected) and float(drawn[l]) != expected[l]]
    return problems


def test_the_step_slider_moves_the_drawn_norms_to_the_trace(browser, explorer, traces):
    page, _, errors = open_page(browser, explorer, "#view=flow&depth=8&act=sigmoid")
    records = list(shown_as(traces["vanishing"])[vanishing_run("plain", "sigmoid", 8)]["step"])
    page.focus("#step")
    seen = []
    for k in range(len(records)):
        assert state(page)["step"] == records[k]
        assert flow_problems(page, shown_as(traces["vanishing"])) == []
        seen.append(page.inner_text("#step-out"))
        page.keyboard.press("ArrowRight")  # the range input's own key: one record on
    assert len(set(seen)) == len(records) >= 3 and errors == []
    page.close()


def test_the_slider_check_catches_a_changed_number(browser, explorer, traces, tmp_path):
    folder = copy(explorer, tmp_path)
    data = read_data(folder)
    family = next(f for f in data["views"]["flow"]["families"] if f["id"] == "vanishing")
    run = next(r for r in family["runs"] if r["name"] == vanishing_run("plain", "sigmoid", 8))
    run["out_grad_norm"][1][2] *= 1 + 1e-12  # one block, one record, the last bits of a double
    write_data(folder, data)
    page, _, _ = open_page(browser, folder, "#view=flow&depth=8&act=sigmoid&step=10")
    problems = flow_problems(page, shown_as(traces["vanishing"]))
    page.close()
    assert len(problems) == 2 and all("block 2 at step 10" in p for p in problems)


def table_values(page, selector: str) -> dict[tuple, float]:
    rows = page.eval_on_selector_all(selector, "els => els.map(e => [e.dataset.run || e.dataset.arch || '', "
                                               "+(e.dataset.block || e.dataset.layer || 0), e.dataset.kind || '', e.textContent])")
    return {(run, l, kind): float(value) for run, l, kind, value in rows}


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_every_view_shows_the_traces_numbers(browser, explorer, traces):
    """Chain rule, degradation, responses and Post-LN vs Pre-LN against computations made here from the .npz."""
    page, _, errors = open_page(browser, explorer, "#view=chain&family=chain_rule&step=10")
    for arch in ("plain", "residual"):
        g = np.asarray(shown_as(traces["chain_rule"])[arch]["out_grad_norm"][1], np.float64)  # record 1 = step 10
        shown = table_values(page, f"#numbers td[data-arch={arch}]")
        assert [shown[(arch, l, "product")] for l in range(len(g))] == list(g / g[-1])
        assert [shown[(arch, l, "factor")] for l in range(len(g) - 1)] == pytest.approx(list(g[:-1] / g[1:]), rel=1e-12)
    bound = table_values(page, "#numbers td[data-kind=bound]")
    depth = len(bound)
    assert [bound[("", l, "bound")] for l in range(depth)] == [0.25 ** (depth - 1 - l) for l in range(depth)]
    page.hover("#chart rect.hit[data-block='1']")  # hover a block: its factor and running product
    readout = page.eval_on_selector_all("#readout .residual .v", "els => els.map(e => +e.dataset.value)")
    g = np.asarray(shown_as(traces["chain_rule"])["residual"]["out_grad_norm"][1], np.float64)
    assert readout[1] == g[1] / g[-1] and readout[0] == pytest.approx(g[1] / g[2], rel=1e-12)

    page.evaluate("location.hash = 'view=degradation&family=degradation&step=17'")
    page.wait_for_function("window.explore.state.view === 'degradation'")
    shown = table_values(page, "#numbers td[data-run]")
    assert len(shown) == len(traces["degradation"])
    for name, trace in shown_as(traces["degradation"]).items():
        curve = np.asarray(trace["error_curve"], np.float64)
        window = max(1, round(len(curve) * 0.1))
        assert shown[(name, 0, "")] == pytest.approx(curve[17 - window + 1:18].mean(), rel=1e-12)

    last = int(shown_as(traces["residual_response"])["residual"]["step"][-1])
    page.evaluate(f"location.hash = 'view=responses&family=residual_response&step={last}'")
    page.wait_for_function("window.explore.state.view === 'responses'")
    shown = table_values(page, "#numbers td[data-kind=ratio]")
    for name, trace in shown_as(traces["residual_response"]).items():
        k = list(trace["step"]).index(last)
        ratio = np.asarray(trace["branch_norm"][k], np.float64) / np.asarray(trace["input_norm"][k], np.float64)
        assert [shown[(name, l, "ratio")] for l in range(len(ratio))] == list(ratio)

    page.evaluate("location.hash = 'view=layernorm'")
    page.wait_for_function("window.explore.state.view === 'layernorm'")
    shown = table_values(page, "#numbers td[data-run]")
    for name, trace in shown_as(traces["layernorm"]).items():
        if trace.run_config.warmup_steps == 0:  # the runs drawn: the init is the same with warm-up
            per_layer = np.asarray(trace["init_ffn_grad_norm"], np.float64).sum(0) / trace["init_ffn_grad_norm"].shape[0]
            assert [shown[(name, l, "")] for l in range(len(per_layer))] == pytest.approx(list(per_layer), rel=1e-12)
    assert errors == []
    page.close()


# -- 3. an untrained combination is said as such ---------------------------------------------------

def untrained_problems(page, arch: str, depth: int) -> list[str]:
    """The flow view at a combination without an ``arch`` run: it must say so and draw none of its blocks."""
    problems = []
    status = page.inner_text("#status")
    if "not trained in these runs" not in status or f"{arch}, {depth} blocks," not in status:  # "8 blocks", not "8 block"
        problems.append(f"status does not say {arch} at depth {depth} was not trained: {status!r}")
    drawn = page.locator(f"#chart rect.blk.{arch}").count()
    if drawn:
        problems.append(f"{drawn} {arch} blocks drawn for a net that was not trained")
    if not page.locator(f"#chart text.untrained[data-arch={arch}]").count():
        problems.append(f"no 'not trained' note in the {arch} row")
    return problems


def blown_up(runs: dict[RunKey, Trace]) -> dict[RunKey, Trace]:
    """``runs`` with the residual sigmoid net of depth 8's loss curve growing 20 decades (finite: it did not train)."""
    key = RunKey(vanishing_run("residual", "sigmoid", 8), 0)
    trace = runs[key]
    curve = trace.arrays["loss_curve"]
    grown = dataclasses.replace(trace, arrays={**trace.arrays, "loss_curve": (curve[0] * np.logspace(
        0, 20, len(curve))).astype(curve.dtype)})
    return {**runs, key: grown}


def test_a_run_whose_loss_blew_up_is_flagged_with_its_losses(tmp_path):
    """Only that run carries [initial loss, mean of its last 10 %]; in the page its note is in the status line."""
    runs = committed_traces(("vanishing",))["vanishing"]
    data = export_data({"vanishing": blown_up(runs)})
    (family,) = [f for f in data["views"]["flow"]["families"] if f["id"] == "vanishing"]
    flagged = {r["name"]: r["blew_up"] for r in family["runs"] if "blew_up" in r}
    curve = np.asarray(blown_up(runs)[RunKey(vanishing_run("residual", "sigmoid", 8), 0)]["loss_curve"], np.float64)
    tail = curve[-max(1, round(len(curve) * 0.1)):].mean()
    assert flagged == {vanishing_run("residual", "sigmoid", 8): pytest.approx([curve[0], tail], rel=1e-12)}
    clean = export_data({"vanishing": runs})
    assert not any("blew_up" in r for f in clean["views"]["flow"]["families"] for r in f["runs"])


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_page_says_which_run_did_not_train(browser, tmp_path):
    write_explorer({"vanishing": blown_up(committed_traces(("vanishing",))["vanishing"])}, tmp_path / "explore")
    page, _, errors = open_page(browser, tmp_path / "explore", "#view=flow&depth=8&act=sigmoid")
    status = page.inner_text("#status")
    assert "it did not train" in status and status.count("did not train") == 1 and "residual" in status.lower()
    page.focus("#step")
    page.keyboard.press("ArrowRight")  # a step on: the page redraws only what moves, and the note stays
    assert "it did not train" in page.inner_text("#status")
    page.evaluate("location.hash = 'view=flow&depth=4&act=sigmoid'")
    page.wait_for_function("window.explore.state.depth === 4")
    assert "did not train" not in page.inner_text("#status") and errors == []
    page.close()


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_an_untrained_combination_is_reported(browser, untrained):
    page, _, errors = open_page(browser, untrained, "#view=flow&act=sigmoid&depth=4")
    page.select_option("#depth", "8")
    assert untrained_problems(page, "residual", 8) == []
    assert page.locator("#chart rect.blk.plain").count() == 8  # the plain net of that depth was trained
    page.evaluate("location.hash = 'view=flow&depth=20&act=sigmoid'")  # a depth no run has: kept and reported
    page.wait_for_function("window.explore.state.depth === 20")
    assert "20" in page.inner_text("#depth option:checked") and "not trained" in page.inner_text("#status")
    assert page.locator("#chart rect.blk").count() == 0
    assert errors == []
    page.close()


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_untrained_check_catches_a_page_that_fills_the_gap(browser, untrained, tmp_path):
    """A page that draws another run (the depth-4 residual net) where depth 8 was not trained fails the check."""
    folder = copy(untrained, tmp_path)
    data = read_data(folder)
    family = data["views"]["flow"]["families"][0]
    d4 = next(g for g in family["groups"] if g["depth"] == 4)
    d8 = next(g for g in family["groups"] if g["depth"] == 8)
    d8["runs"]["residual"] = d4["runs"]["residual"]
    write_data(folder, data)
    page, _, _ = open_page(browser, folder, "#view=flow&act=sigmoid&depth=8")
    assert len(untrained_problems(page, "residual", 8)) == 3
    page.close()


# -- 4. both languages and both themes -----------------------------------------------------------

def look_problems(page, lang: str, theme: str) -> list[str]:
    """Every control's words in ``lang`` (the explorer's table), the view's title and caption from the scene's
    string table, and the theme's background and run colours (scenes/kit/theme.py)."""
    from cli.explore import CAPTIONS, scene_strings
    from scenes.kit.theme import THEMES

    problems = []
    if not page.evaluate("document.documentElement.lang").startswith(lang):
        problems.append(f"html lang is {page.evaluate('document.documentElement.lang')}")
    for key, text in page.eval_on_selector_all("[data-ui]", "els => els.map(e => [e.dataset.ui, e.textContent])"):
        if text != ui_strings(lang)[key]:
            problems.append(f"{key}: {text!r} is not the {lang} string {ui_strings(lang)[key]!r}")
    tables, view = scene_strings(), state(page)["view"]
    title, *caption = [tables[table][key][lang] for table, key in CAPTIONS[view]]
    if page.inner_text("#view-title") != title:
        problems.append(f"title {page.inner_text('#view-title')!r} is not the scene's {title!r}")
    if page.eval_on_selector_all("#caption p", "els => els.map(e => e.textContent)") != caption:
        problems.append("the caption is not the scene's")
    colors = THEMES[theme]
    rgb = lambda c: "rgb({}, {}, {})".format(*(round(v * 255) for v in c.to_rgb()))
    body = page.evaluate("getComputedStyle(document.body).backgroundColor")
    if body != rgb(colors["background"]):
        problems.append(f"background {body} is not the {theme} theme's {rgb(colors['background'])}")
    # the words on the chart write powers of ten as the scenes do (10⁻⁹, 2.3×10⁻⁸), never the programmer's 1e-9
    words = page.eval_on_selector_all("#chart text", "els => els.map(e => e.textContent)")
    problems += [f"chart text {w!r} in e-notation" for w in words if re.search(r"\d[eE][-+]?\d", w)]
    for arch in ("plain", "residual"):
        stroke = page.evaluate(f"getComputedStyle(document.querySelector('#chart rect.blk.{arch}')).stroke")
        if stroke != rgb(colors[arch]):
            problems.append(f"{arch} blocks drawn in {stroke}, the {theme} theme's {arch} is {rgb(colors[arch])}")
    return problems


@pytest.mark.parametrize("lang,theme", [("en", "dark"), ("zh", "light")])  # each language, each theme once
@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_both_languages_and_themes_render(browser, explorer, lang, theme):
    page, _, errors = open_page(browser, explorer, f"#view=flow&lang={lang}&theme={theme}")
    assert look_problems(page, lang, theme) == [] and errors == []
    page.close()


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_language_and_theme_check_catches_a_wrong_table_and_colour(browser, explorer, tmp_path):
    folder = copy(explorer, tmp_path)
    data = read_data(folder)
    data["strings"]["zh"]["ui"]["step"] = data["strings"]["en"]["ui"]["step"]  # one control left in English
    write_data(folder, data)
    edit(folder, "explore.css", "#chart .blk.plain { stroke: var(--plain); }", "#chart .blk.plain { stroke: #00ff00; }")
    edit(folder, "explore.js", "const scaleLo = g.scale ? pow10(g.scale[0]) : ''",
         "const scaleLo = g.scale ? `1e${g.scale[0]}` : ''")  # the colour scale's end as the page wrote it before
    page, _, _ = open_page(browser, folder, "#view=flow&lang=zh&theme=light")
    problems = look_problems(page, "zh", "light")
    page.close()
    assert any(p.startswith("step:") for p in problems) and any(p.startswith("plain blocks") for p in problems)
    assert any("e-notation" in p for p in problems), problems


# -- 5. a 390 px phone, and 1280x720, without horizontal scroll -----------------------------------

def overflow_problems(browser, folder: Path, options: dict) -> list[str]:
    page, _, _ = open_page(browser, folder, **options)
    problems = []
    for view in VIEWS:
        for lang in ("en", "zh"):
            page.evaluate(f"location.hash = 'view={view}&lang={lang}'")
            page.wait_for_function(f"window.explore.state.view === '{view}' && window.explore.state.lang === '{lang}'")
            wide, seen = page.evaluate("[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]")
            if wide > seen:
                problems.append(f"{view} {lang}: {wide} px wide in a {seen} px window")
    page.close()
    return problems


@pytest.mark.parametrize("options", [PHONE, DESKTOP], ids=["phone-390", "1280x720"])
@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_no_horizontal_scroll(browser, explorer, options):
    assert overflow_problems(browser, explorer, options) == []


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_scroll_check_catches_a_wide_element(browser, explorer, tmp_path):
    folder = copy(explorer, tmp_path)
    edit(folder, "explore.css", "#caption p { margin: 0.15rem 0; }", "#caption p { margin: 0.15rem 0; width: 520px; }")
    assert len(overflow_problems(browser, folder, PHONE)) == 2 * len(VIEWS)


# -- 6. keyboard only ------------------------------------------------------------------------------

VISIBLE_CONTROLS = """() => Array.from(document.querySelectorAll('a[href], button, input, select, [tabindex]'))
  .filter(e => e.getClientRects().length > 0 && !e.closest('[hidden]')).map(e => e.id)"""


def keyboard_problems(page) -> list[str]:
    """From the top of the page, Tab (and Enter on a view's tab) alone must reach every visible control of
    every view; the arrow keys must move the step from a control that does not take them itself."""
    problems = []
    for view in VIEWS:
        page.evaluate("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)")
        for _ in range(60):  # Tab to the view's tab, Enter opens it
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.id") == f"tab-{view}":
                break
        else:
            problems.append(f"Tab never reached the {view} tab")
            continue
        page.keyboard.press("Enter")
        if state(page)["view"] != view:
            problems.append(f"Enter on the {view} tab did not open it")
        controls = set(page.evaluate(VISIBLE_CONTROLS))
        reached = set()
        for _ in range(len(controls) + 10):
            page.keyboard.press("Tab")
            reached.add(page.evaluate("document.activeElement.id"))
        problems += [f"{view}: Tab never reaches #{c}" for c in sorted(controls - reached)]
    page.evaluate("location.hash = 'view=flow&depth=8&act=sigmoid&step=0'")
    page.wait_for_function("window.explore.state.view === 'flow' && window.explore.state.step === 0")
    page.focus("#play")
    page.keyboard.press("ArrowRight")
    if state(page)["step"] != 10:
        problems.append(f"ArrowRight on a button moved the step to {state(page)['step']}, not 10")
    page.keyboard.press("End")
    page.keyboard.press("ArrowLeft")
    if state(page)["step"] != 10:
        problems.append(f"End, ArrowLeft left the step at {state(page)['step']}")
    return problems


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_keyboard_alone_reaches_every_control(browser, explorer):
    page, _, errors = open_page(browser, explorer)
    assert keyboard_problems(page) == [] and errors == []
    page.close()


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_keyboard_check_catches_a_control_out_of_reach(browser, explorer, tmp_path):
    folder = copy(explorer, tmp_path)
    edit(folder, "index.html", '<select id="seed">', '<select id="seed" tabindex="-1">')
    page, _, _ = open_page(browser, folder)
    problems = keyboard_problems(page)
    page.close()
    assert problems == ["flow: Tab never reaches #seed", "chain: Tab never reaches #seed", "map: Tab never reaches #seed"]


# -- 7. runs of two activations: every view shows the selected one's, each label names its net ------

def activation_problems(page, runs: dict[str, Trace], act: str) -> list[str]:
    """The responses and degradation views of the vanishing runs at activation ``act``: the activation selector
    shown; the table's rows exactly those of the ``act`` runs (every depth in the degradation view), with the
    trace's numbers; the bars and curves theirs alone; each curve's end label naming its net, no two alike."""
    problems = []
    ours = {name: trace for name, trace in runs.items() if trace.run_config.activation == act}

    page.evaluate(f"location.hash = 'view=responses&family=vanishing&depth=8&act={act}'")
    page.wait_for_function(f"window.explore.state.view === 'responses' && window.explore.state.act === '{act}'")
    if not page.is_visible("#act"):
        problems.append("responses: the activation selector is hidden")
    step = state(page)["step"]
    expected = {}
    for name, trace in ours.items():
        if trace.run_config.depth == 8:
            k = list(trace["step"]).index(step)
            ratio = np.asarray(trace["branch_norm"][k], np.float64) / np.asarray(trace["input_norm"][k], np.float64)
            expected.update({(name, l, "ratio"): v for l, v in enumerate(ratio)})
    shown = table_values(page, "#numbers td[data-kind=ratio]")
    problems += [f"responses {act}: row {key} shown, not a run of {act} at depth 8" for key in sorted(set(shown) - set(expected))]
    problems += [f"responses {act}: row {key} missing" for key in sorted(set(expected) - set(shown))]
    problems += [f"responses {act}: {key} = {shown[key]!r}, the trace's {expected[key]!r}"
                 for key in sorted(set(shown) & set(expected)) if shown[key] != expected[key]]
    bars = page.eval_on_selector_all("#chart rect.bar", "els => els.map(e => [e.dataset.series, +e.dataset.index, +e.dataset.value])")
    for arch, l, value in bars:
        if value != expected.get((vanishing_run(arch, act, 8), l, "ratio")):
            problems.append(f"responses {act}: the {arch} bar of block {l} is {value!r}, not the {act} run's")

    page.evaluate(f"location.hash = 'view=degradation&family=vanishing&act={act}'")
    page.wait_for_function(f"window.explore.state.view === 'degradation' && window.explore.state.act === '{act}'")
    if not page.is_visible("#act"):
        problems.append("degradation: the activation selector is hidden")
    step = state(page)["step"]
    shown = table_values(page, "#numbers td[data-run]")
    if {run for run, _, _ in shown} != set(ours):
        problems.append(f"degradation {act}: rows of {sorted(run for run, _, _ in shown)}, the {act} runs are {sorted(ours)}")
    for name in set(ours) & {run for run, _, _ in shown}:
        curve = np.asarray(ours[name]["error_curve"], np.float64)
        window = max(1, round(len(curve) * 0.1))
        if shown[(name, 0, "")] != pytest.approx(curve[step - window + 1:step + 1].mean(), rel=1e-12):
            problems.append(f"degradation {act}: {name} shows {shown[(name, 0, '')]!r}")
    curves = set(page.eval_on_selector_all("#chart path.curve", "els => els.map(e => e.dataset.run)"))
    if curves != set(ours):
        problems.append(f"degradation {act}: curves of {sorted(curves)}")
    labels = page.eval_on_selector_all("#chart text[data-run]", "els => els.map(e => [e.dataset.run, e.textContent])")
    for run, label in labels:
        arch = runs[run].run_config.arch
        other = {"plain": "residual", "residual": "plain"}[arch]
        if arch not in label or other in label:
            problems.append(f"degradation {act}: the label {label!r} of {run} does not name its net, {arch}")
    if len({label for _, label in labels}) != len(labels):
        problems.append(f"degradation {act}: labels alike: {sorted(label for _, label in labels)}")
    return problems


def test_each_view_shows_the_selected_activations_runs(browser, two_activations):
    folder, runs = two_activations
    page, _, errors = open_page(browser, folder)
    assert activation_problems(page, runs, "sigmoid") == [] and activation_problems(page, runs, "tanh") == []
    assert errors == []
    page.close()


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_activation_check_catches_mixed_runs_and_nameless_labels(browser, two_activations, tmp_path):
    """The page as it was: the responses and degradation views took every activation's runs, and a curve's end
    label said its depth and error but not its net."""
    folder, runs = two_activations
    folder = copy(folder, tmp_path)
    edit(folder, "explore.js", "const runs = ofAct(fam.runs).filter(", "const runs = fam.runs.filter(")
    edit(folder, "explore.js", "const ofActivation = ofAct(fam.runs);", "const ofActivation = fam.runs;")
    edit(folder, "explore.js", "ui('curve_label', {net: archName(r.arch), curve})", "curve")
    page, _, _ = open_page(browser, folder)
    problems = activation_problems(page, runs, "tanh")
    page.close()
    assert any(p.startswith("responses tanh: row ('residual_sigmoid_d8'") for p in problems)
    assert any(p.startswith("responses tanh: the residual bar") for p in problems)
    assert any(p.startswith("degradation tanh: rows of") for p in problems)
    assert any(p.startswith("degradation tanh: the label") for p in problems)


# -- 8. the chart's words fit: on a 390 px phone (twice the text size) and at 1280x720 ---------------

CHART_TEXT = """() => {
  const svg = document.getElementById('chart'), box = svg.viewBox.baseVal;
  const texts = Array.from(svg.querySelectorAll('text')).filter((t) => t.textContent.trim());
  return {box: [box.x, box.y, box.width, box.height],
          texts: texts.map((t) => { const b = t.getBBox(); return [t.textContent, b.x, b.y, b.width, b.height]; })};
}"""


def chart_text_problems(page, where: str, gap: float = 2.0) -> list[str]:
    """The words of the chart as drawn (getBBox, in chart units): each inside the viewBox, and every two at
    least ``gap`` units apart (words that touch read as one)."""
    drawn = page.evaluate(CHART_TEXT)
    x, y, width, height = drawn["box"]
    problems = [f"{where}: {s!r} at {[round(v) for v in (bx, by, bw, bh)]} is outside the chart {width:g} x {height:g}"
                for s, bx, by, bw, bh in drawn["texts"]
                if bx < x or by < y or bx + bw > x + width or by + bh > y + height]
    texts = drawn["texts"]
    for i, (s, ax, ay, aw, ah) in enumerate(texts):
        for t, bx, by, bw, bh in texts[i + 1:]:
            if ax < bx + bw + gap and bx < ax + aw + gap and ay < by + bh and by < ay + ah:
                problems.append(f"{where}: {s!r} runs into {t!r}")
    return problems


def layout_problems(browser, folders: dict[str, Path], options: dict) -> list[str]:
    """Every view of every folder in both languages, the flow view of each net alone too."""
    page, _, _ = open_page(browser, folders["explorer"], **options)
    problems = []
    for name, folder in folders.items():
        page.goto((folder / "index.html").as_uri())
        page.wait_for_selector("html[data-ready=true]")
        views = read_data(folder)["views_order"]  # the views this folder's runs feed (the others have no tab)
        fragments = [f"view={view}&lang={lang}" for view in views for lang in ("en", "zh")]
        fragments += [f"view=flow&depth=8&act=sigmoid&arch={arch}&lang=en" for arch in ("plain", "residual")]
        for fragment in fragments:
            page.evaluate(f"location.hash = '{fragment}'")
            page.wait_for_function(" && ".join(f"String(window.explore.state.{key}) === '{value}'"
                                               for key, value in (pair.split("=") for pair in fragment.split("&"))))
            problems += chart_text_problems(page, f"{name} {fragment}")
    page.close()
    return problems


@pytest.mark.parametrize("options", [PHONE, DESKTOP], ids=["phone-390", "1280x720"])
@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_charts_words_fit_and_do_not_collide(browser, explorer, untrained, two_activations, options):
    folders = {"explorer": explorer, "untrained": untrained, "two activations": two_activations[0]}
    assert layout_problems(browser, folders, options) == []


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_layout_check_catches_a_layout_made_for_other_text_sizes(browser, explorer, tmp_path):
    """The bug as it was: the phone's stylesheet doubles the chart's text, the layout keeps a desktop's places
    ("input" and "loss" cut at the edges, a net's label running into its input-to-loss ratio)."""
    folder = copy(explorer, tmp_path)
    edit(folder, "explore.js", "    fonts = chartFonts();\n", "    fonts = Object.assign(chartFonts(), {big: 15, small: 13});\n")
    problems = layout_problems(browser, {"explorer": folder}, PHONE)
    flow = [p for p in problems if p.startswith("explorer view=flow&")]
    assert any("'input' at" in p and "outside" in p for p in flow) and any("'loss' at" in p for p in flow)
    assert any(p.startswith("explorer view=flow&depth=8&act=sigmoid&arch=residual&lang=en: 'residual: h_l = h_(l-1) + "
                            "F(h_(l-1))' runs into 'input end / loss end") for p in flow)


# -- the URL keeps the state; other runs (a user's model) open in the same views -------------------

@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_fragment_restores_and_follows_the_view(browser, explorer):
    page, _, _ = open_page(browser, explorer, "#view=flow&depth=8&act=sigmoid&step=10&arch=plain")
    assert (page.input_value("#depth"), state(page)["step"]) == ("8", 10)
    assert page.locator("#chart rect.blk.plain").count() == 8 and page.locator("#chart rect.blk.residual").count() == 0
    assert not page.is_checked("#show-residual")
    page.focus("#play")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("location.hash.includes('step=19')")  # written just after the redraw
    assert "arch=plain" in page.evaluate("location.hash") and "depth=8" in page.evaluate("location.hash")
    assert page.get_attribute("#clip", "href") == "../480p15/en/page/lecture.html#GradientFlowOverTraining"
    page.close()


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_a_users_model_opens_in_the_same_views(browser, tmp_path):
    """Runs plain/residual under experiment ``model``, a user model's config (no ``depth``) and the user's block
    names in ``meta.layers``: every view that needs out_grad_norm, error_curve or branch_norm shows them."""
    names = ["stem.conv", "layer1.0", "layer1.1", "head.fc"]
    runs = {}
    for key, trace in committed_traces(("residual_response",))["residual_response"].items():
        config = UserModelConfig(arch=key.name, seed=key.seed).to_dict()
        meta = dataclasses.replace(trace.meta, layers=names, config=config)
        runs[key] = Trace(meta=meta, arrays=trace.arrays)
    write_explorer({"model": runs}, tmp_path / "explore")
    page, _, errors = open_page(browser, tmp_path / "explore", "#view=flow&family=model")
    assert page.eval_on_selector_all("#numbers tbody th", "els => els.map(e => e.textContent)") == names
    shown = table_values(page, "#numbers td[data-arch=residual]")
    assert [shown[("residual", l, "")] for l in range(4)] == list(runs[RunKey("residual", 0)]["out_grad_norm"][0])
    for view in ("chain", "degradation", "responses"):
        page.evaluate(f"location.hash = 'view={view}&family=model'")
        page.wait_for_function(f"window.explore.state.view === '{view}'")
        assert page.locator("#numbers td").count() > 0 and "not trained" not in page.inner_text("#status")
    assert errors == []
    page.close()
    # A watched run without --twin: no plain run at all. Its views show the residual run and say nothing of a plain
    # one "not trained" (a new user's explorer read "plain, 6 block, —: not trained in these runs (trained: —)").
    write_explorer({"model": {RunKey("residual", 0): runs[RunKey("residual", 0)]}}, tmp_path / "alone",
                   page="../480p15/{lang}/page/lecture.html")
    page, _, errors = open_page(browser, tmp_path / "alone", "#view=flow&family=model")
    for view, clip in (("flow", "ModelGradientFlowOverTraining"), ("chain", "ModelChainRuleProduct"),
                       ("map", "DepthTimeMap")):
        page.evaluate(f"location.hash = 'view={view}&family=model'")
        page.wait_for_function(f"window.explore.state.view === '{view}'")
        assert page.get_attribute("#clip", "href") == f"../480p15/en/page/lecture.html#{clip}"  # the page's section
        assert page.locator("#numbers td[data-arch=residual]").count() > 0, view
        assert page.locator("#numbers td[data-arch=plain]").count() == 0, view
        assert "not trained" not in page.inner_text("#status") and page.locator("#chart .untrained").count() == 0, view
        assert page.is_disabled("#show-plain") and not page.is_checked("#show-plain") and page.is_checked("#show-residual")
    assert errors == []
    page.close()


@pytest.mark.slow  # trains examples/my_resnet.py and its plain twin for a few steps
def test_explore_model_draws_your_own_network(tmp_path):
    """`render.py explore --model FILE.py:FACTORY`: the user's network and its twin, named by their module paths."""
    from click.testing import CliRunner

    from render import cli

    model = f"{ROOT / 'examples' / 'my_resnet.py'}:build"
    result = CliRunner().invoke(cli, ["explore", "--model", model, "--set", "data=digits-image",
                                      "--set", "model.steps=4", "-o", str(tmp_path / "explore")])
    assert result.exit_code == 0, result.output
    (family,) = read_data(tmp_path / "explore")["views"]["flow"]["families"]
    assert family["id"] == "model" and sorted(r["arch"] for r in family["runs"]) == ["plain", "residual"]
    assert all(r["layers"][0].startswith("stages.") for r in family["runs"])


# -- the depth x time map of a run read from its file (--trace) ------------------------------------------

def _map_family(folder: Path) -> dict:
    (family,) = read_data(folder)["views"]["map"]["families"]
    return family


def test_explore_trace_maps_the_files_runs_with_their_own_numbers(tmp_path):
    """`render.py explore --trace FILE --twin FILE`: the map view holds each run's out_grad_norm as recorded (a
    cell per block and record), the pair's colour scale and the loss line; nothing is trained."""
    from click.testing import CliRunner

    from render import cli

    files = user_like_trace_files("gpt2_24")
    result = CliRunner().invoke(cli, ["explore", "--trace", files["residual"], "--twin", files["plain"],
                                      "-o", str(tmp_path / "explore")])
    assert result.exit_code == 0, result.output
    family = _map_family(tmp_path / "explore")
    assert family["id"] == "model" and sorted(r["arch"] for r in family["runs"]) == ["plain", "residual"]
    # "Watch the clip" goes to the sections `render.py page --trace` writes, named after its clips
    # (ModelGradientFlowOverTraining.mp4: tests/test_watched_render.py), not to the lecture's GradientFlowOverTraining
    links = read_data(tmp_path / "explore")["model_clips"]["en"]
    assert {view: href.split("#")[1] for view, href in links.items()} == {
        "flow": "ModelGradientFlowOverTraining", "chain": "ModelChainRuleProduct", "degradation": "ModelDegradation",
        "responses": "ModelResidualResponse", "map": "DepthTimeMap"}
    assert all(href.startswith("../480p15/en/page/lecture.html#") for href in links.values())
    for run in family["runs"]:
        trace = Trace.load(files[run["arch"]])
        g = np.asarray(trace["out_grad_norm"], np.float64)
        assert run["cells"] == g.T.tolist() and run["steps"] == trace["step"].tolist()
        assert run["rows"] == trace.meta.layers
        assert run["loss"] == pytest.approx(np.asarray(trace["loss_curve"], np.float64).tolist())
    (group,) = family["groups"]
    logs = np.log10(np.concatenate([np.asarray(Trace.load(f)["out_grad_norm"], np.float64).ravel() for f in files.values()]))
    assert group["scale"][1] == math.ceil(logs.max()) and group["scale"][0] == max(math.floor(logs.min()),
                                                                                  math.ceil(logs.max()) - 12)
    # the loss chart's axis is the scene's, around both runs' losses (was: 0 to the largest loss in the page)
    losses = np.concatenate([np.asarray(Trace.load(f)["loss_curve"], np.float64) for f in files.values()])
    log, start, end, ticks = group["loss_axis"]
    assert log is True and (start, end) == (math.floor(math.log10(losses.min())), math.ceil(math.log10(losses.max())))


def test_a_long_wide_run_is_mapped_in_at_most_600_columns_and_300_rows(tmp_path):
    """10,000 records of 320 blocks: columns are the geometric means of equal step bins, rows of neighbouring
    blocks (checked against a plain loop here); the stepping views keep 600 records spread evenly."""
    source = Trace.load(user_like_trace_files("resnet152_50")["residual"])
    records, blocks = 10_000, 320
    names = [f"layer{i // 80 + 1}.{i % 80}" for i in range(blocks)]
    grads = np.resize(np.asarray(source["out_grad_norm"], np.float64), (records, blocks)) * np.linspace(1, 3, records)[:, None]
    meta = dataclasses.replace(source.meta, layers=names, blocks=blocks, config=UserModelConfig(arch="residual").to_dict())
    trace = Trace(meta=meta, arrays={"step": np.arange(records) * 50, "out_grad_norm": grads,
                                     "loss_curve": np.resize(source["loss_curve"], records * 50)})
    data = export_data({"model": {RunKey("residual", 0): trace}})
    (run,) = data["views"]["map"]["families"][0]["runs"]
    cells = np.array(run["cells"], np.float64)
    assert cells.shape == (300, 600) and len(run["rows"]) == 300 and len(run["loss"]) <= 600
    edges, steps = np.array(run["edges"]), np.arange(records) * 50
    row_edges = np.linspace(0, blocks, 301).round().astype(int)
    for r, c in ((0, 0), (17, 311), (299, 599)):
        inside = [k for k in range(records) if edges[c] <= steps[k] < edges[c + 1] or (c == 599 and steps[k] == edges[-1])]
        per_record = [np.mean(np.log10(grads[k, row_edges[r]:row_edges[r + 1]])) for k in inside]
        assert cells[r, c] == pytest.approx(10 ** np.mean(per_record), rel=1e-12)
    two = [(r, row) for r, row in enumerate(run["rows"]) if isinstance(row, list)]  # a row of two blocks says so
    assert two and all(row == [names[row_edges[r]], names[row_edges[r] + 1], 2] for r, row in two)
    (flow,) = data["views"]["flow"]["families"][0]["runs"]
    assert len(flow["steps"]) == 600 and flow["steps"][0] == 0 and flow["steps"][-1] == int(steps[-1])


@pytest.mark.slow  # a browser run (chromium); CI runs it
def test_the_map_view_shows_the_recorded_column_and_the_hovered_cell(browser, tmp_path):
    files = user_like_trace_files("gpt2_24")
    runs = {RunKey(name, 0): Trace.load(path) for name, path in files.items()}
    write_explorer({"model": runs}, tmp_path / "explore")
    page, _, errors = open_page(browser, tmp_path / "explore", "#view=map&family=model&step=20")
    for arch in ("plain", "residual"):
        trace = runs[RunKey(arch, 0)]
        k = list(trace["step"]).index(20)
        shown = table_values(page, f"#numbers td[data-arch={arch}]")
        assert [shown[(arch, l, "")] for l in range(24)] == list(np.asarray(trace["out_grad_norm"][k], np.float64))
    assert page.locator("#chart image.map").count() == 2
    box = page.locator("#chart image.map[data-arch=residual]").bounding_box()
    page.mouse.move(box["x"] + 1, box["y"] + 1)  # the first block at the first record
    readout = page.eval_on_selector_all("#readout .v", "els => els.map(e => +e.dataset.value)")
    assert readout == [float(runs[RunKey("residual", 0)]["out_grad_norm"][0, 0])]
    assert errors == []
    page.close()


# -- export ---------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=5),
                  elements=st.floats(allow_nan=True, allow_infinity=True)))
def test_exported_numbers_read_back_as_the_same_doubles(values):
    """Any float64 array, NaN and infinities included, survives the JSON the page reads (strict JSON)."""
    text = json.dumps(jsonable(values), allow_nan=False)
    special = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
    back = np.vectorize(lambda v: special[v] if isinstance(v, str) else v, otypes=[np.float64])(
        np.array(json.loads(text), dtype=object))
    assert np.array_equal(back, values, equal_nan=True)


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    from click.testing import CliRunner

    from render import cli

    for args, message in ((["nosuch"], "unknown experiment 'nosuch'"),
                          (["chain_rule", "--set", "degradation.depths=3"], "runs no scene of experiment degradation"),
                          (["chain_rule", "--set", "nosuch=1"], "nosuch")):
        result = CliRunner().invoke(cli, ["explore", *args, "-o", str(tmp_path / "explore")])
        assert result.exit_code == 1 and message in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "explore").exists()


def test_a_watched_run_gets_tabs_only_for_the_views_it_feeds(tmp_path):
    """A run from a user's own loop records no error and no LayerNorm pair: the explorer offered Degradation, Residual
    responses and Post-LN vs Pre-LN tabs that opened on "No recorded run has what this view needs." (a new user's
    --trace explorer). Only the views the data feeds are tabs now, in their order; the lecture's runs keep all six."""
    watched = ("step", "out_grad_norm", "in_grad_norm", "act_norm", "input_norm", "branch_norm", "shortcut_norm",
               "grad_norm", "loss", "loss_curve")  # what watch records that these views read (no error, no pair)
    source = Trace.load(user_like_trace_files("gpt2_24")["residual"])
    trace = Trace(source.meta, {k: v for k, v in source.arrays.items() if k in watched})
    write_explorer({"model": {RunKey("residual", 0): trace}}, tmp_path / "explore")
    data = read_data(tmp_path / "explore")
    fed = [v for v in VIEWS if data["views"][v]["families"]]
    assert data["views_order"] == fed and {"flow", "chain", "map"} <= set(fed)
    assert not {"degradation", "layernorm"} & set(data["views_order"])


def test_traces_without_any_drawn_array_are_refused(traces):
    from cli.media import RenderError

    meta = shown_as(traces["vanishing"])[vanishing_run("plain", "sigmoid", 4)].meta
    bare = {"x": {RunKey("run", 0): Trace(meta=meta, arrays={"step": np.arange(3)})}}
    with pytest.raises(RenderError, match="no trace holds what the explorer draws"):
        export_data(bare)


@pytest.mark.slow  # two more explorers in the browser (~5 s); the scenes' plurals: tests/test_plurals.py by default
def test_the_seed_spread_says_1_seed_and_3_seeds_in_both_languages(browser, tmp_path):
    """The responses view's legend counts the seeds drawn with their noun in agreement (issue 34): "of 1 seed" for
    one seed, "of 3 seeds" for three (the browser's Intl.PluralRules on the page's language); Chinese has one form.
    The other seeds' dots are named only where there are some, with their number ("the other 2 seeds")."""
    runs = committed_traces(("residual_response",))["residual_response"]
    seeds = sorted({key.seed for key in runs})
    assert len(seeds) == 3
    said = {}
    for kept in (seeds[:1], seeds):
        target = tmp_path / f"seeds-{len(kept)}"
        write_explorer({"residual_response": {k: t for k, t in runs.items() if k.seed in kept}}, target)
        page, _, errors = open_page(browser, target, "#view=responses&family=residual_response&lang=en")
        for lang in ("en", "zh"):
            page.evaluate(f"location.hash = 'view=responses&family=residual_response&lang={lang}'")
            page.wait_for_function(f"window.explore.state.lang === '{lang}'")
            said[len(kept), lang] = page.inner_text("#legend")
        page.close()
        assert errors == []
    assert "lowest – highest of 1 seed" in said[1, "en"] and "of 1 seeds" not in said[1, "en"]
    assert "lowest – highest of 3 seeds" in said[3, "en"]
    assert "the other" not in said[1, "en"] and "其余" not in said[1, "zh"]  # no dots: none said
    assert "dots: the other 2 seeds" in said[3, "en"] and "其余 2 个种子" in said[3, "zh"]
    assert "1 个种子" in said[1, "zh"] and "3 个种子" in said[3, "zh"] and "plural" not in said[1, "zh"] + said[3, "en"]
