"""The command line: bad input, parameter precedence, incremental re-runs, settings isolation, atomic
files under interruption, concurrent use of one cache.

Renders here use the tiny scenes of tests/cli_scenes.py (well under a second each); real lecture scenes
are rendered in test_cli_slow.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest
from click.testing import CliRunner

from cli import media as cli_media
from cli import params as cli_params
from render import cli
from simulation.trace import Trace
from simulation.experiments import get_experiment
from support import CLI_TINY, ROOT, cli_env, files_under, invoke, wait_for


def fake_trace(path: Path, **meta_changes) -> Path:
    """A small, well-formed trace with the arrays `inspect` summarises (no training needed)."""
    steps, depth = 3, 2
    arrays = {"step": np.arange(steps), "loss": np.ones(steps, np.float32), "error": np.zeros(steps, np.float32),
              "test_error": np.zeros(steps, np.float32), "grad_norm": np.full((steps, depth), 0.5),
              "nonfinite": np.zeros((steps, depth), np.int64)}
    return Trace({"config": {"depth": depth}, "digest": "0" * 16, **meta_changes}, arrays).save(path)


# -- bad input: one line, non-zero exit, nothing written ------------------------------------------

def _corrupt(tmp: Path) -> Path:
    (tmp / "corrupt.npz").write_bytes(b"PK\x03\x04 this is not a zip archive")
    return tmp / "corrupt.npz"


def _truncated(tmp: Path) -> Path:
    data = fake_trace(tmp / "whole.npz").read_bytes()
    (tmp / "truncated.npz").write_bytes(data[: len(data) // 2])
    return tmp / "truncated.npz"


def _toml(text: str):
    def make(tmp: Path) -> Path:
        (tmp / "lecture.toml").write_text(text)
        return tmp / "lecture.toml"
    return make


def _a_file(tmp: Path) -> Path:
    (tmp / "a_file").write_text("not a folder")
    return tmp / "a_file"


def _parts_folder(tmp: Path) -> Path:
    """What a watched run killed before its first consolidation leaves: ``run.npz.parts/`` and no ``run.npz``."""
    (tmp / "run.npz.parts").mkdir()
    return tmp / "run.npz.parts"


R = ["render", "cli_scenes:TinyTrace"]
BAD_INPUTS = [
    # (id, command, exit code, message); "{out}" is the output folder, callables make a file first
    ("unknown scene", ["render", "NoSuchScene"], 1, "unknown scene 'NoSuchScene'"),
    ("unknown scene class", ["render", "cli_scenes:NoSuch"], 1, "has no Manim Scene class 'NoSuch'"),
    ("unknown scene module", ["render", "no_such_module:Scene"], 1, "cannot import no_such_module"),
    ("unknown experiment", ["train", "no_such_experiment"], 1, "unknown experiment 'no_such_experiment'"),
    ("unknown key", [*R, "--set", "nosuch=1"], 1, "unknown parameter 'nosuch'"),
    ("key of another experiment", [*R, "--set", "depths=8"], 1, "is not used by the experiments being run"),
    ("unknown scope", [*R, "--set", "nosuch.depth=3"], 1, "'nosuch' is neither an experiment"),
    ("no equals sign", [*R, "--set", "depth"], 1, "--set expects key=value"),
    ("wrong type", [*R, "--set", "depth=three"], 1, "depth must be int, got 'three'"),
    ("depth 0", [*R, "--set", "depth=0"], 1, "depth must be between 1 and"),
    ("negative lr", [*R, "--set", "lr=-0.1"], 1, "lr must be a finite number > 0"),
    ("NaN lr", [*R, "--set", "lr=nan"], 1, "lr must be a finite number > 0 and <= 1e+06; got nan"),
    ("absurd width", [*R, "--set", "width=10000000"], 1, "width must be between 1 and"),
    ("zero steps", [*R, "--set", "steps=0"], 1, "steps must be between 1 and"),
    ("huge seed", ["train", "layernorm", "--set", "seed=99999999999999999999"], 1, "seed must be between 0 and"),
    ("momentum 1", [*R, "--set", "momentum=1"], 1, "momentum must be in [0, 1)"),
    ("unknown activation", [*R, "--set", "activation=softmax"], 1, "activation must be one of"),
    ("empty list", [*R, "--set", "vanishing.depths=,"], 1, "depths must hold at least one value"),
    ("scene key unknown", ["render", "cli_scenes:TinySquare", "--set", "TinySquare.nosuch=1"], 1,
     "unknown parameter 'nosuch' of scene TinySquare"),
    ("scene key wrong type", ["render", "cli_scenes:TinySquare", "--set", "TinySquare.side=big"], 1,
     "TinySquare.side must be float, got 'big'"),
    ("scene key NaN", ["render", "cli_scenes:TinySquare", "--set", "TinySquare.side=nan"], 1,
     "TinySquare.side must be a finite number"),
    ("scene key for train", ["train", "chain_rule", "--set", "TinySquare.side=2"], 1, "is neither an experiment"),
    ("unknown format", [*R, "--format", "avi"], 2, "Invalid value for '--format'"),
    ("unknown quality", [*R, "--quality", "z"], 2, "Invalid value for '--quality'"),
    ("unknown language", [*R, "--lang", "fr"], 2, "Invalid value for '--lang'"),
    ("language without a catalog", [*R, "--lang", "de"], 2,
     "no catalog for 'de': start one with `render.py i18n init de`"),
    ("not a language code", [*R, "--lang", "Deutsch"], 2, "'Deutsch' is not one of 'en', 'zh'"),
    ("zero jobs", [*R, "--jobs", "0"], 2, "Invalid value for '--jobs'"),
    ("voice swallows the scene", ["render", "--voice", "IdentityHighway"], 2,
     "'IdentityHighway' is a scene, not a voice: put the scene first (render IdentityHighway --voice)"),
    ("transparent mp4", [*R, "--transparent"], 1, "mp4 has no alpha channel"),
    ("concat of stills", ["all", "--concat", "--format", "png"], 1, "--concat joins videos"),
    ("output is a file", [*R, "--output", _a_file], 2, "is a file"),
    ("output under a file", [*R, "--output", lambda t: _a_file(t) / "sub"], 1, "cannot create output folder"),
    ("missing config", [*R, "--config", "no_such.toml"], 1, "config file 'no_such.toml' does not exist"),
    ("config not TOML", [*R, "--config", _toml("depth = = 3")], 1, "is not valid TOML"),
    ("config unknown table", [*R, "--config", _toml("[paramz]\ndepth = 3")], 1, "unknown entry 'paramz'"),
    ("config wrong type", [*R, "--config", _toml("[params]\ndepth = 3.5")], 1, "depth must be int, got 3.5"),
    ("config bad quality", [*R, "--config", _toml("[render]\nquality = 'best'")], 1, "quality must be one of"),
    ("config unknown scene", [*R, "--config", _toml("[scenes.NoSuch]\nx = 1")], 1, "unknown scene 'NoSuch'"),
    ("config unknown experiment", [*R, "--config", _toml("[experiments.nosuch]\ndepth = 1")], 1,
     "unknown experiment 'nosuch'"),
    ("missing trace", ["inspect", "no_such.npz"], 1, "does not exist"),
    ("parts folder given", ["inspect", _parts_folder], 2,
     "run.npz.parts' is the parts folder of a watched run (killed, or still recording): give the trace '"),
    ("parts folder as --trace", ["render", "DepthTimeMap", "--trace", _parts_folder], 2,
     "run.npz.parts' is the parts folder of a watched run"),
    ("corrupt trace", ["inspect", _corrupt], 1, "is corrupt or truncated"),
    ("truncated trace", ["inspect", _truncated], 1, "is corrupt or truncated"),
    ("old-schema trace", ["inspect", lambda t: fake_trace(t / "old.npz", schema=0)], 1, "has schema version 0"),
    ("trace without arrays", ["inspect", lambda t: Trace({"config": {}}, {"step": np.arange(2)}).save(t / "x.npz")],
     1, "lacks what a summary needs"),
    ("trace without records", ["inspect", lambda t: Trace({"config": {}}, {"step": np.arange(0)}).save(t / "x.npz")],
     1, "has no records"),
    ("negative seed", ["train", "vanishing", "--set", "seed=-1"], 1, "seed must be between 0 and"),
    ("two seeds", ["train", "vanishing", "--seed", "3", "--set", "seed=4"], 1, "--seed 3 and seed=4"),
    ("empty list item", ["train", "vanishing", "--set", "depths=8,,20"], 1, "depths has an empty item in"),
    ("non-ASCII digits", ["train", "vanishing", "--set", "depth=\uff11\uff12"], 1, "depth must be int"),
    ("path as a key", [*R, "--set", "../../etc=1"], 1, "a key is NAME or SCOPE.NAME"),
    ("--set for an experiment not run", ["render", "ChainRuleProduct", "--set", "degradation.depth=4"], 1,
     "this command runs no scene of experiment degradation (its experiments: chain_rule)"),
    ("--set for a scene not rendered", ["render", "ChainRuleProduct", "--set", "IdentityHighway.projection_factor=3"],
     1, "scene IdentityHighway is not rendered by this command"),
    ("scene knob out of range", ["render", "IdentityHighway", "--set", "IdentityHighway.projection_factor=-5"], 1,
     "IdentityHighway.projection_factor must be between 1 and 8; got -5"),
    ("run too large for memory", ["train", "chain_rule", "--set", "depth=1000", "--set", "width=4096"], 1,
     "over the memory budget"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_is_one_line_and_writes_nothing(case, tmp_path, isolated_cache, monkeypatch):
    _, command, code, message = case
    monkeypatch.chdir(tmp_path)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    args = [str(a(inputs)) if callable(a) else a for a in command]
    out = tmp_path / "out"
    if args[0] in ("render", "all") and "--output" not in args:
        args += ["--output", str(out)]
    before = files_under(tmp_path)
    result = invoke(*args)
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit)  # handled, not a traceback
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert message in lines[0]
    assert result.stdout == ""
    assert files_under(tmp_path) == before  # no output, no stray temporary file
    assert files_under(isolated_cache) == []  # nothing trained, nothing cached


def test_the_bad_input_check_can_fail(tmp_path, isolated_cache):
    """A valid command is not rejected: the assertions above would catch a command that writes."""
    result = invoke("list", "--set", "depth=3")
    assert result.exit_code == 0 and "depth=3 (int, default 10)" in result.stdout


def test_unwritable_output_folder(tmp_path, isolated_cache):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    result = invoke(*R, "--output", locked / "out")
    assert result.exit_code == 1 and "is not writable" in result.stderr
    assert files_under(locked) == []


# -- parameters ---------------------------------------------------------------------------------

def _listing(*args: str) -> dict:
    result = invoke("list", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_list_shows_every_scene_and_experiment_with_types_and_defaults():
    import scenes
    from simulation.experiments import EXPERIMENTS

    listing = _listing()
    assert [s["name"] for s in listing["scenes"]] == [s.__name__ for s in scenes.SCENES_IN_ORDER]
    assert set(listing["experiments"]) == set(EXPERIMENTS)
    for name, exp in EXPERIMENTS.items():
        for key, (default, kind) in exp.params().items():
            entry = listing["experiments"][name]["params"][key]
            assert entry["type"] == kind and entry["value"] == entry["default"]
    human = invoke("list").stdout
    assert all(s.__name__ in human for s in scenes.SCENES_IN_ORDER) and all(e in human for e in EXPERIMENTS)


def test_precedence_default_then_file_then_command_line(tmp_path):
    config = tmp_path / "lecture.toml"
    config.write_text("[params]\nsteps = 30\nlr = 1\n[experiments.chain_rule]\ndepth = 4\nseed = 5\n")
    listing = _listing("--config", config, "--set", "steps=40", "--set", "seed=6")

    def value(exp, key):
        return listing["experiments"][exp]["params"][key]["value"]

    assert value("chain_rule", "steps") == 40  # command line beats file
    assert value("residual_response", "steps") == 40
    assert value("chain_rule", "depth") == 4  # file beats default
    assert value("residual_response", "depth") == listing["experiments"]["residual_response"]["params"]["depth"]["default"]
    assert value("chain_rule", "lr") == 1.0 and isinstance(value("chain_rule", "lr"), float)  # TOML 1 -> float
    assert value("chain_rule", "seed") == 6  # a common key on the command line beats a scoped key in the file
    scoped = _listing("--set", "depth=5", "--set", "chain_rule.depth=6")
    assert scoped["experiments"]["chain_rule"]["params"]["depth"]["value"] == 6
    assert scoped["experiments"]["residual_response"]["params"]["depth"]["value"] == 5


def test_list_says_where_each_value_comes_from(tmp_path):
    """Each parameter's source (cli.params.experiment_sources / scene_sources) follows the precedence its value
    follows: --set over the file over the default, a later layer's common key over an earlier layer's scoped one;
    --explain prints it. The twin: the same layers in the other order name the other source."""
    from cli.params import Layer, experiment_sources

    config = tmp_path / "lecture.toml"
    config.write_text("[params]\nsteps = 30\n[experiments.chain_rule]\ndepth = 4\nseed = 5\n"
                      "[scenes.IdentityHighway]\nprojection_factor = 3\n")
    listing = _listing("--config", config, "--set", "steps=40", "--set", "seed=6")

    def source(exp, key):
        return listing["experiments"][exp]["params"][key]["source"]

    assert (source("chain_rule", "steps"), source("chain_rule", "depth"), source("chain_rule", "seed"),
            source("chain_rule", "lr"), source("residual_response", "depth")) == (
        "--set", str(config), "--set", "default", "default")
    highway = next(s for s in listing["scenes"] if s["name"] == "IdentityHighway")
    assert highway["params"]["projection_factor"] == {"type": "int", "default": 2, "value": 3, "source": str(config)}
    human = invoke("list", "--config", config, "--set", "steps=40", "--explain").stdout
    assert "projection_factor=3 (int, default 2, from " + str(config) in human and "steps=40 (int, " in human
    assert "from --set" in human and "from --set" not in invoke("list", "--config", config).stdout
    file_layer, set_layer = Layer("lecture.toml", experiments={"chain_rule": {"depth": 4}}), Layer("--set", common={"depth": 5})
    assert experiment_sources([file_layer, set_layer], "chain_rule", ["depth"]) == {"depth": "--set"}
    assert experiment_sources([set_layer, file_layer], "chain_rule", ["depth"]) == {"depth": "lecture.toml"}


def test_scene_parameters_are_typed_and_layered(tmp_path, monkeypatch):
    import cli_scenes

    layers = [cli_params.parse_sets(["TinySquare.side=2", "TinySquare.label=B"], [], ["TinySquare"])]
    assert cli_params.scene_params(cli_scenes.TinySquare) == {"side": (1.0, "float"), "label": ("A", "str")}
    assert cli_params.scene_overrides(layers, cli_scenes.TinySquare) == {"side": 2.0, "label": "B"}
    file_layer = cli_params.Layer("f", scenes={"TinySquare": {"side": 3, "label": "C"}})
    assert cli_params.scene_overrides([file_layer, *layers], cli_scenes.TinySquare)["side"] == 2.0
    assert cli_params.scene_overrides([*layers, file_layer], cli_scenes.TinySquare)["label"] == "C"


def test_render_options_from_file_yield_to_the_command_line(tmp_path, isolated_cache):
    config = tmp_path / "lecture.toml"
    config.write_text('[render]\nquality = "m"\nformat = "png"\nlang = "zh"\n')
    out = tmp_path / "out"
    result = invoke("render", "cli_scenes:TinySquare", "--config", config, "-q", "l", "-o", out)
    assert result.exit_code == 0, result.output
    still = out / "480p15" / "zh" / "TinySquare.png"  # quality from the command line, format and lang from the file
    assert str(still) in result.stdout and still.is_file()


def test_langs_and_themes_match_the_scenes():
    """cli/params.py repeats the languages and the theme names so that --help loads neither numpy nor manim."""
    from narration.text import LANGS as NARRATION_LANGS
    from scenes.kit.style import LANGS
    from scenes.kit.theme import THEME_NAMES

    assert tuple(LANGS) == tuple(NARRATION_LANGS) == cli_params.LANGS
    assert THEME_NAMES == cli_params.THEMES


# -- incremental --------------------------------------------------------------------------------

def test_no_op_rerun_renders_nothing_and_changes_render_only_what_changed(tmp_path, monkeypatch):
    out = tmp_path / "out"
    args = ["render", "cli_scenes:TinySquare", "cli_scenes:TinyTrace", *CLI_TINY, "-o", out]
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    assert "traces: 2 to train, 0 from the cache" in first.stderr
    folder = out / "480p15" / "en"
    expected = {f"{s}{ext}" for s in ("TinySquare", "TinyTrace")
                for ext in (".mp4", ".srt", ".numbers.json", ".mp4.render.json", ".beats.json", ".beat-00.mp4")}
    assert {p.name for p in folder.iterdir()} == expected
    stamps = {p: p.stat().st_mtime_ns for p in folder.iterdir()}
    record = json.loads((folder / "TinyTrace.mp4.render.json").read_text(encoding="utf-8"))
    chain_rule = {name: "default" for name in get_experiment("chain_rule").params()} | {"steps": "--set", "depth": "--set"}
    assert record["sources"] == {"experiment": chain_rule, "scene": {}}  # where each value came from (issue 38)

    calls = []
    real = cli_media.render_job
    monkeypatch.setattr(cli_media, "render_job", lambda *a, **k: calls.append(a[0].scene) or real(*a, **k))
    second = invoke(*args)
    assert second.exit_code == 0 and calls == [], second.stderr
    assert "wrote: nothing" in second.stdout and "scenes: 0 to render, 2 up to date" in second.stderr
    assert {p: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps

    # A scene-only change: that scene is rendered again, nothing is trained.
    third = invoke(*args, "--set", "TinySquare.side=2")
    assert third.exit_code == 0 and calls == ["TinySquare"]
    record = json.loads((folder / "TinySquare.mp4.render.json").read_text(encoding="utf-8"))
    assert record["sources"] == {"experiment": {}, "scene": {"side": "--set", "label": "default"}}
    assert "traces" not in third.stderr


@pytest.mark.slow  # two more renders; the default run's test above covers the record and the scene-only change
def test_a_language_change_reuses_the_traces_and_an_edited_file_is_rendered_again(tmp_path, monkeypatch):
    out = tmp_path / "out"
    args = ["render", "cli_scenes:TinySquare", "cli_scenes:TinyTrace", *CLI_TINY, "-o", out]
    assert invoke(*args).exit_code == 0
    folder = out / "480p15" / "en"
    calls = []
    real = cli_media.render_job
    monkeypatch.setattr(cli_media, "render_job", lambda *a, **k: calls.append(a[0].scene) or real(*a, **k))

    # Language is a scene-only change too: traces come from the cache.
    fourth = invoke("render", "cli_scenes:TinyTrace", *CLI_TINY, "-o", out, "--lang", "zh")
    assert fourth.exit_code == 0 and "traces: 0 to train, 2 from the cache" in fourth.stderr
    numbers = json.loads((out / "480p15" / "zh" / "TinyTrace.numbers.json").read_text())
    assert numbers["lang"] == "zh" and "grad_norm.0.0" in numbers["values"]

    # A file edited behind our back is noticed: its record no longer vouches for it.
    (folder / "TinySquare.srt").write_text("edited")
    fifth = invoke(*args)  # both English clips are otherwise up to date
    assert fifth.exit_code == 0 and calls == ["TinyTrace", "TinySquare"]


def test_a_simulation_change_trains_only_the_runs_it_changes(isolated_cache):
    from simulation.experiments import EXPERIMENTS

    if "depths" not in EXPERIMENTS["vanishing"].params():
        pytest.skip("the vanishing experiment has no depths parameter")
    args = ["train", "vanishing", "--set", "steps=20", "--set", "activations=sigmoid"]
    first = invoke(*args, "--set", "depths=2,3")
    assert first.exit_code == 0 and "traces: 4 trained, 0 from the cache" in first.stderr
    second = invoke(*args, "--set", "depths=2,4")
    assert second.exit_code == 0 and "traces: 2 trained, 2 from the cache" in second.stderr


def test_the_key_covers_scene_source_and_traces(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    module = tmp_path / "my_scene.py"
    module.write_text("from manim import Scene\nclass Mine(Scene):\n    def construct(self):\n        pass\n")
    scene = cli_media.load_scene("my_scene", "Mine")
    before = cli_media.source_digest(scene)
    assert cli_media.source_digest(scene) == before  # stable
    module.write_text(module.read_text() + "# an edit\n")
    assert cli_media.source_digest(scene) != before  # the file is read, not the loaded class
    job = cli_media.RenderJob("Mine", "my_scene", {}, {}, {"run": "a" * 16}, before, "l", "en", "mp4", False, "/x")
    same = cli_media.RenderJob(**{**job.__dict__, "params": {"depth": "3"}, "output": "/y"})
    assert job.key() == same.key()  # raw parameters and the folder do not matter; traces do
    for change in ({"traces": {"run": "b" * 16}}, {"quality": "m"}, {"lang": "zh"}, {"format": "webm"},
                   {"attrs": {"side": 2.0}}, {"source": "0" * 16}, {"transparent": True}):
        assert cli_media.RenderJob(**{**job.__dict__, **change}).key() != job.key(), change


# -- settings stay with their scene -----------------------------------------------------------

def test_settings_do_not_leak_between_scenes_in_one_process(tmp_path):
    import cli_scenes
    from manim import config, logger

    watched = ("format", "pixel_height", "pixel_width", "frame_rate", "background_opacity", "media_dir",
               "video_dir", "tex_dir", "text_dir", "partial_movie_dir", "verbosity", "progress_bar")
    snapshot = {k: config[k] for k in watched}
    level = logger.level
    out = tmp_path / "out"
    still = invoke("render", "cli_scenes:TinySquare", "--format", "png", "-q", "m", "--transparent",
                   "--set", "TinySquare.side=3", "-o", out)
    assert still.exit_code == 0, still.output
    assert {k: config[k] for k in watched} == snapshot and logger.level == level
    assert cli_scenes.TinySquare.side == 1.0  # the class is never modified: a subclass carries the values
    video = invoke("render", "cli_scenes:TinySquare", "-o", out)
    assert video.exit_code == 0, video.output
    with av.open(str(out / "480p15" / "en" / "TinySquare.mp4")) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height, stream.average_rate) == (854, 480, 15)
        assert stream.codec_context.pix_fmt == "yuv420p"  # opaque, although the still before was transparent
        assert stream.frames > 1  # a video, although the render before was a still
    assert (out / "720p30" / "en" / "TinySquare.png").is_file()


def test_scene_config_refuses_keys_manim_would_drop():
    with pytest.raises(ValueError, match="not Manim config keys: no_such_key"):
        with cli_media.scene_config({"no_such_key": 1}):
            pass


def test_a_scene_without_animations_is_no_video_and_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    result = invoke("render", "cli_scenes:TinyStill", "-o", out)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith("Error: TinyStill failed: RuntimeError: TinyStill has no play calls")
    assert files_under(out) == []  # the private media folder is gone too
    assert invoke("render", "cli_scenes:TinyStill", "-o", out, "--format", "png").exit_code == 0


# -- atomic files, interruption, concurrency ---------------------------------------------------


def test_a_write_killed_midway_leaves_no_final_file(tmp_path):
    target = tmp_path / "trace.npz"
    script = (f"import sys, time\nfrom simulation.atomic_io import atomic_write\n"
              f"with atomic_write({str(target)!r}) as tmp:\n"
              f"    tmp.write_bytes(b'half' * 1000)\n    print('writing', flush=True)\n    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    proc.kill()
    proc.wait()
    assert not target.exists()
    leftovers = list(tmp_path.iterdir())
    assert len(leftovers) == 1 and leftovers[0].name.startswith(".trace.npz.")  # hidden, never loaded


# SIGTERM raises Terminated where Ctrl-C raises KeyboardInterrupt (cli/options.py): the same unwinding. The default
# run sends the two that differ (a kill cannot clean up), CI all three.
RENDER_PY = "import runpy\nrunpy.run_path('render.py', run_name='__main__')\n"  # `python render.py ARGS...`


@pytest.mark.xdist_group("manim-probes")  # the worker that holds the Manim probe server (tests/forked.py)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)],
                         ids=["kill", "ctrl-c", "sigterm"])
def test_a_render_interrupted_midway_leaves_no_final_file(tmp_path, isolated_cache, sig):
    from forked import start_forked

    out = tmp_path / "out"
    folder = out / "480p15" / "en"
    # `python render.py render ...` in a child of tests/forked.py's Manim server (Manim imported, nothing of this
    # project's), with Python's own SIGINT handler: a shell without job control starts background jobs with SIGINT
    # ignored, and Python keeps an inherited SIG_IGN (CI started that way saw Ctrl-C do nothing); the server starts
    # with the default.
    proc = start_forked(RENDER_PY, cwd=ROOT, env=cli_env(isolated_cache), server="manim",
                        argv=["render.py", "render", "cli_scenes:TinySlow", "-o", str(out)])
    # Wait until Manim is writing the segment of the ten-minute animation, then interrupt.
    wait_for(lambda: any(folder.glob(".render-*/partial_movie_dir/*.mp4")))
    os.kill(proc.pid, sig)
    done = proc.wait(timeout=60)
    assert done.returncode != 0
    assert not list(folder.glob("TinySlow*"))  # no video, no record at a final path
    assert not list((isolated_cache / "manim").rglob("*.mp4"))  # the half segment never reached the cache
    if sig in (signal.SIGINT, signal.SIGTERM):
        assert done.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig], done.stderr
        assert done.stderr.strip().splitlines()[-1] in ("Aborted!", "Terminated"), done.stderr
        assert not list(folder.glob(".render-*"))  # Ctrl-C and SIGTERM clean up their private folder
        assert not out.exists()  # and the output folders the render made (was: out/480p15/en/ left, empty)
    else:
        assert list(folder.glob(".render-*"))  # a kill cannot; the next render in that folder does
        result = invoke("render", "cli_scenes:TinySquare", "-o", out)
        assert result.exit_code == 0 and not list(folder.glob(".render-*"))


def test_inspect_prints_metadata_and_summary(isolated_cache):
    trained = json.loads(invoke("train", "chain_rule", *CLI_TINY, "--json").stdout)
    path = next(iter(trained["runs"].values()))["trace"]
    result = invoke("inspect", path)
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["meta"]["config"]["depth"] == 3 and report["meta"]["config"]["steps"] == 20
    assert report["arrays"]["grad_norm"][1] == 3  # [records, blocks]
    assert report["summary"]["final_step"] == 19


def test_train_ends_with_the_files_it_wrote(isolated_cache):
    first = invoke("train", "chain_rule", *CLI_TINY)
    assert first.exit_code == 0
    written = first.stdout.split("wrote:")[1].split()
    assert len(written) == 2 and all(Path(p).parent == isolated_cache and Path(p).is_file() for p in written)
    second = invoke("train", "chain_rule", *CLI_TINY)
    assert "wrote: nothing" in second.stdout and "traces: 0 trained, 2 from the cache" in second.stderr


def test_train_summary_survives_a_diverged_run(isolated_cache):
    """A diverged run has no finite final loss: the summary says n/a and where it diverged."""
    result = invoke("train", "exploding", "--set", "steps=12", "--set", "depth=6", "--set", "width=16")
    assert result.exit_code == 0, result.output
    diverged = [line for line in result.stdout.splitlines() if "diverged at step" in line]
    assert diverged and all("loss n/a" in line for line in diverged)


def test_a_scene_parameter_without_its_scene_prefix_is_explained(isolated_cache, tmp_path):
    result = invoke("render", "IdentityHighway", "--set", "projection_factor=3", "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert "belongs to scene IdentityHighway: set IdentityHighway.projection_factor" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["train", "chain_rule", *CLI_TINY], [*R, "--check"]], ids=["train", "render"])
@pytest.mark.parametrize("cache", ["a file", "under a file"])
def test_an_unusable_trace_cache_is_refused_before_any_training(command, cache, tmp_path, monkeypatch):
    """$RESIDUAL_CACHE that is a file, or lies under one, is one line and exit 1 before anything trains."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    monkeypatch.setenv("RESIDUAL_CACHE", str(blocker if cache == "a file" else blocker / "traces"))
    monkeypatch.chdir(tmp_path)
    result = invoke(*command, "--output", str(tmp_path / "out")) if command[0] == "render" else invoke(*command)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "trace cache ($RESIDUAL_CACHE)" in lines[0], result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"] and blocker.read_text() == "not a folder"


