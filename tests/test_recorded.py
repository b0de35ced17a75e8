"""Runs read from trace files: ``--trace FILE [--twin FILE]`` on every output (simulation/kinds/recorded.py).

The traces are the committed user-like runs (tests/data/model/gpt2_24: real plain and residual runs of 24 blocks
named like GPT-2's residual additions). A trace from a file is one more run kind: the checks below go through the
command line's planner (``--check``: nothing rendered) and the trace cache, and compare what a scene would read
with the file's own arrays.
"""

from __future__ import annotations

import dataclasses
import json
import logging

import numpy as np
import pytest

from simulation.cache import get_trace
from simulation.config import ConfigError, RecordedConfig, UserModelConfig
from simulation.kinds.recorded import missing, recorded_runs, run
from simulation.runkeys import RunKey
from simulation.trace import Trace

from data.make_traces import user_like_trace_files
from support import invoke

FILES = user_like_trace_files("gpt2_24")


def _without(path: str, tmp_path, *keys: str, name: str = "cut.npz") -> str:
    """A copy of the trace at ``path`` without the arrays ``keys``."""
    trace = Trace.load(path)
    out = tmp_path / name
    Trace(trace.meta, {k: v for k, v in trace.arrays.items() if k not in keys}).save(out)
    return str(out)


def test_a_trace_file_is_read_not_trained_and_the_cache_holds_its_arrays(caplog):
    """The run's "trainer" reads the file: every array is the file's, bit for bit; meta.config is the recorded
    config (its digest hashes the file's bytes), the blocks are the file's. The log says it read which file (a new
    user was told "training 8a5d… (kind=recorded ...)" for a file that nothing trained)."""
    caplog.set_level(logging.INFO, logger="simulation")
    config = RecordedConfig(path=FILES["residual"], arch="residual")
    trace = get_trace(config)
    assert f"reading {FILES['residual']} (kind=recorded arch=residual): nothing trained" in caplog.text
    assert "training" not in caplog.text
    original = Trace.load(FILES["residual"])
    assert sorted(trace.arrays) == sorted(original.arrays)
    for key, value in original.arrays.items():
        np.testing.assert_array_equal(trace[key], value, err_msg=key)
    assert trace.meta.config == config.to_dict() and trace.meta.digest == config.digest()
    assert trace.meta.layers == original.meta.layers and len(trace.meta.layers) == 24
    assert Trace.load(FILES["residual"]).meta.digest != config.digest()  # the file itself is left as it was
    caplog.clear()
    get_trace(config)  # read before: from the cache, and the log still names the file (was "cache hit 8a5d… (...)")
    assert f"reading {FILES['residual']} (kind=recorded arch=residual): from the cache, nothing trained" in caplog.text


def test_the_digest_follows_the_files_bytes(tmp_path):
    """A file that changes (a run still being recorded, a new run at the same path) is read again."""
    path = tmp_path / "run.npz"
    trace = Trace.load(FILES["residual"])
    trace.save(path)
    before = RecordedConfig(path=str(path))
    trace.arrays["loss"] = trace["loss"] * 2
    trace.save(path)
    after = RecordedConfig(path=str(path))
    assert before.digest() != after.digest() and before.source != after.source
    with pytest.raises(ConfigError, match="changed while it was read"):
        run(before)


def test_the_source_hashes_the_bytes_not_the_name(tmp_path):
    """Two copies of one file under other names have the same source (their paths still tell the runs apart)."""
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    a.write_bytes(open(FILES["residual"], "rb").read())
    b.write_bytes(open(FILES["residual"], "rb").read())
    assert RecordedConfig(path=str(a)).source == RecordedConfig(path=str(b)).source != ""


def test_the_model_experiment_reads_its_runs_from_the_files():
    runs = recorded_runs(UserModelConfig(), FILES["residual"], FILES["plain"])
    assert {name: (c.arch, c.path) for name, c in runs.items()} == {
        "residual": ("residual", FILES["residual"]), "plain": ("plain", FILES["plain"])}
    assert set(recorded_runs(UserModelConfig(), FILES["residual"], "")) == {"residual"}


