"""The explorer: an offline page where students drive the recorded training runs themselves (issue 22).

Example::

    python render.py explore -o media/explore                  # the default lecture's runs; open media/explore/index.html
    python render.py explore degradation --set seeds=0,1,2,3,4 -o out/explore

The folder holds ``index.html``, ``explore.js``, ``explore.css`` (from ``web/explore/``) and ``data.js``: every
number the page shows, exported here from the traces (``.npz``, read with ``allow_pickle=False``) as exact float64
JSON (a float's repr reads back as the same double in JavaScript); non-finite values as the strings "nan", "inf",
"-inf". The page computes no number of its own: it only places, colours and formats these. It opens from
``file://`` with no network request, in English and Chinese (captions from the scenes' own string tables), in
the scenes' dark and light themes (:mod:`scenes.kit.theme`).

Views are driven by what the traces hold, not by run names: any run with ``out_grad_norm`` and an ``arch`` of
plain or residual (config, else its run name) feeds the gradient-flow and chain-rule views; with ``error_curve``
the degradation view; with ``branch_norm`` and ``input_norm`` the residual responses; with ``init_ffn_grad_norm``
the Post-LN vs Pre-LN view. Block names come from ``meta.layers`` where the trace has them (a user's model),
else ``block.<l>``. This module never trains and never draws; ``render.py explore`` gets the traces.
"""

from __future__ import annotations

import html
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from narration import i18n
from cli.deck import staged_dir
from cli.media import RenderError
from cli.public import public
from simulation.runkeys import RunKey, key_texts

__all__ = ["DEFAULT_EXPERIMENTS", "VIEWS", "ui_strings", "VIEW_SCENES", "CAPTIONS", "lecture_params",
           "explored_experiments", "export_data",
           "write_explorer", "folder_size", "page_link", "model_view_scenes", "jsonable", "scene_strings", "WEB_DIR"]

ROOT = Path(__file__).resolve().parent.parent
WEB_DIR = ROOT / "web" / "explore"
_ASSETS = ("explore.js", "explore.css")

# The experiments of the default lecture the views draw from (their seeds: those of the lecture's scenes).
DEFAULT_EXPERIMENTS = ("vanishing", "chain_rule", "degradation", "residual_response", "layernorm", "depth_sweep")
VIEWS = ("flow", "chain", "degradation", "responses", "layernorm", "map")
# view -> the lecture clip it belongs to (the page links back to it) and the family it opens on when present.
VIEW_SCENES = {"flow": "GradientFlowOverTraining", "chain": "ChainRuleProduct", "degradation": "Degradation",
               "responses": "ResidualResponse", "layernorm": "PostLNvsPreLN"}
_PREFERRED = {"flow": ("vanishing",), "chain": ("chain_rule", "vanishing"), "degradation": ("degradation",),
              "responses": ("residual_response",), "layernorm": ("layernorm",), "map": ("model", "vanishing")}
MAX_RECORDS = 600  # the flow, chain-rule and responses views step through at most this many records (evenly spread)
PAGE_LANGS = tuple(lang for lang in i18n.languages() if lang != i18n.PSEUDO)  # the explorer's language menu

# The explorer's own words (controls, states) are the catalogs' "Explorer.<key>" (locale/, narration.i18n); captions
# and titles are the scenes' strings.
def ui_strings(lang: str) -> dict[str, str]:
    """``{key: text}`` of the explorer's own words in ``lang`` (English where the catalog lacks one)."""
    return i18n.texts_of(lang, ["Explorer"])


def scene_strings() -> dict[str, dict[str, dict[str, str]]]:
    """The scenes' strings the captions quote, ``{table: {key: {lang: text}}}``, from the catalogs (narration.i18n)."""
    owners = {"common": "LectureScene", "flow": "GradientFlowOverTraining", "chain": "ChainRuleProduct",
              "sigmoid": "SigmoidDerivative", "degradation": "Degradation", "responses": "ResidualResponse",
              "layernorm": "PostLNvsPreLN", "map": "DepthTimeMap"}
    return {name: i18n.table([owner, "UserModelScene" if name == "map" else "SeedSpread", "LectureScene"],
                             PAGE_LANGS) for name, owner in owners.items()}


