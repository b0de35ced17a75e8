"""Where each parameter's value came from, in a clip's ``.render.json`` (cli.params.job_sources; issue 38)."""

from __future__ import annotations


def test_the_sources_follow_the_layers_and_leave_the_key_alone(tmp_path, isolated_cache):
    """Without rendering (tests/test_cli.py's incremental test reads the record a render writes): the same value
    from the --config file or from --set names the one it came from, and the two jobs have the same key (the
    same clip: a source re-renders nothing)."""
    import cli_scenes
    from cli.params import RENDER_DEFAULTS, Layer
    from cli.plan import plan_render

    options = {**RENDER_DEFAULTS, "output": str(tmp_path / "out")}
    by_file = [Layer("lecture.toml", scenes={"TinySquare": {"side": 2.0}}), Layer("--set")]
    by_set = [Layer("lecture.toml"), Layer("--set", scenes={"TinySquare": {"side": "2"}})]
    jobs = [plan_render([cli_scenes.TinySquare], layers, dict(options)).jobs[0] for layers in (by_file, by_set)]
    assert [job.sources["scene"]["side"] for job in jobs] == ["lecture.toml", "--set"]
    assert [job.sources["scene"]["label"] for job in jobs] == ["default", "default"]
    assert jobs[0].key() == jobs[1].key() and jobs[0].attrs == jobs[1].attrs == {"side": 2.0}
    layers = [Layer("lecture.toml", common={"depth": 3}, experiments={"chain_rule": {"steps": 20}}),
              Layer("--set", common={"steps": "20"})]
    job = plan_render([cli_scenes.TinyTrace], layers, dict(options)).jobs[0]
    assert {k: v for k, v in job.sources["experiment"].items() if v != "default"} == {"depth": "lecture.toml",
                                                                                      "steps": "--set"}