def test_a_corrupt_cached_trace_is_counted_as_to_train_and_warned_about_once(isolated_cache, caplog):
    """A cached trace that cannot be read is reported once, counted among the runs to train (not 'from the
    cache'), and replaced by a readable one."""
    first = invoke("train", "chain_rule", *CLI_TINY)
    assert first.exit_code == 0, first.output
    victim = Path(first.stdout.split("wrote:")[1].split()[0])
    victim.write_bytes(b"PK\x03\x04 this is not a zip archive")
    caplog.clear()
    again = invoke("train", "chain_rule", *CLI_TINY)
    assert again.exit_code == 0, again.output
    assert caplog.text.count("ignoring cached trace") == 1, caplog.text
    assert "traces: 1 trained, 1 from the cache" in again.stderr
    assert Trace.load(victim).meta.digest == victim.stem


BUDGET_PROBE = """
import json
from click.testing import CliRunner
from render import cli  # building the options' --help reads $RESIDUAL_MEMORY_BUDGET
out = {}
for name, args in (("list", ["list"]), ("check", ["render", "ChainRuleProduct", "--check"])):
    result = CliRunner().invoke(cli, args)
    out[name] = {"code": result.exit_code, "stderr": result.stderr,
                 "exception": type(result.exception).__name__ if result.exception else None}
print(json.dumps(out))
"""