# view -> [(table, key)] of the scene strings making its title and caption, in order.
CAPTIONS = {
    "flow": [("flow", "title"), ("flow", "scale"), ("flow", "plain_row"), ("flow", "residual_row")],
    "chain": [("chain", "title"), ("chain", "n_formula"), ("chain", "axis_y"), ("sigmoid", "n_stack")],
    "degradation": [("degradation", "title"), ("degradation", "n_intro"), ("degradation", "n_not_overfit")],
    "responses": [("responses", "title"), ("responses", "n_intro"), ("responses", "n_std")],
    "layernorm": [("layernorm", "title"), ("layernorm", "grad_title"), ("layernorm", "n_paths")],
    "map": [("map", "title"), ("map", "n_intro"), ("map", "n_map")],
}


def _sources() -> dict[str, str]:
    """The paper each view reproduces, as its scene cites it on screen."""
    from scenes.chain_rule import ChainRuleProduct
    from scenes.degradation import Degradation
    from scenes.depth_time_map import DepthTimeMap
    from scenes.gradient_flow import GradientFlowOverTraining
    from scenes.layernorm import PostLNvsPreLN
    from scenes.residual_response import ResidualResponse

    return {"flow": GradientFlowOverTraining._source,
            "chain": ChainRuleProduct._source,  # SigmoidDerivative cites the same two
            "degradation": Degradation._source, "responses": ResidualResponse._source,
            "layernorm": PostLNvsPreLN._source, "map": DepthTimeMap._source}


def lecture_params(experiment: str) -> dict[str, Any]:
    """The parameters the default lecture's scenes give ``experiment`` (their ``experiment_defaults``), merged
    over every scene of ``scenes.SCENES_IN_ORDER`` that reads it; ``seeds``: the longest list any of them asks
    for (ChainRuleProduct's three seeds, not SigmoidDerivative's one). {} when no scene reads it."""
    import scenes

    merged: dict[str, Any] = {}
    for scene in scenes.SCENES_IN_ORDER:
        if getattr(scene, "experiment", None) != experiment:
            continue
        for key, value in getattr(scene, "experiment_defaults", {}).items():
            if key == "seeds":
                if len(value) > len(merged.get("seeds", ())):
                    merged["seeds"] = value
            else:
                merged.setdefault(key, value)  # the first scene's value
    return merged


def explored_experiments(experiments: tuple[str, ...], model: str | None) -> list[str]:
    """The experiments ``render.py explore`` draws from, in order, each once: those named, else
    :data:`DEFAULT_EXPERIMENTS`; with ``--model``, also ``model`` (the user's network; alone when none is named)."""
    named = list(experiments) or ([] if model else list(DEFAULT_EXPERIMENTS))
    return list(dict.fromkeys(named + (["model"] if model else [])))


# -- export ------------------------------------------------------------------------------------

