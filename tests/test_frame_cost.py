"""scenes.kit.frame_cost: cheaper frames must be the same frames.

Example::

    pytest tests/test_frame_cost.py -q -n 0

``Restyle`` is checked against Manim's own ``.animate`` (Transform) at every alpha, bit for bit;
``draw_first`` is checked on Hypothesis-generated layouts (random overlapping shapes in a random order): the
frame drawn after it moves parts equals the frame before, and the moving set of an animation shrinks when a
still part is moved in front of it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from manim import BLUE, RED, Circle, FadeIn, Rectangle, Scene, Square, Text, VGroup, tempconfig

from manim.constants import RendererType

from scenes.kit import frame_cost
from scenes.kit.frame_cost import Restyle, boxes_overlap, draw_first

from support import examples

SMALL = {"pixel_width": 192, "pixel_height": 108, "frame_rate": 15, "dry_run": True, "verbosity": "ERROR",
         "progress_bar": "none"}
STYLE = ("points", "fill_rgbas", "stroke_rgbas", "background_stroke_rgbas", "stroke_width", "background_stroke_width",
         "sheen_factor")


def _group(n: int = 4) -> VGroup:
    return VGroup(*[Rectangle(width=0.5, height=0.3, fill_color=BLUE, fill_opacity=0.1 * k, stroke_width=k)
                    .shift([k - 2, 0, 0]) for k in range(n)])


def _state(group: VGroup) -> list[list[np.ndarray]]:
    return [[np.array(getattr(m, a), dtype=float) for a in STYLE] for m in group]


@pytest.mark.parametrize("rate", ["linear", "smooth"])
def test_restyle_matches_animate_bit_for_bit(rate):
    from manim import linear, smooth

    rate_func = {"linear": linear, "smooth": smooth}[rate]
    levels = [0.9, 0.0, 0.35, 0.6]
    reference, ours = _group(), _group()
    animations = [m.animate.set_fill(opacity=levels[k]).set_stroke(width=2 + 3 * levels[k], opacity=levels[k])
                  for k, m in enumerate(reference)]
    animations = [a.build() for a in animations]
    restyle = Restyle(ours, lambda m, k: m.set_fill(opacity=levels[k]).set_stroke(width=2 + 3 * levels[k],
                                                                                  opacity=levels[k]))
    for anim in [*animations, restyle]:
        anim.rate_func = rate_func
        anim.begin()
    for alpha in np.linspace(0, 1, 17):
        for anim in [*animations, restyle]:
            anim.interpolate(alpha)
        for ref, got in zip(_state(reference), _state(ours)):
            for a, b in zip(ref, got):
                assert np.array_equal(a, b), alpha
    for anim in [*animations, restyle]:
        anim.finish()
    for ref, got in zip(_state(reference), _state(ours)):
        assert all(np.array_equal(a, b) for a, b in zip(ref, got))


def _frame(scene: Scene) -> np.ndarray:
    camera = scene.renderer.camera
    camera.reset()
    camera.capture_mobjects(scene.mobjects)
    return camera.pixel_array.copy()


shapes = st.lists(st.tuples(st.sampled_from(["square", "circle", "text"]),
                            st.floats(-6, 6), st.floats(-3.5, 3.5), st.floats(0.2, 2.5), st.floats(0, 1)),
                  min_size=2, max_size=7)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=shapes, pick=st.lists(st.integers(0, 6), max_size=5))
def test_draw_first_never_changes_a_pixel(layout, pick):
    with tempconfig(SMALL):
        scene = Scene()
        mobs = []
        for kind, x, y, size, opacity in layout:
            if kind == "text":
                mob = Text("ab", font_size=24 * size)
            else:
                mob = (Square(size) if kind == "square" else Circle(size / 2))
                mob.set_fill(RED, opacity=opacity).set_stroke(BLUE, width=6)
            mobs.append(mob.move_to([x, y, 0]))
        scene.add(VGroup(*mobs[:2]), *mobs[2:])  # parts may sit inside a group
        before = _frame(scene)
        parts = [mobs[k % len(mobs)] for k in pick]
        moved = draw_first(scene, *parts)
        assert _frame(scene).tobytes() == before.tobytes()
        for part in moved:  # a moved part overlaps nothing now drawn before it
            order = scene.get_mobject_family_members()
            first = min(order.index(m) for m in part.family_members_with_points())
            assert all(m in part.get_family() or any(m in p.get_family() for p in moved)
                       for m in order[:first] if len(m.points))


def test_draw_first_moves_disjoint_parts_and_keeps_overlapping_ones():
    with tempconfig(SMALL):
        scene = Scene()
        moving = Square(1).move_to([-3, 0, 0])
        far = Text("far").move_to([4, 2, 0])
        over = Circle(0.5).move_to([-3, 0.2, 0])  # drawn over the moving square
        scene.add(moving, far, over)
        assert boxes_overlap(moving, over) and not boxes_overlap(moving, far)
        drawn = lambda: [m for m in scene.get_moving_mobjects(FadeIn(moving)) if len(m.points)]  # noqa: E731
        assert len(drawn()) == 1 + len(far.family_members_with_points()) + 1
        assert draw_first(scene, far, over) == [far]
        assert scene.mobjects[0] is far
        assert drawn() == [moving, over]  # the square and the circle over it; the text is drawn once


def test_drop_svg_paths_keeps_the_frame_and_copies_transform():
    from manim import Transform

    from scenes.kit.frame_cost import drop_svg_paths

    with tempconfig(SMALL):
        scene = Scene()
        kept, dropped = Text("step 12 of 199", font_size=30), drop_svg_paths(Text("step 12 of 199", font_size=30))
        assert any(getattr(m, "path_obj", None) is not None for m in kept.get_family())
        assert all(getattr(m, "path_obj", None) is None for m in dropped.get_family())
        scene.add(kept)
        before = _frame(scene)
        scene.remove(kept)
        scene.add(dropped)
        assert _frame(scene).tobytes() == before.tobytes()
        target = drop_svg_paths(Text("step 13 of 199", font_size=30))
        morph = Transform(dropped, target)
        morph.begin()
        morph.interpolate(0.5)
        reference = Transform(kept, Text("step 13 of 199", font_size=30))
        reference.begin()
        reference.interpolate(0.5)
        for a, b in zip(kept.family_members_with_points(), dropped.family_members_with_points()):
            assert np.array_equal(a.points, b.points)


# -- building texts: GlyphText and the parsed-path memo give Manim's own glyphs --------------------------------------

FONTS = ["DejaVu Sans", "Noto Sans CJK SC"]
TEXTS = st.text(alphabet=st.sampled_from(list("abcxyzABQ0123456789 .,:;=+-×‖()%") + list("梯度残差网络的层")),
                min_size=1, max_size=24).filter(lambda s: s.strip())


def _glyphs(mob) -> list[tuple]:
    return [(m.points.tobytes(), m.fill_rgbas.tobytes(), m.stroke_rgbas.tobytes(), float(m.stroke_width))
            for m in mob.family_members_with_points()]


@settings(max_examples=examples(12), deadline=None)
@given(content=TEXTS, font=st.sampled_from(FONTS), size=st.sampled_from([18, 24.5, 38]))
def test_glyph_text_is_manims_text_without_the_groups(content, font, size):
    from scenes.kit.frame_cost import GlyphText

    with tempconfig(SMALL):
        ours, manims = (cls(content, font=font, font_size=size, color=RED) for cls in (GlyphText, Text))
    assert _glyphs(ours) == _glyphs(manims)
    assert len(ours.submobjects) == len(manims.submobjects) and len(ours.chars) == len(manims.chars)
    assert ours.id_to_vgroup_dict == {} and manims.id_to_vgroup_dict
    with tempconfig(SMALL):
        assert frame_cost._placed_glyphs(ours) is not None  # the glyphs came from the outlines read once


def test_glyph_outlines_placed_in_another_order_would_be_caught(monkeypatch):
    """The twin: the same outline maths in another order (Manim's thirds taken first, svgelements' placement after)
    gives points that differ in their last bits, and the comparison above sees it."""
    from scenes.kit.frame_cost import GlyphText

    placed = frame_cost._outline_points

    def placed_last(outline, matrix):
        out = placed(outline, frame_cost.se.Matrix())
        if out is not None:
            x, y = out[:, 0].copy(), out[:, 1].copy()
            out[:, 0], out[:, 1] = x * matrix.a + y * matrix.c + matrix.e, x * matrix.b + y * matrix.d + matrix.f
        return out

    monkeypatch.setattr(frame_cost, "_outline_points", placed_last)
    with tempconfig(SMALL):
        ours, manims = (cls("error 0.153 ‖x‖ (plain)", font="DejaVu Sans", font_size=24.5, color=RED)
                        for cls in (GlyphText, Text))
    assert len(_glyphs(ours)) == len(_glyphs(manims)) and _glyphs(ours) != _glyphs(manims)


def _built_twice(parse, make):
    """``make()`` with svgelements' Path.parse set to ``parse``, twice (the second one parses from the memo)."""
    import svgelements as se

    from scenes.kit import frame_cost

    saved, se.Path.parse = se.Path.parse, parse
    frame_cost._PARSED.clear()
    try:
        return make(), make()
    finally:
        se.Path.parse = saved
        frame_cost._PARSED.clear()