# One bad value by default (each costs a fresh interpreter importing render.py); CI tries all three.
@pytest.mark.xdist_group("manim-probes")  # the worker that holds the Manim probe server (tests/forked.py)
@pytest.mark.parametrize("budget", ["abc", pytest.param("-1", marks=pytest.mark.slow),
                                    pytest.param("1.5", marks=pytest.mark.slow)])
def test_a_bad_memory_budget_is_one_line_and_list_still_works(budget, tmp_path):
    """$RESIDUAL_MEMORY_BUDGET is read while --help text is built, when render.py is imported: in a fresh
    interpreter with a bad value, the import must work, `list` exit 0 and a render say why in one line (exit 1),
    never a traceback (an exception other than click's exit). One interpreter per value runs both commands."""
    from forked import run_forked

    env = {**os.environ, "RESIDUAL_MEMORY_BUDGET": budget, "RESIDUAL_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": str(ROOT)}  # run in tmp_path: `render --check` reads the default output folder, media/
    # a child of tests/forked.py's Manim server: Manim loaded, nothing of this project's (render.py is imported here)
    done = run_forked(BUDGET_PROBE, cwd=tmp_path, env=env, server="manim")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    listing, check = json.loads(done.stdout.splitlines()[-1]).values()
    assert listing["code"] == 0 and listing["exception"] in (None, "SystemExit"), listing
    assert "Traceback" not in listing["stderr"], listing["stderr"]
    lines = check["stderr"].strip().splitlines()
    assert check["code"] == 1 and check["exception"] == "SystemExit" and len(lines) == 1, check
    assert lines[0].startswith("Error: RESIDUAL_MEMORY_BUDGET") and lines[0].endswith(f"got {budget!r}"), lines


@pytest.mark.parametrize("command", ["page", "slides"])
def test_page_and_slides_offer_no_option_they_ignore(command):
    """The page and the deck play opaque mp4 clips whatever --transparent says, so they do not offer it (issue 34);
    `render` and `all`, whose clips it changes, do."""
    assert "--transparent" not in invoke(command, "--help").stdout
    refused = invoke(command, "cli_scenes:TinyTrace", "--transparent", "--check")
    assert refused.exit_code == 2 and "No such option '--transparent'" in refused.output, refused.output
    for renders in ("render", "all"):
        assert "--transparent" in invoke(renders, "--help").stdout
    assert invoke("render", "cli_scenes:TinyTrace", "--transparent", "--format", "webm", "--check").exit_code == 0