def jsonable(values: Any) -> Any:
    """A numpy array or number as nested lists of Python floats/ints; NaN and ±inf as "nan", "inf", "-inf"
    (JSON has no such numbers; the page reads them back)."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iub":
        return arr.tolist()
    flat = arr.astype(np.float64)

    def one(x: float) -> Any:
        return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))

    if flat.ndim == 0:
        return one(float(flat))
    return [jsonable(row) for row in flat] if flat.ndim > 1 else [one(float(x)) for x in flat]


def _arch(key: RunKey, config: Any) -> str | None:
    """plain | residual from the (typed) config's ``arch``, else from the run's name."""
    arch = getattr(config, "arch", None)
    if arch in ("plain", "residual"):
        return arch
    return key.name if key.name in ("plain", "residual") else None


def _blocks(trace, key: str) -> int:
    return int(np.asarray(trace[key]).shape[-1])


def _layer_names(trace, blocks: int) -> list[str]:
    """The recorded blocks' names: ``meta.layers`` (a user's module paths) when it has one per block."""
    layers = trace.meta.layers
    return list(layers) if layers and len(layers) == blocks else [f"block.{l}" for l in range(blocks)]


def _family(experiment: str, config: Any) -> str:
    """Runs are compared within a family: the experiment, split by model kind (depth_sweep has MLPs and conv nets)."""
    model = getattr(config, "model", None)
    return f"{experiment}:{model}" if model and model != "mlp" else experiment


def _depth(trace, key: str) -> int:
    """The depth the run was trained at (``config.depth``; a user's model: its number of blocks)."""
    depth = getattr(trace.run_config, "depth", None)
    return int(depth) if isinstance(depth, (int, np.integer)) else _blocks(trace, key)


def _records(trace) -> np.ndarray:
    """Indices of the records a stepping view exports: all, or :data:`MAX_RECORDS` spread evenly (a long watched
    run), the first and last included."""
    count = len(np.atleast_1d(np.asarray(trace["step"])))
    return np.unique(np.linspace(0, count - 1, min(count, MAX_RECORDS)).round().astype(int))


def _seed(trace) -> int:
    seed = trace.meta.seed if trace.meta.seed is not None else getattr(trace.run_config, "seed", 0)
    return int(seed)  # a run read from a file (--trace) that names no seed: 0


def _run_record(key: RunKey, text: str, trace, experiment: str) -> dict[str, Any]:
    """What every view's run says; ``text``: the run key as the page shows it (:func:`simulation.runkeys.key_texts`)."""
    config = trace.run_config
    return {"name": text, "experiment": experiment, "digest": trace.meta.digest, "seed": _seed(trace),
            "arch": _arch(key, config), "activation": str(getattr(config, "activation", "—")),
            # the config as the trace file holds it (JSON), its file paths cut to the file's name (cli.public)
            "config": public(dict(sorted(trace.meta.config.items())))}


def _flow_runs(key: RunKey, text: str, trace, experiment: str, max_slope: float) -> dict[str, Any] | None:
    """Per record: ||dL/dh_l||, its running product and factors (scenes.chain_rule.running_product) and the
    sigma' bound (max sigma')**(L-1-l) for sigmoid nets (scenes.sigmoid.derivative_bound)."""
    from scenes.chain_rule import running_product
    from scenes.sigmoid import derivative_bound
    from simulation.summary import blown_up_losses

    if "out_grad_norm" not in trace.arrays or _arch(key, trace.run_config) is None:
        return None
    grads = np.asarray(trace["out_grad_norm"], dtype=np.float64)  # [T, blocks]
    if grads.ndim != 2:
        return None
    kept = _records(trace)
    grads = grads[kept]
    blocks = grads.shape[1]
    factors, products = zip(*(running_product(row) for row in grads)) if len(grads) else ((), ())
    record = _run_record(key, text, trace, experiment)
    record.update(depth=_depth(trace, "out_grad_norm"), blocks=blocks, layers=_layer_names(trace, blocks),
                  steps=jsonable(np.asarray(trace["step"])[kept]), out_grad_norm=jsonable(grads),
                  product=jsonable(np.array(products)), factor=jsonable(np.array(factors)))
    blown = blown_up_losses(trace)  # a finite run that did not train
    if blown is not None:
        record["blew_up"] = list(blown)
    if record["activation"] == "sigmoid":
        record["bound"] = jsonable(derivative_bound(max_slope, blocks)[::-1])  # block l: (max σ')^(L-1-l)
    return record


def _flow_groups(runs: list[dict[str, Any]], scales: dict) -> list[dict[str, Any]]:
    """The plain/residual pairs of one family by (depth, activation, seed), each with its shared log scale
    (scenes.gradient_flow.flow_scale over both nets' every record: the decades they hold, as the scene draws them)."""
    from scenes.gradient_flow import GradientFlowOverTraining, flow_scale

    groups: dict[tuple, dict[str, Any]] = {}
    for index, run in enumerate(runs):
        key = (run["depth"], run["activation"], run["seed"])
        group = groups.setdefault(key, {"depth": key[0], "activation": key[1], "seed": key[2], "runs": {}})
        group["runs"].setdefault(run["arch"], index)
    for key, group in groups.items():
        arrays = [scales[i] for i in group["runs"].values()]
        try:
            group["scale"] = list(flow_scale(arrays, GradientFlowOverTraining.decades))
        except ValueError:  # nothing finite and positive: every block draws dark
            group["scale"] = None
    return list(groups.values())


def _degradation_run(key: RunKey, text: str, trace, experiment: str) -> dict[str, Any] | None:
    """The smoothed training-error curve of every step run (scenes.degradation.error_curve, its window)."""
    from scenes.degradation import error_curve, smoothing_window
    from scenes.kit.helpers import steps_run

    if "error_curve" not in trace.arrays or _arch(key, trace.run_config) is None:
        return None
    curve = np.asarray(trace["error_curve"])
    done = steps_run(trace, len(curve))
    steps, smooth = error_curve(trace, points=max(done, 1))
    record = _run_record(key, text, trace, experiment)
    record.update(depth=_depth(trace, "error_curve") if "out_grad_norm" not in trace.arrays
                  else _depth(trace, "out_grad_norm"),
                  window=smoothing_window(max(done, 1)), curve_steps=jsonable(steps.astype(np.int64)),
                  error=jsonable(smooth))
    return record


def _responses_run(key: RunKey, text: str, trace, experiment: str) -> dict[str, Any] | None:
    """||F(x)|| / ||x|| (scenes.residual_response.response_ratio) and the std of F(x), every record."""
    from scenes.residual_response import response_ratio

    if not {"branch_norm", "input_norm", "branch_std"} <= set(trace.arrays) or _arch(key, trace.run_config) is None:
        return None
    kept = _records(trace)
    ratio = np.array([response_ratio(trace, k) for k in kept])
    blocks = ratio.shape[1]
    record = _run_record(key, text, trace, experiment)
    record.update(depth=_depth(trace, "branch_norm"), blocks=blocks, layers=_layer_names(trace, blocks),
                  steps=jsonable(np.asarray(trace["step"])[kept]), ratio=jsonable(ratio),
                  branch_std=jsonable(np.asarray(trace["branch_std"], dtype=np.float64)[kept]))
    return record


def _layernorm_run(key: RunKey, text: str, trace, experiment: str) -> dict[str, Any] | None:
    """||dL/dW^2|| of each layer's FFN at initialisation (scenes.layernorm.init_ffn_grad_norm)."""
    from scenes.layernorm import init_ffn_grad_norm

    if "init_ffn_grad_norm" not in trace.arrays:
        return None
    values = init_ffn_grad_norm(trace)
    record = _run_record(key, text, trace, experiment)
    config = trace.run_config
    record.update(norm=str(getattr(config, "norm", key.name)), warmup_steps=int(getattr(config, "warmup_steps", 0)),
                  layers=_layer_names(trace, len(values)), batches=int(np.asarray(trace["init_ffn_grad_norm"]).shape[0]),
                  init_ffn_grad_norm=jsonable(values))
    return record


def _map_run(key: RunKey, text: str, trace, experiment: str) -> dict[str, Any] | None:
    """The depth x time map of ||dL/dh|| (scenes.depth_time_map: one column per record up to MAX_COLUMNS, else the
    geometric mean of equal step bins; rows: blocks, grouped beyond MAX_ROWS), as the values its cells show
    (0: underflow, "inf", "nan": no record), its colour scale in whole decades and the loss line beneath."""
    from scenes.depth_time_map import DepthTimeMap, color_scale, depth_time_grid, loss_line

    if "out_grad_norm" not in trace.arrays or _arch(key, trace.run_config) is None:
        return None
    grads = np.asarray(trace["out_grad_norm"], dtype=np.float64)
    if grads.ndim != 2 or not grads.size:
        return None
    steps = np.asarray(trace["step"])
    grid, edges, rows = depth_time_grid(grads, steps, expand=False)
    # the step each column stands for: its record's, or where its bin starts (more records than columns)
    column_steps = steps if grid.shape[1] == len(steps) else np.ceil(edges[:-1]).astype(np.int64)
    if grid.shape == grads.T.shape:  # a cell per block and record: the recorded value itself
        cells = grads.T
    else:
        with np.errstate(over="ignore"):
            cells = np.where(np.isneginf(grid), 0.0, 10.0 ** grid)  # -inf: every value 0; +inf and NaN stay
    names = _layer_names(trace, grads.shape[1])
    record = _run_record(key, text, trace, experiment)
    record.update(depth=_depth(trace, "out_grad_norm"), blocks=grads.shape[1],
                  rows=[names[a] if b - a == 1 else [names[a], names[b - 1], int(b - a)]
                        for a, b in zip(rows[:-1], rows[1:])],
                  steps=jsonable(column_steps), edges=jsonable(edges), cells=jsonable(cells),
                  scale=list(color_scale(grid, DepthTimeMap.decades)))
    if "loss_curve" in trace.arrays:
        curve = np.asarray(trace["loss_curve"], np.float64)[: int(edges[-1]) + 1]  # the steps the map spans
        xs, ys = loss_line(np.arange(len(curve), dtype=np.float64), curve)
        record.update(loss_steps=jsonable(xs), loss=jsonable(ys))
    return record


def _map_groups(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs of one family by (depth, activation, seed): ``{"depth", "activation", "seed", "runs": {arch: i},
    "scale": [low, high], "loss_axis": [log, start, end, ticks]}``, the scale shared by the pair (so that one colour is
    one value in both maps: the highest decade of the two, at most DepthTimeMap.decades below it) and the loss chart's
    axis around both runs' losses, as the scene chooses it (scenes.depth_time_map.loss_axis)."""
    from scenes.depth_time_map import DepthTimeMap, loss_axis

    groups: dict[tuple, dict[str, Any]] = {}
    for index, run in enumerate(runs):
        key = (run["depth"], run["activation"], run["seed"])
        groups.setdefault(key, {"depth": key[0], "activation": key[1], "seed": key[2], "runs": {}})["runs"].setdefault(
            run["arch"], index)
    for group in groups.values():
        scales = [runs[i]["scale"] for i in group["runs"].values()]
        high = max(high for _, high in scales)
        group["scale"] = [max(min(low for low, _ in scales), high - DepthTimeMap.decades), high]
        losses = [np.asarray(runs[i]["loss"], np.float64) for i in group["runs"].values() if runs[i].get("loss")]
        if losses:
            log, start, end, ticks = loss_axis(np.concatenate(losses))
            group["loss_axis"] = [bool(log), float(start), float(end), [float(t) for t in ticks]]
    return list(groups.values())


def _sorted_families(families: dict[str, dict[str, Any]], view: str) -> list[dict[str, Any]]:
    """Families in the order the view offers them: its preferred experiments first, then by name."""
    prefer = _PREFERRED[view]
    rank = lambda f: (prefer.index(f["experiment"]) if f["experiment"] in prefer else len(prefer), f["id"])
    return sorted(families.values(), key=rank)


def export_data(traces: Mapping[str, Mapping[str, Any]], sources: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Everything the page shows, from ``traces`` = ``{experiment: {RunKey: Trace}}``.

    Returns ``{"views": {view: {"families": [...]}}, "sigma_prime_max": float, "experiments": {name: source}}``;
    a family is ``{"id", "experiment", "runs": [...]}`` (the flow family adds ``groups``: its plain/residual pairs).
    ``sources``: the paper of each experiment (default: simulation.experiments' ``source``). Raises RenderError
    when no run feeds any view."""
    from scenes.sigmoid import sigmoid_prime
    from simulation.experiments import EXPERIMENTS

    z = np.linspace(-6, 6, 241)  # the grid SigmoidDerivative reads max sigma' from
    max_slope = float(sigmoid_prime(z).max())
    views: dict[str, dict[str, dict[str, Any]]] = {v: {} for v in ("flow", "degradation", "responses", "layernorm",
                                                                    "map")}
    scales: dict[str, dict[int, np.ndarray]] = {}
    makers = {"flow": lambda k, n, t, e: _flow_runs(k, n, t, e, max_slope), "degradation": _degradation_run,
              "responses": _responses_run, "layernorm": _layernorm_run, "map": _map_run}
    for experiment, runs in traces.items():
        texts = key_texts(runs)
        for key, trace in runs.items():
            for view, make in makers.items():
                record = make(key, texts[key], trace, experiment)
                if record is None:
                    continue
                family_id = _family(experiment, trace.run_config)
                family = views[view].setdefault(family_id, {"id": family_id, "experiment": experiment, "runs": []})
                if view == "flow":
                    scales.setdefault(family_id, {})[len(family["runs"])] = np.asarray(trace["out_grad_norm"], np.float64)
                family["runs"].append(record)
    if not any(views.values()):
        raise RenderError("no trace holds what the explorer draws (out_grad_norm, error_curve, branch_norm or "
                          "init_ffn_grad_norm)")
    for family in views["flow"].values():
        family["groups"] = _flow_groups(family["runs"], scales[family["id"]])
    for family in views["map"].values():
        family["groups"] = _map_groups(family["runs"])
    out = {view: {"families": _sorted_families(families, "chain" if view == "flow" else view)}
           for view, families in views.items()}
    out["chain"] = {"families": _sorted_families(views["flow"], "chain")}  # the same runs, chain_rule first
    out["flow"] = {"families": _sorted_families(views["flow"], "flow")}
    known = {name: exp.source for name, exp in EXPERIMENTS.items()}
    from scenes.kit.theme import VIRIDIS

    return {"views": out, "sigma_prime_max": max_slope, "map_colors": list(VIRIDIS),
            "experiments": {name: (sources or known).get(name, "") for name in traces}}


# -- the folder -----------------------------------------------------------------------------------

def _themes() -> dict[str, dict[str, str]]:
    from scenes.kit.theme import ROLES, THEMES

    return {name: {role: theme[role].to_hex().upper() for role in ROLES} for name, theme in THEMES.items()}


def _strings() -> dict[str, dict[str, Any]]:
    """{lang: {"ui": {...}, "views": {view: {"title", "caption": [...]}}, "common": {...}}} for en and zh."""
    tables = scene_strings()
    out = {}
    for lang in PAGE_LANGS:
        views = {}
        for view, keys in CAPTIONS.items():
            lines = [tables[table][key][lang] for table, key in keys]
            views[view] = {"title": lines[0], "caption": lines[1:]}
        views["chain"]["bound"] = tables["sigmoid"]["bound"][lang]
        views["degradation"]["curve"] = tables["degradation"]["curve"][lang]
        common = {k: tables["common"][k][lang] for k in ("plain", "residual", "block", "layer", "measured")}
        layernorm = {k: tables["layernorm"][k][lang] for k in ("legend_post", "legend_pre")}
        views["layernorm"].update(layernorm)
        views["flow"]["lane"] = tables["flow"]["lane"][lang]
        views["flow"]["rows"] = {arch: tables["flow"][f"{arch}_row"][lang] for arch in ("plain", "residual")}
        views["chain"]["axis_y"] = tables["chain"]["axis_y"][lang]
        views["flow"]["ratio"] = tables["flow"]["ratio"][lang]
        views["map"].update({k: tables["map"][k][lang] for k in ("loss_axis", "color_axis", "blocks_axis")})
        out[lang] = {"ui": ui_strings(lang), "views": views, "common": common}
    return out


def _clip_links(page: str | None, scenes: Mapping[str, str] = VIEW_SCENES) -> dict[str, dict[str, str]]:
    """{lang: {view: href}}: the lecture page's section of each view's clip (``scenes``: {view: scene}); ``page``
    holds ``{lang}``."""
    if page is None:
        return {}
    return {lang: {view: f"{page.format(lang=lang)}#{scene}" for view, scene in scenes.items()}
            for lang in PAGE_LANGS}


def model_view_scenes() -> dict[str, str]:
    """{view: scene} for a user's model (the experiment ``model``): the variant of each view's lecture scene that
    ``render.py page --model/--trace`` renders (the page's sections are named after them: ModelGradientFlowOverTraining,
    not GradientFlowOverTraining), and DepthTimeMap for the map."""
    from scenes import MODEL_VARIANTS

    out = {view: MODEL_VARIANTS[scene].__name__ for view, scene in VIEW_SCENES.items() if scene in MODEL_VARIANTS}
    return {**out, "map": "DepthTimeMap"}


def write_explorer(traces: Mapping[str, Mapping[str, Any]], target: Path, page: str | None = None,
                   lang: str = "en", theme: str = "dark") -> list[Path]:
    """Write the explorer folder ``target`` (atomically: built beside it, swapped in at the end).

    ``traces``: ``{experiment: {RunKey: Trace}}``; ``page``: the lecture page's URL relative to ``target``
    with ``{lang}`` for the language (each view links to its clip there; None: no links); ``lang`` and
    ``theme`` the page opens in (the URL fragment and the page's own controls change both).
    Returns the files written. RenderError when no trace feeds a view or ``web/explore`` is incomplete."""
    missing = [name for name in ("index.html", *_ASSETS) if not (WEB_DIR / name).is_file()]
    if missing:
        raise RenderError(f"the explorer's page files are missing from {WEB_DIR}: {', '.join(missing)}")
    data = export_data(traces)
    data.update(strings=_strings(), themes=_themes(), clips=_clip_links(page),
                model_clips=_clip_links(page, model_view_scenes()) if "model" in traces else {}, sources=_sources(),
                defaults={"lang": lang, "theme": theme},
                views_order=[v for v in VIEWS if data["views"][v]["families"]])  # a tab only for a view with runs
    payload = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    template = (WEB_DIR / "index.html").read_text(encoding="utf-8")
    strings = data["strings"][lang]["ui"]
    index = (template.replace("{{lang}}", lang).replace("{{theme}}", theme)
             .replace("{{title}}", html.escape(strings["title"])).replace("{{intro}}", html.escape(strings["intro"]))
             .replace("{{lang_options}}", "".join(f'<option value="{code}">{html.escape(i18n.LANGUAGES[code].name)}'
                                                  f'</option>' for code in PAGE_LANGS)))
    with staged_dir(target) as stage:
        for name in _ASSETS:
            shutil.copyfile(WEB_DIR / name, stage / name)
        # A script, not a .json fetch: browsers refuse fetch() from file:// pages.
        (stage / "data.js").write_text("window.EXPLORE_DATA = " + payload.replace("</", "<\\/") + ";\n",
                                       encoding="utf-8")
        (stage / "index.html").write_text(index, encoding="utf-8")
    return [target / "index.html", target / "data.js", *(target / name for name in _ASSETS)]


def folder_size(folder: Path) -> int:
    """Bytes of every file under ``folder``."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def page_link(target: Path, clips_root: Path, quality: str) -> str:
    """The lecture page (``render.py page -o CLIPS_ROOT``) relative to the explorer folder ``target``, with
    ``{lang}`` for the language: e.g. ``../480p15/{lang}/page/lecture.html``."""
    from cli.media import quality_dir

    page = Path(clips_root) / quality_dir(quality) / "LANG" / "page" / "lecture.html"
    rel = os.path.relpath(page.resolve(), Path(target).resolve())
    return Path(rel).as_posix().replace("LANG", "{lang}")