@settings(max_examples=examples(9), deadline=None)
@given(content=TEXTS, font=st.sampled_from(FONTS))
def test_each_path_parsed_once_gives_the_points_of_parsing_it_again(content, font):
    """Against svgelements' own parse: a text, then the same text again (every path from the memo), and a formula
    (dvisvgm's paths)."""
    from manim import MathTex

    from scenes.kit.frame_cost import _PARSE, _parse_once

    def make():
        # two formulas that share glyphs: Manim keeps each formula's SVG, but the second one's paths come from the memo
        return [Text(content, font=font, font_size=30), MathTex(r"\frac{\partial L}{\partial x_l} = 1 + x", font_size=30),
                MathTex(r"x_l + 1 = \partial L", font_size=30)]

    reference = _built_twice(_PARSE, make)
    memo = _built_twice(_parse_once, make)
    for ours, theirs in zip([*memo[0], *memo[1]], [*reference[0], *reference[1]]):
        assert _glyphs(ours) == _glyphs(theirs)


def test_a_memo_that_shares_segments_would_be_caught():
    """The twin: handing the same segment objects to every path (no copies) moves them once per use, so the
    comparison above sees other points."""
    from scenes.kit import frame_cost

    def sharing(path, pathdef):
        if path._segments or not isinstance(pathdef, str):
            return frame_cost._PARSE(path, pathdef)
        if pathdef not in frame_cost._PARSED:
            fresh = frame_cost.se.Path()
            frame_cost._PARSE(fresh, pathdef)
            frame_cost._PARSED[pathdef] = fresh._segments
        path._segments.extend(frame_cost._PARSED[pathdef])

    def make():
        return Text("x + x + x", font_size=30)

    reference = _built_twice(frame_cost._PARSE, make)
    shared = _built_twice(sharing, make)
    assert _glyphs(shared[1]) != _glyphs(reference[1])


