"""DepthTimeMap (scenes/depth_time_map.py): ‖∂L/∂h‖ of every block at every recorded step, and the loss beneath.

Example::

    pytest tests/test_depth_time_map.py -n 0
    pytest tests/test_depth_time_map.py --set_test -k frame     # (re)write the control frame

The map's reduction is checked against plain loops over the records; the numbers JSON against the trace; the last
frame against control data (a real run of 24 blocks named like GPT-2's: tests/data/model/gpt2_24), with a tamper
twin; the layout at the ends of the range the scene promises (2 blocks x 2 records, 300 blocks x 10,000 records:
a real run's arrays tiled, in the slow set).
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
from hypothesis import given, strategies as st
from manim import Text

from scenes.depth_time_map import (MAX_COLUMNS, MAX_LABELS, OVERFLOW, UNDERFLOW, DepthTimeMap, depth_time_grid,
                                   grid_colors, label_rows, loss_axis)
from scenes.kit.widgets import nice_axis, nice_ticks
from scenes.kit.style import SIZE_SMALL
from simulation.trace import Trace

from data.make_traces import tiled_traces, user_like_trace_files
from dry_run import built_scene, frame_build, scene_group
from frame_checks import assert_last_frame_matches, same_cairo_as_control_data  # noqa: F401 (an autouse fixture)

FILES = user_like_trace_files("gpt2_24")
GROUP = pytest.mark.xdist_group(scene_group(DepthTimeMap, "en"))


def _cell(values: list[float]) -> float:
    """The mean log10 of the positive finite values, with the markers (independent of the scene's numpy)."""
    if any(math.isinf(v) for v in values):
        return OVERFLOW
    logs = [math.log10(v) for v in values if math.isfinite(v) and v > 0]
    if logs:
        return sum(logs) / len(logs)
    return UNDERFLOW if any(v == 0 for v in values) else math.nan


def test_few_records_each_column_shows_the_nearest_record():
    values = np.array([[1.0, 100.0], [10.0, 0.0], [1e3, np.inf]])
    grid, edges, rows = depth_time_grid(values, np.array([0, 10, 20]), max_columns=8)
    assert list(rows) == [0, 1, 2] and np.allclose(edges, np.linspace(0, 20, 9))
    centres = (edges[:-1] + edges[1:]) / 2
    for c, centre in enumerate(centres):
        k = int(np.argmin(np.abs(np.array([0, 10, 20]) - centre)))
        for b in range(2):
            expected = _cell([values[k, b]])
            assert grid[b, c] == expected or (math.isnan(expected) and math.isnan(grid[b, c])), (b, c)


def test_many_records_are_averaged_in_equal_step_bins_and_many_blocks_in_row_groups():
    rng = np.random.default_rng(0)
    values = 10 ** rng.normal(0, 2, (50, 7))
    values[3, 2], values[7, 4] = 0.0, np.nan
    steps = np.arange(50) * 3
    grid, edges, rows = depth_time_grid(values, steps, max_columns=10, max_rows=3)
    assert grid.shape == (3, 10) and len(rows) == 4 and rows[0] == 0 and rows[-1] == 7
    for r in range(3):
        for c in range(10):
            inside = [k for k in range(50) if edges[c] <= steps[k] < edges[c + 1] or (c == 9 and steps[k] == edges[-1])]
            per_record = [_cell(list(values[k, rows[r]:rows[r + 1]])) for k in inside]
            finite = [v for v in per_record if math.isfinite(v)]
            expected = sum(finite) / len(finite) if finite else math.nan
            assert grid[r, c] == pytest.approx(expected, rel=1e-12, abs=1e-12), (r, c)


def test_one_record_is_one_column_and_bad_shapes_are_refused():
    grid, edges, _ = depth_time_grid(np.array([[2.0, 0.0]]), np.array([5]))
    assert grid.shape == (2, 1) and grid[0, 0] == pytest.approx(math.log10(2)) and grid[1, 0] == UNDERFLOW
    assert list(edges) == [5, 6]
    with pytest.raises(ValueError, match="one step per record"):
        depth_time_grid(np.ones((3, 2)), np.arange(2))


def test_colours_span_the_scale_and_mark_what_has_no_value():
    grid = np.array([[-3.0, 0.0, -1.5, UNDERFLOW, OVERFLOW, np.nan]])
    rgba = grid_colors(grid, -3, 0, "#101319", "#CC79A7")
    assert rgba.shape == (1, 6, 4) and rgba.dtype == np.uint8 and (rgba[..., 3] == 255).all()
    assert rgba[0, 0, :3].tolist() == [0x44, 0x01, 0x54] and rgba[0, 1, :3].tolist() == [0xFD, 0xE7, 0x25]
    assert rgba[0, 3, :3].tolist() == rgba[0, 0, :3].tolist()  # an underflow: the lowest colour
    assert rgba[0, 4, :3].tolist() == [0xCC, 0x79, 0xA7] and rgba[0, 5, :3].tolist() == [0x10, 0x13, 0x19]


@pytest.mark.parametrize("blocks", [1, 2, 9, 10, 11, 300])
def test_at_most_max_labels_block_names_first_and_last_included(blocks):
    rows = label_rows(blocks)
    assert rows[0] == 0 and rows[-1] == blocks - 1 and len(rows) == min(blocks, MAX_LABELS)


@given(blocks=st.integers(1, 400), limit=st.integers(2, 12), apart=st.integers(1, 30))
def test_named_rows_are_apart_and_include_the_ends(blocks, limit, apart):
    rows = label_rows(blocks, limit, apart)
    assert rows[0] == 0 and rows[-1] == blocks - 1 and rows == sorted(set(rows)) and len(rows) <= limit
    gaps = np.diff(rows)
    assert len(rows) <= 2 or gaps.min() >= apart, rows  # two ends closer than apart: a map of fewer rows


def test_block_names_of_fourteen_blocks_with_descenders_do_not_overlap(tmp_path):
    """Found by the layout property test: 'layer1.0', 'layer2.0' ... 'layer2.12' beside a map of 14 rows (0.22 units
    each) named rows 0 and 1, 3 and 4 ... whose names ('y' reaches below the line) are 0.26 tall; now fewer names,
    two rows apart. The twin: one row apart, the old choice, overlaps."""
    from scenes.kit.layout import layout_problems
    from scenes.kit.style import PALETTE, make_text

    names = ["layer1.0", *[f"layer2.{i}" for i in range(13)]]
    built = frame_build(DepthTimeMap, "en", tiled_traces(names, tmp_path), check_layout=True)
    _check(built)
    old = [make_text(names[r], size=SIZE_SMALL, color=PALETTE["muted"]).move_to([0, -(r + 0.5) * 3.1 / 14, 0])
           for r in label_rows(14, apart=1)]
    assert any(p.startswith("overlap") for p in layout_problems(old, 14.2, 8.0))


def _check(built) -> None:
    assert built.layout_log == [], built.layout_log
    sizes = [m.font_size for m in built.mobjects_of_type(Text)] if hasattr(built, "mobjects_of_type") else [
        m.font_size for top in built.mobjects for m in top.get_family() if isinstance(m, Text)]
    assert sizes and min(sizes) >= SIZE_SMALL - 1e-9, min(sizes)


def _fill(axis: tuple, values: np.ndarray) -> float:
    """The share of the chart's height the values' range takes on ``axis`` = (log, start, end, ticks)."""
    log, start, end, _ = axis
    drawn = np.log10(values) if log else values
    assert start <= drawn.min() and drawn.max() <= end, (axis, drawn.min(), drawn.max())
    return float((drawn.max() - drawn.min()) / (end - start))


def _old_axis(values: np.ndarray) -> tuple:
    """The loss axis before: linear from 0 up to the next round tick above the largest loss (the twin)."""
    ticks = nice_ticks(0, float(values.max()), 3)
    if ticks[-1] < values.max():
        ticks.append(ticks[-1] + (ticks[1] - ticks[0] if len(ticks) > 1 else float(values.max())))
    return False, 0.0, ticks[-1], ticks


@pytest.mark.parametrize("low, high", [(0.3, 0.5), (0.946, 1.59), (0.737, 1.383), (2.30, 2.31), (1e-4, 3e-4)])
def test_the_loss_axis_is_chosen_from_the_losses_so_the_curve_fills_it(low, high):
    """A loss that lives between 0.3 and 0.5 fills most of its chart (was: an axis from 0, the curve a flat line near
    the top); the ticks are round real values inside the axis. The twin: the old axis from 0 leaves those losses
    under half the chart's height, so the same check fails on it."""
    values = np.linspace(low, high, 50)[::-1]
    axis = loss_axis(values)
    assert axis[0] is False and _fill(axis, values) >= 0.6, axis
    start, end, ticks = axis[1:]
    assert start <= min(ticks) and max(ticks) <= end and 2 <= len(ticks) <= 4
    assert all(abs(t - round(t / (ticks[1] - ticks[0])) * (ticks[1] - ticks[0])) < 1e-9 for t in ticks)  # round steps
    assert _fill(_old_axis(values), values) < 0.6


def test_a_loss_over_more_than_a_decade_gets_a_log_axis_in_whole_decades():
    """The committed GPT-2-like run's loss runs from 3.9 down to 0.07: a log axis 1e-2 .. 1e1 (exponents -2 .. 1)."""
    curve = Trace.load(FILES["residual"])["loss_curve"].astype(np.float64)
    log, start, end, ticks = loss_axis(curve)
    assert log and (start, end) == (math.floor(math.log10(curve.min())), math.ceil(math.log10(curve.max())))
    assert ticks == [float(e) for e in range(int(start), int(end) + 1)] and _fill((log, start, end, ticks), curve) > 0.5
    assert loss_axis(np.array([np.nan, np.inf])) == (False, 0.0, 1.0, [0.0, 0.5, 1.0])  # nothing finite
    assert loss_axis(np.array([0.0, 5.0]))[0] is False  # a 0: no log axis
    with pytest.raises(ValueError, match="finite range"):
        nice_axis(2.0, 1.0)


@GROUP
def test_numbers_equal_the_trace():
    built = built_scene(DepthTimeMap, "en", {"residual": FILES["residual"]})
    _check(built)
    values, trace = built.numbers["values"], Trace.load(FILES["residual"])
    g = trace["out_grad_norm"].astype(np.float64)
    assert values["blocks"] == g.shape[1] and values["records"] == g.shape[0]
    for l in range(g.shape[1]):
        assert values[f"block.{l}.first_record.out_grad_norm"] == g[0, l]
        assert values[f"block.{l}.last_record.out_grad_norm"] == g[-1, l]
    assert values["last_record.first_over_last"] == pytest.approx(g[-1, 0] / g[-1, -1], rel=1e-12)
    curve = trace["loss_curve"]
    shown = int(trace["step"][-1]) + 1  # the loss of the steps the map spans
    assert all(values[f"loss.step.{s}"] == pytest.approx(float(curve[s])) for s in range(shown))
    assert not any(key == f"loss.step.{s}" for key in values for s in range(shown, len(curve)))
    logs = np.log10(g[np.isfinite(g) & (g > 0)])
    assert values["scale.high_exponent"] == math.ceil(logs.max())
    assert values["scale.low_exponent"] == max(math.floor(logs.min()), math.ceil(logs.max()) - DepthTimeMap.decades)
    assert built.numbers["blocks"] == trace.meta.layers
    assert values["run_complete"] == 1.0  # not a watched run left unfinished (test_an_unfinished_watched_run_...)
    drawn = curve[:shown].astype(np.float64)  # the loss axis the chart shows (log for this run)
    assert values["loss_axis.log"] == 1 and values["loss_axis.low"] == pytest.approx(10.0 ** math.floor(
        math.log10(drawn.min()))) and values["loss_axis.high"] == pytest.approx(10.0 ** math.ceil(math.log10(drawn.max())))


@GROUP
def test_frame(request):
    built = built_scene(DepthTimeMap, "en", {"residual": FILES["residual"]})
    assert_last_frame_matches(built, "depth_time_map_gpt2_24", write=request.config.getoption("--set_test"))


@GROUP
def test_frame_fails_on_a_tampered_trace(request, tmp_path):
    """The tamper twin: the first block's gradient eight times larger at every record changes the frame."""
    if request.config.getoption("--set_test"):
        pytest.skip("writing control data")
    path = tmp_path / "residual.npz"
    shutil.copy(FILES["residual"], path)
    trace = Trace.load(path)
    grads = trace.arrays["out_grad_norm"].copy()
    grads[:, 0] *= 8
    trace.arrays["out_grad_norm"] = grads
    trace.save(path)
    built = frame_build(DepthTimeMap, "en", {"residual": str(path)}, check_layout=False)
    with pytest.raises(AssertionError, match="Frame no"):
        assert_last_frame_matches(built, "depth_time_map_gpt2_24")


def _tiled(tmp_path, blocks: int, records: int, every: int) -> str:
    """A run of ``blocks`` x ``records`` whose arrays are a real run's, tiled (the layout is checked, not a claim)."""
    source = Trace.load(user_like_trace_files("resnet152_50")["residual"])
    names = [f"layer{1 + 4 * i // blocks}.{i}" for i in range(blocks)]
    meta = Trace(meta={**source.meta.to_dict(), "layers": names, "blocks": blocks}, arrays={}).meta
    path = tmp_path / f"tiled_{blocks}_{records}.npz"
    Trace(meta, {"step": np.arange(records) * every, "out_grad_norm": np.resize(source["out_grad_norm"], (records, blocks)),
                 "loss_curve": np.resize(source["loss_curve"], (records - 1) * every + 1)}).save(path)
    return str(path)


@pytest.mark.parametrize("blocks, records, every", [
    (2, 2, 1), pytest.param(300, 10_000, 50, marks=pytest.mark.slow), pytest.param(160, 700, 3, marks=pytest.mark.slow)])
def test_layout_from_two_blocks_and_records_to_three_hundred_and_ten_thousand(tmp_path, blocks, records, every):
    built = frame_build(DepthTimeMap, "en", {"residual": _tiled(tmp_path, blocks, records, every)}, theme="light")
    _check(built)
    assert built.numbers["values"]["records"] == records and built.numbers["values"]["blocks"] == blocks
    labels = [m for top in built.mobjects for m in top.get_family() if isinstance(m, Text)]
    assert len(labels) < 40  # sparse: at most MAX_LABELS block names, the ticks, the title and the verdict
    assert MAX_COLUMNS == 600


def test_the_verdict_names_the_end_blocks_as_the_model_scenes_do(tmp_path):
    """Blocks ``stages.0`` ... ``stages.5``: the verdict says "stages.0 (first) ... stages.5 (last)" (short_name,
    as ModelDoesItOnlyCopy names its end blocks), never "0 (first) ... 5 (last)" (the names without their prefix)."""
    from scenes.kit.block_labels import short_name

    source = Trace.load(user_like_trace_files("resnet152_50")["residual"])
    names = [f"stages.{i}" for i in range(6)]
    path = tmp_path / "stages.npz"
    Trace(Trace(meta={**source.meta.to_dict(), "layers": names, "blocks": 6}, arrays={}).meta,
          {"step": np.arange(3), "out_grad_norm": np.resize(source["out_grad_norm"], (3, 6)),
           "loss_curve": np.resize(source["loss_curve"], 3)}).save(path)
    built = frame_build(DepthTimeMap, "en", {"residual": str(path)}, check_layout=False)
    texts = [m.original_text for top in built.mobjects for m in top.get_family() if isinstance(m, Text)]
    (verdict,) = [t for t in texts if "(first)" in t]
    assert short_name(names[0], 16) == "stages.0"
    assert "stages.0 (first)" in verdict and "stages.5 (last)" in verdict, verdict


# Two blocks with long names: the verdict named them at 16 characters each and ran past the right edge ("outside the
# frame ... spans x [-6.62, 7.44]", found by test_user_model_scenes' Hypothesis layout test).
LONG_NAMES = ["block_group_with_a_long_name_1.0", "block_group_with_a_long_name_1.1"]


@pytest.mark.parametrize("tamper", [False, True], ids=["fitted", "tamper-no-room-check"])
def test_the_verdict_stays_inside_the_frame_with_long_block_names(tmp_path, monkeypatch, tamper):
    """Long block names: the verdict's names are cut shorter (never its size) until the line fits, and the layout
    check passes; the tamper twin lets any line pass as fitting (the old one line of 16-character names) and the same
    check reports the verdict outside the frame."""
    import scenes.depth_time_map as module

    if tamper:
        monkeypatch.setattr(module, "line_width", lambda: 100.0)
    built = frame_build(DepthTimeMap, "en", tiled_traces(LONG_NAMES, tmp_path), "dark")
    if tamper:
        assert any("outside the frame" in str(p) and "(first)" in str(p) for p in built.layout_log), built.layout_log
    else:
        assert built.layout_log == []
        verdicts = [m for top in built.mobjects for m in top.get_family()
                    if isinstance(m, Text) and "(first)" in m.text]
        assert len(verdicts) == 1 and verdicts[0].text.count("…") == 2  # both names cut, one line
        assert verdicts[0].get_right()[0] <= 7.11 * 0.97


@pytest.mark.parametrize("clear", [True, False], ids=["heading-clear", "tamper-heading-at-the-map"])
def test_the_heading_clears_a_first_name_taller_than_its_row(tmp_path, monkeypatch, clear):
    """Found by the layout property test: 160 blocks with no shared prefix in Chinese, the heading (块) set 0.1 above
    the map, and the first name (0.26 tall, Noto Sans CJK), centred on a 0.02-unit row, reaching up into it. The
    twin: the heading where it was (HEADING_GAP so low that it never moves) overlaps the name."""
    import scenes.depth_time_map as depth_time_map

    if not clear:
        monkeypatch.setattr(depth_time_map, "HEADING_GAP", -1.0)
    names = ["block_group_with_a_long_name_1.0", *[f"block_group_with_a_long_name_2.{i}" for i in range(159)]]
    built = frame_build(DepthTimeMap, "zh", tiled_traces(names, tmp_path), check_layout=True)
    overlaps = [p for p in built.layout_log if p.startswith("overlap") and "'块'" in p]
    assert (overlaps == []) if clear else overlaps, built.layout_log


@pytest.mark.parametrize("fitted", [True, False], ids=["cut-to-the-room", "tamper-fixed-cut"])
def test_names_and_heading_left_of_the_map_stay_inside_the_margin(tmp_path, monkeypatch, fitted):
    """Found by the layout property test in CI: two blocks named '_0000000._000000000.{0,1}' gave a heading of 18
    wide characters ('_0000000…000000000') that reached 0.12 into the left margin. Names and heading are now cut
    (4 characters at a time) to the room left of the map; the twin cuts at the fixed length only, as before, and the
    same layout check reports the heading in the margin."""
    import scenes.depth_time_map as depth_time_map

    if not fitted:
        monkeypatch.setattr(depth_time_map, "_cut_to", lambda name, limit, room, color: depth_time_map.make_text(
            depth_time_map.middle_ellipsis(name, limit), size=SIZE_SMALL, color=color))
    built = frame_build(DepthTimeMap, "en", tiled_traces(["_0000000._000000000.0", "_0000000._000000000.1"], tmp_path),
                        check_layout=True)
    margin = [p for p in built.layout_log if p.startswith("in the 3% margin")]
    assert (built.layout_log == []) if fitted else margin, built.layout_log


@pytest.mark.parametrize("lang, unfinished", [("en", True), pytest.param("en", False, marks=pytest.mark.slow),
                                              pytest.param("es", True, marks=pytest.mark.slow),
                                              pytest.param("zh", True, marks=pytest.mark.slow)])
def test_an_unfinished_watched_run_is_said_so(tmp_path, lang, unfinished):
    """A watched run killed before its close (meta.watch.complete false; Trace.load reads its parts) is drawn as far
    as it got, and the subtitle says the run did not finish (a new user's run killed at step 40 of 100 read "(of 40)"
    like a whole run); the numbers JSON says it too; the longer line still fits (the layout check, at its size)."""
    trace = Trace.load(FILES["residual"])
    meta = Trace(meta={**trace.meta.to_dict(), "watch": {"complete": not unfinished, "schema": 2}}, arrays={}).meta
    path = tmp_path / "run.npz"
    Trace(meta, trace.arrays).save(path)
    built = frame_build(DepthTimeMap, lang, {"residual": str(path)}, check_layout=True)
    _check(built)
    texts = [m.original_text for top in built.mobjects for m in top.get_family() if isinstance(m, Text)]
    said = {"en": "unfinished run", "es": "sin terminar", "zh": "运行未完成"}[lang]
    assert any(said in t for t in texts) == unfinished, texts
    assert built.numbers["values"]["run_complete"] == (0.0 if unfinished else 1.0)


@pytest.mark.parametrize("lang, first, last", [("en", "block 0 (first)", "block 5 (last)"),
                                                pytest.param("zh", "第 0 块（第一块）", "第 5 块（最后一块）",
                                                             marks=pytest.mark.slow)])
def test_the_verdict_says_a_bare_index_as_a_block(tmp_path, lang, first, last):
    """An nn.Sequential's blocks are named "0" ... "5" (watch(nn.Sequential(...)), or a Lightning module="net"): the
    verdict read "Step 2: 0 (first) receives 1.1× the gradient of 5 (last)."; it says "block 0" now."""
    source = Trace.load(user_like_trace_files("resnet152_50")["residual"])
    names = [str(i) for i in range(6)]
    path = tmp_path / "sequential.npz"
    Trace(Trace(meta={**source.meta.to_dict(), "layers": names, "blocks": 6}, arrays={}).meta,
          {"step": np.arange(3), "out_grad_norm": np.resize(source["out_grad_norm"], (3, 6)),
           "loss_curve": np.resize(source["loss_curve"], 3)}).save(path)
    built = frame_build(DepthTimeMap, lang, {"residual": str(path)}, check_layout=True)
    _check(built)
    texts = "".join(m.original_text for top in built.mobjects for m in top.get_family() if isinstance(m, Text))
    assert first in texts and last in texts, texts