@pytest.mark.parametrize("base, trace, twin, message", [
    (UserModelConfig(), "", "P", "--twin needs --trace"),
    (UserModelConfig(spec="examples/my_resnet.py:build"), "R", "", "not both"),
    (UserModelConfig(steps=3), "R", "", r"steps \(set to 3\) does not apply"),
    (UserModelConfig(seed=2), "R", "", r"seed \(set to 2\) does not apply"),
    (UserModelConfig(), "P", "", "--trace .* is of a plain network; give it as --twin"),
    (UserModelConfig(), "R", "R", "--twin .* is of a residual network; give it as --trace"),
    (UserModelConfig(), "/nonexistent/run.npz", "", "--trace: trace '/nonexistent/run.npz' does not exist"),
])
def test_what_cannot_be_drawn_together_is_refused_in_one_line(base, trace, twin, message):
    paths = {"R": FILES["residual"], "P": FILES["plain"]}
    with pytest.raises(ConfigError, match=message) as info:
        recorded_runs(base, paths.get(trace, trace), paths.get(twin, twin))
    assert "\n" not in str(info.value)


def _first_records(path: str, tmp_path, records: int) -> str:
    """A copy of the trace at ``path`` cut to its first ``records`` recorded steps (a loop recorded every=50 that
    ran fewer than 51 steps records one)."""
    trace = Trace.load(path)
    total = len(trace["step"])
    arrays = {k: (v[:records] if v.ndim and v.shape[0] == total else v) for k, v in trace.arrays.items()}
    out = tmp_path / f"first{records}.npz"
    Trace(trace.meta, arrays).save(out)
    return str(out)


def _renamed(path: str, tmp_path, layers: list[str]) -> str:
    """A copy of the trace at ``path`` whose blocks are named ``layers`` (its arrays cut to as many blocks)."""
    trace = Trace.load(path)
    blocks = len(trace.meta.layers)
    arrays = {k: (v[:, :len(layers)] if v.ndim == 2 and v.shape[1] == blocks else v) for k, v in trace.arrays.items()}
    meta = dataclasses.replace(trace.meta, layers=list(layers))
    if meta.shortcuts is not None:
        meta = dataclasses.replace(meta, shortcuts=list(meta.shortcuts)[:len(layers)])
    out = tmp_path / f"twin-{len(layers)}.npz"
    Trace(meta, arrays).save(out)
    return str(out)


def test_a_twin_of_another_model_names_the_block_that_differs(tmp_path):
    """A twin of as many blocks named otherwise names the first that differs (was "its blocks (24) are not those
    of --trace (24)", which reads as no difference at all); one of fewer blocks gives both counts."""
    layers = Trace.load(FILES["plain"]).meta.layers
    renamed = _renamed(FILES["plain"], tmp_path, ["net." + name for name in layers])
    with pytest.raises(ConfigError) as info:
        recorded_runs(UserModelConfig(), FILES["residual"], renamed)
    assert f"its block 0 is 'net.{layers[0]}', --trace's is '{layers[0]}'" in str(info.value)
    assert "plain_twin" in str(info.value) and "\n" not in str(info.value)
    shorter = _renamed(FILES["plain"], tmp_path, layers[:4])
    with pytest.raises(ConfigError, match=f"it has 4 blocks, --trace has {len(layers)}"):
        recorded_runs(UserModelConfig(), FILES["residual"], shorter)


def test_missing_names_the_run_or_the_arrays_a_scene_reads(tmp_path):
    runs = {RunKey("residual", 0): RecordedConfig(path=FILES["residual"])}
    assert missing(runs, ("residual",), ("step", "out_grad_norm")) is None
    assert "give --twin FILE" in missing(runs, ("plain", "residual"), ())
    cut = _without(FILES["residual"], tmp_path, "test_error", "error_curve")
    why = missing({RunKey("residual", 0): RecordedConfig(path=cut)}, ("residual",), ("step", "error_curve", "test_error"))
    assert why.startswith(f"--trace {cut} has no error_curve, test_error")
    assert missing({RunKey("residual", 0): UserModelConfig()}, ("plain",), ("nothing",)) is None  # trained: not asked
    two = _first_records(FILES["residual"], tmp_path, 2)
    assert missing({RunKey("residual", 0): RecordedConfig(path=two)}, ("residual",), ("step",), min_records=2) is None
    one = _first_records(FILES["residual"], tmp_path, 1)
    assert "recorded 1 step;" in missing({RunKey("residual", 0): RecordedConfig(path=one)}, ("residual",), ("step",),
                                          min_records=2)