def _bases_after(setter, values: list[str]) -> list[dict]:
    """The bases of every ConvertToOpenGL class after each of ``values`` is set as the renderer of a ManimConfig by
    ``setter``; Manim's own setter restores Cairo afterwards, whatever happened."""
    from manim._config.utils import ManimConfig
    from manim.mobject.opengl.opengl_compatibility import ConvertToOpenGL

    config, seen = ManimConfig(), []
    try:
        for value in values:
            setter(config, value)
            assert config.renderer.value == value.lower()
            seen.append({cls: cls.__bases__ for cls in ConvertToOpenGL._converted_classes})
    finally:
        frame_cost._SET_RENDERER(config, "cairo")
        frame_cost._BASES_SET_FOR[0] = RendererType.CAIRO
    return seen


@settings(max_examples=examples(30), deadline=None)
@given(values=st.lists(st.sampled_from(["cairo", "opengl", "CAIRO", "OpenGL"]), min_size=1, max_size=6))
def test_keeping_the_renderer_bases_switches_them_as_manim_does(values):
    """After every value, each converted class has the bases Manim's own setter gives it (an independent run of
    Manim's setter over the same values); the adapter only skips switches that change nothing."""
    assert _bases_after(frame_cost._set_renderer, values) == _bases_after(frame_cost._SET_RENDERER, values)


def test_a_renderer_adapter_that_never_switches_would_be_caught():
    def never_switches(config, value):
        config._set_from_enum("renderer", RendererType(value.lower()), RendererType)

    values = ["cairo", "opengl"]
    assert _bases_after(never_switches, values) != _bases_after(frame_cost._SET_RENDERER, values)


def test_keep_renderer_bases_is_idempotent_and_refuses_what_manim_refuses():
    from manim import config
    from manim._config.utils import ManimConfig

    frame_cost.keep_renderer_bases()
    frame_cost.keep_renderer_bases()
    assert ManimConfig.renderer.fset is frame_cost._set_renderer
    with pytest.raises(ValueError):
        config.renderer = "vulkan"
    with tempconfig({"frame_rate": 15}):
        assert config.renderer is RendererType.CAIRO