# -- the command line ------------------------------------------------------------------------------------

def test_render_check_reads_both_files_and_trains_nothing(tmp_path):
    result = invoke("render", "GradientFlowOverTraining", "DoesItOnlyCopy", "--trace", FILES["residual"],
                    "--twin", FILES["plain"], "--check", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "0 of 2 traces would be trained, 2 read from their files" in result.output


def test_train_counts_runs_read_from_files_apart_from_trained_ones():
    """`render.py train model --set model.trace=FILE --set model.twin=FILE` reads both runs: "0 trained, 0 from the
    cache, 2 read from their files" (it said "2 trained"); the second time both come from the cache."""
    args = ("train", "model", "--set", f"model.trace={FILES['residual']}", "--set", f"model.twin={FILES['plain']}")
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    assert "traces: 0 trained, 0 from the cache, 2 read from their files" in first.stderr, first.stderr
    again = invoke(*args)
    assert "traces: 0 trained, 2 from the cache" in again.stderr and "read from" not in again.stderr


@pytest.mark.parametrize("args, message", [
    (["render", "ChainRuleProduct", "--trace", "R"],
     "ModelChainRuleProduct cannot draw this trace: it draws the run 'plain' too: give --twin FILE"),
    (["render", "Degradation", "--trace", "CUT", "--twin", "P"],
     "ModelDegradation cannot draw this trace: --trace .*cut.npz has no error_curve, test_error"),
    (["render", "IdentityHighway", "--trace", "R"],
     "scene IdentityHighway cannot draw your own model; these can: .*DoesItOnlyCopy, DepthTimeMap$"),
    # an .npz of someone else's (a torch.save zip reads the same): said as such, not "corrupt or truncated"
    (["render", "DepthTimeMap", "--trace", "NOMETA"],
     r"--trace: trace .*nometa\.npz has no metadata; it was not written by this tool$"),
    # a course over training from one record: was "ModelDoesItOnlyCopy failed: ValueError: a course needs at least
    # two finite values" after the other scenes had rendered
    (["render", "DoesItOnlyCopy", "--trace", "ONE"],
     r"ModelDoesItOnlyCopy cannot draw this trace: --trace .*first1\.npz recorded 1 step; .* needs 2 or more"),
    (["all", "--trace", "R", "--chapter", "beyond"], "leave --chapter out"),
    # was "concat joins the whole lecture: use `render.py all --concat`", said to `render.py all --concat`
    (["all", "--trace", "R", "--concat"], r"--concat joins the lecture, and runs read from files .*leave --concat out$"),
    (["explore", "--twin", "P"], "--twin needs --trace"),
])
def test_commands_refuse_what_the_files_cannot_draw(tmp_path, args, message):
    np.savez(tmp_path / "nometa.npz", step=np.arange(3), out_grad_norm=np.ones((3, 2)))
    paths = {"R": FILES["residual"], "P": FILES["plain"], "NOMETA": str(tmp_path / "nometa.npz"),
             "CUT": _without(FILES["residual"], tmp_path, "test_error", "error_curve"),
             "ONE": _first_records(FILES["residual"], tmp_path, 1)}
    result = invoke(*[paths.get(a, a) for a in args], *(["--check"] if args[0] != "explore" else []),
                    "-o", tmp_path / "out")
    assert result.exit_code != 0
    error = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and __import__("re").search(message, error[0]), result.output
    assert not (tmp_path / "out").exists()


def test_all_with_a_trace_renders_every_scene_that_can_draw_it_and_names_the_others(tmp_path):
    cut = _without(FILES["residual"], tmp_path, "test_error", "error_curve", "error")
    alone = invoke("all", "--trace", cut, "--check", "-o", tmp_path / "out")
    assert alone.exit_code == 0, alone.output
    assert "ModelChainRuleProduct left out: it draws the run 'plain' too" in alone.stderr
    assert "3 of 3 scenes would be rendered" in alone.stdout  # gradient flow (one row), only-copy, the map
    assert "0 of 1 traces would be trained, 1 read from its file" in alone.stdout
    both = invoke("all", "--trace", cut, "--twin", FILES["plain"], "--check", "-o", tmp_path / "out")
    assert both.exit_code == 0, both.output
    assert f"ModelDegradation left out: --trace {cut} has no error_curve, test_error" in both.stderr
    assert f"ModelResidualResponse left out: --trace {cut} has no error" in both.stderr
    assert "5 of 5 scenes would be rendered" in both.stdout and "2 read from their files" in both.stdout


@pytest.mark.slow
@pytest.mark.parametrize("scene", [s for s in __import__("scenes").MODEL_SCENES if s.__name__ in (
    "ModelGradientPlusOne", "ModelDoesItOnlyCopy", "DepthTimeMap")], ids=lambda s: s.__name__)
def test_a_scene_draws_files_that_hold_only_what_it_declares(tmp_path, scene):
    """What the planner checks (``needs_runs``, ``required_arrays``) is all a scene reads: it draws traces cut down
    to exactly that (a watched run holds no more than it must). Three of the scenes, the cheapest to build (~7 s);
    each of the seven passed when its declaration was written (``pytest -k declares`` after removing the filter)."""
    from dry_run import frame_build

    files = {run: _without(FILES[run], tmp_path, *(set(Trace.load(FILES[run]).arrays) - set(scene.required_arrays)),
                           name=f"{run}.npz") for run in scene.needs_runs}
    built = frame_build(scene, "en", files, check_layout=False)
    assert built.renderer.num_plays > 0
    if scene.__name__ == "ModelDoesItOnlyCopy":  # one run of no seed: no "Same course on 1 of 1 seed." under it
        from manim import Text

        texts = [getattr(m, "original_text", "") for top in built.mobjects for m in top.get_family()
                 if isinstance(m, Text)]
        assert built.numbers["values"]["seeds.total"] == 1 and any("never vanished" in t for t in texts), texts
        assert not any("Same course" in t for t in texts), texts


def _last_record_cut(path: str, tmp_path) -> str:
    """A copy of the trace at ``path`` without its last record (the per-record arrays lose their last row; the
    per-step ``loss_curve`` keeps every step): a loop that ran on past its last recorded step, as a watched run of
    40 steps recorded every 10 does (records 0 ... 30, the loss to step 39)."""
    trace = Trace.load(path)
    records = len(trace["step"])
    assert records != len(trace["loss_curve"])
    arrays = {k: (v[:-1] if v.ndim and len(v) == records else v) for k, v in trace.arrays.items()}
    out = tmp_path / "cut-last-record.npz"
    Trace(trace.meta, arrays).save(out)
    return str(out)


@pytest.mark.slow  # one scene build with 24 labelled blocks (~3 CPU s)
def test_gradient_flow_draws_a_network_without_its_twin_in_one_row(tmp_path):
    """--trace alone: ModelGradientFlowOverTraining draws the residual row only (higher up, its 24 block names under
    the identity lane), laid out without overlaps, its numbers the file's. Its first line does not speak of a twin,
    and its step counter counts to the run's last step, not to its last record (a new user's run of 30 steps
    recorded every 5 read "training step 25 of 25")."""
    from dry_run import frame_build
    from scenes.user_model import ModelGradientFlowOverTraining

    cut = _last_record_cut(FILES["residual"], tmp_path)
    built = frame_build(ModelGradientFlowOverTraining, "en", {RunKey("residual", 0): cut})
    assert built.layout_log == [], built.layout_log
    trace = Trace.load(cut)
    values, g = built.numbers["values"], trace["out_grad_norm"]
    assert values["residual.step.0.block.23.out_grad_norm"] == float(g[0, 23])
    assert not any(key.startswith("plain.") for key in values)
    steps = [int(s) for s in trace["step"]]
    assert values[f"shown_step.{len(steps) - 1}"] == steps[-1] < len(trace["loss_curve"]) - 1
    assert values["last_step"] == len(trace["loss_curve"]) - 1  # step 30 of 39: steps 0 ... 39 ran
    first = built.beats.beats[0]
    assert first.keys[0] == "n_intro_alone" and "no plain twin" in first.narration["en"][0]
    assert "and its plain twin" not in first.narration["en"][0]
