"""The legibility floor of the layout check (issue 34): cap height against the glyphs drawn, and its tamper twins.

Example::

    pytest tests/test_legibility.py

scenes/kit/layout.py measures a text's cap height from its font size (Manim's ``font_size``, which follows every
``scale``) and the height of an "H" per point of its font. Here that figure is held against an independent one:
the height of the capital "H" glyph *inside* the text as drawn, for Pango text (both fonts) and LaTeX, before and
after scaling, and after a Transform. The twins are small scenes (built in a dry run, like the lecture's) with a
text set too small, a text shrunk to fit a line, a formula set too small inside a VGroup, and a line pushed into
the margin or off the edge: each must be reported, and the same scene without the fault must not. Every scene of
the lecture is checked in tests/test_scenes_all.py (both languages, both themes).
"""

from __future__ import annotations

import pytest
from manim import DOWN, LEFT, RIGHT, UP, MathTex, Text, Transform, VGroup, config

from scenes.kit import layout
from scenes.kit.base import LectureScene
from scenes.kit.layout import CAP_FLOOR, MARGIN, cap_height, layout_problems
from scenes.kit.style import (FONTS, SIZE_BODY, SIZE_LABEL, SIZE_SMALL, SIZE_TITLE, make_text, make_wrapped_text,
                              set_language)

from dry_run import dry_run

FRAME_W, FRAME_H = 14.222222222222221, 8.0  # Manim's default frame (16:9), which every quality keeps
FLOOR = CAP_FLOOR * FRAME_H  # 0.178 scene units


def _glyph_h(text: Text) -> float:
    """Height of the text's first glyph as drawn (the probes start with a capital H)."""
    return float(text.submobjects[0].height)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", [SIZE_SMALL, SIZE_LABEL, 40])
def test_cap_height_is_the_height_of_a_drawn_capital(lang, size):
    set_language(lang)
    try:
        text = make_text("Hx 残差" if lang == "zh" else "Hxy", size=size)
        assert cap_height(text) == pytest.approx(_glyph_h(text), rel=0.02)
        text.scale(0.6)  # the font size follows the scale, and so does the glyph
        assert cap_height(text) == pytest.approx(_glyph_h(text), rel=0.02)
        # the same as Manim's own font_size times the "H" per point (cap_height reads it from a measured height)
        assert cap_height(text) == pytest.approx(text.font_size * layout._cap_per_point("pango", text.font))
    finally:
        set_language("en")


def test_cap_height_of_a_formula_is_its_drawn_capital():
    formula = MathTex(r"\mathrm{H} x^2", font_size=34)
    glyph = formula[0].submobjects[0]
    assert cap_height(formula) == pytest.approx(glyph.height, rel=0.02)
    formula.scale(1.5)
    assert cap_height(formula) == pytest.approx(formula[0].submobjects[0].height, rel=0.02)
    assert cap_height(formula) == pytest.approx(formula.font_size * layout._cap_per_point("tex", None))


def test_the_house_sizes_clear_the_floor_and_the_old_verdict_size_does_not():
    for size in (SIZE_SMALL, SIZE_LABEL, SIZE_BODY, SIZE_TITLE):
        assert cap_height(make_text("x", size=size)) >= FLOOR, size
    # LogitLens' verdicts before issue 34: SIZE_SMALL shrunk to fit the width, about 1/60 of the frame
    shrunk = make_text("x", size=SIZE_SMALL).scale(0.73)
    assert FRAME_H / cap_height(shrunk) == pytest.approx(60, abs=1.5)
    assert cap_height(shrunk) < FLOOR
    assert cap_height(MathTex("x", font_size=24)) < FLOOR < cap_height(MathTex("x", font_size=26))


def test_cap_height_refuses_a_shape():
    with pytest.raises(TypeError, match="not a text mobject"):
        cap_height(VGroup())


def test_a_transformed_text_takes_its_targets_size():
    """Manim's Transform gives ``a`` the points of ``b`` but not its ``initial_height``: adopt_text_sizes does."""
    a, b = make_text("Hold", size=40), make_text("Hx", size=14)
    anim = Transform(a, b)
    a.become(b)  # what the finished Transform leaves on screen: b's points in a
    assert cap_height(a) != pytest.approx(cap_height(b), rel=0.02)  # Manim's font_size reads a's old height
    layout.adopt_text_sizes([anim])
    assert cap_height(a) == pytest.approx(cap_height(b), rel=0.02) == pytest.approx(_glyph_h(b), rel=0.02)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_wrapped_text_keeps_its_size_and_fits_the_width(lang):
    set_language(lang)
    try:
        content = ("Measured: the deepest plain net ends at 20.6%, the shallowest at 3.1%: deeper trains worse "
                   "here, in 3 of 3 seeds" if lang == "en" else
                   "训练后，顶层以下没有一层与最终预测的一致比例达到 90%："
                   "这里答案只在顶层出现（3 个种子中 2 个）")
        lines = make_wrapped_text(content, 5.0, size=SIZE_SMALL)
        assert len(lines) >= 2
        assert all(line.width <= 5.0 for line in lines)
        assert all(cap_height(line) == pytest.approx(cap_height(make_text("x", size=SIZE_SMALL))) for line in lines)
        assert "".join(line.text for line in lines) == "".join(content.split())  # nothing lost or added
        assert not any(line.text[0] in "，。）：" for line in lines)
    finally:
        set_language("en")


# -- the twins: small scenes that must fail the check, and the same scenes without the fault -------------------

class _Probe(LectureScene):
    """Two texts and a formula at the house's sizes, inside the margin: a clean layout unless a subclass says."""

    strings = {"a": {"en": "alpha", "zh": "甲"}, "b": {"en": "omega", "zh": "乙"}}
    check_layout = True
    lang = "en"

    def construct(self) -> None:
        a, b = self.text("a", size=SIZE_SMALL), self.text("b", size=SIZE_SMALL)
        formula = MathTex(r"h_{l+1} = h_l + F(h_l)", font_size=34)
        group = VGroup(a, VGroup(b, formula).arrange(RIGHT, buff=0.4)).arrange(DOWN, buff=0.4)
        self.fault(a, b, formula)
        self.add(group)
        self.wait(0.1)

    def fault(self, a, b, formula) -> None:
        pass


class _TooSmall(_Probe):
    def fault(self, a, b, formula) -> None:
        b.scale(14 / SIZE_SMALL)  # omega at font size 14: 1/56 of the frame


class _ShrunkToFit(_Probe):
    def fault(self, a, b, formula) -> None:
        b.scale_to_fit_width(b.width * 0.95)  # the old verdicts: a line squeezed to fit the frame's width


class _SmallFormula(_Probe):
    def fault(self, a, b, formula) -> None:
        formula.scale(20 / 34)  # inside a VGroup inside a VGroup


class _InMargin(_Probe):
    def fault(self, a, b, formula) -> None:
        a.to_edge(RIGHT, buff=0.2)  # inside the frame, in the 3 % margin


class _OffEdge(_Probe):
    def fault(self, a, b, formula) -> None:
        a.to_edge(RIGHT, buff=0).shift(RIGHT * 0.3)  # a line pushed past the right edge


class _Faded(_Probe):
    def fault(self, a, b, formula) -> None:
        b.fade(0.8)  # the old IdentityHighway's switched-off branch label: a fifth of its contrast


class _FadedFormula(_Probe):
    def fault(self, a, b, formula) -> None:
        formula.set_opacity(0.5)


class _AtMarginFromInside(_Probe):
    def fault(self, a, b, formula) -> None:
        a.to_edge(UP, buff=MARGIN * FRAME_H + 0.01)


def test_the_probe_is_clean(tmp_path):
    assert dry_run(_Probe, tmp_path).layout_log == []
    assert dry_run(_AtMarginFromInside, tmp_path).layout_log == []


@pytest.mark.parametrize(("probe", "kind", "culprit"), [
    (_TooSmall, "below the legibility floor", "omega"),
    (_ShrunkToFit, "below the legibility floor", "omega"),
    (_SmallFormula, "below the legibility floor", "h_{l+1}"),
    (_InMargin, "in the 3% margin", "alpha"),
    (_OffEdge, "outside the frame", "alpha"),
    (_Faded, "faded", "omega"),
    (_FadedFormula, "faded", "h_{l+1}"),
], ids=["text-too-small", "text-shrunk-to-fit", "formula-too-small", "line-in-the-margin", "line-off-the-edge",
        "text-faded", "formula-faded"])
def test_the_check_fails_on_a_tampered_scene(tmp_path, probe, kind, culprit):
    log = dry_run(probe, tmp_path).layout_log
    assert len(log) == 1 and log[0].startswith(kind) and culprit in log[0], log


def test_layout_problems_says_how_small_and_where():
    small = make_text("Hello", size=12)
    problems = layout_problems([small], FRAME_W, FRAME_H)
    assert problems == [f"below the legibility floor: 'Hello' has cap height {cap_height(small):.3f} "
                        f"(1/{FRAME_H / cap_height(small):.1f} of the frame; floor 1/45 = {FLOOR:.3f})"]
    edge = make_text("Hello", size=SIZE_SMALL).to_edge(DOWN, buff=0.1)
    assert [p.split(":")[0] for p in layout_problems([edge], FRAME_W, FRAME_H)] == ["in the 3% margin"]
    assert layout_problems([edge], FRAME_W, FRAME_H, margin=None) == []  # the frame's edge alone: inside
    assert layout_problems([small], FRAME_W, FRAME_H, floor=None) == []


def test_a_faded_text_is_reported_and_a_hidden_or_muted_one_is_not():
    """The rule for faded text: a visible text drawn less than fully opaque is reported with its opacity; a text
    faded out (below 5 %: gone) or a hidden glyph is not, nor a switched-off text in the muted colour at full
    opacity (what IdentityHighway draws now); ``opacity=None`` turns the rule off."""
    from scenes.kit.style import PALETTE

    faded = make_text("branch", size=SIZE_LABEL).set_opacity(0.2)
    assert layout_problems([faded], FRAME_W, FRAME_H) == [
        "faded: 'branch' is drawn at opacity 0.20 (a text on screen is drawn fully opaque; a switched-off part says "
        "so in the muted colour)"]
    assert layout_problems([faded], FRAME_W, FRAME_H, opacity=None) == []
    assert layout_problems([make_text("gone", size=SIZE_LABEL).set_opacity(0.03)], FRAME_W, FRAME_H) == []
    partly = make_text("Linear", size=SIZE_LABEL)
    partly.submobjects[0].set_opacity(0.0)  # one glyph hidden, the rest drawn in full: not faded
    assert layout_problems([partly], FRAME_W, FRAME_H) == []
    assert layout_problems([make_text("branch", size=SIZE_LABEL, color=PALETTE["muted"])], FRAME_W, FRAME_H) == []


def test_identity_highway_switches_its_branch_off_with_legible_words():
    """IdentityHighway's end: the switched-off branch's words (its label, the boxes' 'Linear', 'act') at full opacity in
    the muted colour (4.5:1 in both themes); its lines at a fifth of their opacity. The twin: the old
    ``fade(0.8)`` of the same parts is reported as faded, three words."""
    from manim import Line

    from scenes.highway import switched_off
    from scenes.kit.layout import text_mobjects, text_opacity
    from scenes.kit.style import PALETTE
    from scenes.kit.widgets import make_box

    path = Line(LEFT * 3, RIGHT * 3, color=PALETTE["branch"], stroke_width=3)
    label = make_text("residual branch F(x)", size=SIZE_LABEL, color=PALETTE["branch"]).next_to(path, UP)
    parts = VGroup(path, VGroup(make_box("Linear"), make_box("act", width=1.0)).arrange(RIGHT).next_to(path, DOWN),
                   label)  # as IdentityHighway.get_diagram draws them
    off = switched_off(parts)
    words = text_mobjects([off])
    assert len(words) == 3 and all(text_opacity(t) == 1.0 for t in words)
    assert all(t.get_color() == PALETTE["muted"] for t in words)
    assert layout_problems([off], FRAME_W, FRAME_H) == []
    assert path.get_stroke_opacity() == 1.0 and off[0].get_stroke_opacity() == pytest.approx(0.2)  # dark: a fifth
    old = parts.copy().fade(0.8)
    assert sum(p.startswith("faded") for p in layout_problems([old], FRAME_W, FRAME_H)) == 3


def test_inside_margin_moves_a_label_the_least_distance():
    with_margin = config.frame_width / 2 - MARGIN * config.frame_width
    label = make_text("label", size=SIZE_SMALL).move_to([6.9, 1.0, 0])
    layout.inside_margin(label)
    assert label.get_right()[0] <= with_margin and label.get_right()[0] == pytest.approx(with_margin, abs=0.01)
    assert label.get_center()[1] == pytest.approx(1.0)
    assert layout_problems([label], FRAME_W, FRAME_H) == []


def test_fonts_of_both_languages_are_measured():
    for font in FONTS.values():
        per_point = layout._cap_per_point("pango", font)
        assert 0.0095 < per_point < 0.0105, (font, per_point)  # ~0.73 em: DejaVu Sans and Noto Sans CJK's Latin H


# -- the citation: a text just above it reads as one more line of it ---------------------------------------------

SOURCE = "Balduzzi et al. 2017, Fig. 1, Fig. 2"


class _Verdict(LectureScene):
    """A verdict line set at the bottom left as the lecture's verdicts are, long enough to reach over the citation;
    ``gap``: how far above the citation's top it sits (None: placed with :meth:`LectureScene.above_citation`)."""

    strings = {"v": {"en": "Measured: the plain gradient is close to white noise, the residual one is not",
                     "zh": "甲"}}
    check_layout = True
    lang = "en"
    gap: float | None = None

    def construct(self) -> None:
        verdict = self.text("v", size=SIZE_SMALL).to_edge(LEFT, buff=0.5).to_edge(DOWN, buff=0.6)
        top = self.cite_label(SOURCE).get_top()[1]
        if self.gap is None:
            self.above_citation(verdict, SOURCE)
        else:
            verdict.shift(UP * (top + self.gap - verdict.get_bottom()[1]))
        self.add(verdict)
        self.cite(SOURCE)
        self.wait(0.1)


@pytest.mark.parametrize("gap", [0.0, 0.04, 0.09])
def test_a_text_just_above_the_citation_is_reported(tmp_path, gap):
    log = dry_run(type("_Close", (_Verdict,), {"gap": gap}), tmp_path).layout_log
    assert len(log) == 1 and log[0].startswith("too close:") and "stacked" in log[0] and "Balduzzi" in log[0], log


def test_above_citation_raises_a_verdict_just_enough(tmp_path):
    """The twin: the same verdict raised by above_citation (and one set 0.11 above by hand) passes; one that does
    not reach over the citation in x is left where it is."""
    built = dry_run(_Verdict, tmp_path)
    assert built.layout_log == []
    verdict = next(m for m in built.mobjects if getattr(m, "text", "").startswith("Measured"))
    top = LectureScene.cite_label(SOURCE).get_top()[1]
    assert verdict.get_bottom()[1] == pytest.approx(top + layout.MIN_GAP, abs=1e-6)
    assert dry_run(type("_Clear", (_Verdict,), {"gap": 0.11}), tmp_path).layout_log == []
    short = make_text("short", size=SIZE_SMALL).to_edge(LEFT, buff=0.5).to_edge(DOWN, buff=0.6)
    bottom = short.get_bottom()[1]
    assert built.above_citation(short, SOURCE).get_bottom()[1] == bottom


def test_the_fitter_keeps_a_moved_text_clear_of_the_citation_gap():
    """A text the fitter stacks against the citation ends at least MIN_GAP above it, and the citation keeps its
    size and its corner (it gives way last)."""
    from scenes.kit.fit import make_room

    cite = LectureScene.cite_label(SOURCE)
    corner = cite.get_center().copy()
    verdict = make_text("Measured: the plain gradient is close to white noise, the residual one is not",
                        size=SIZE_SMALL).to_edge(LEFT, buff=0.5)
    verdict.shift(UP * (cite.get_top()[1] - 0.05 - verdict.get_bottom()[1]))  # over the citation by 0.05
    assert layout_problems([verdict, cite], FRAME_W, FRAME_H) != []
    notes = make_room([verdict, cite], [cite], FRAME_W, FRAME_H)
    assert notes and layout_problems([verdict, cite], FRAME_W, FRAME_H) == [], notes
    reaches_over = verdict.get_right()[0] > cite.get_left()[0]
    assert not reaches_over or verdict.get_bottom()[1] >= cite.get_top()[1] + layout.MIN_GAP - 1e-6, notes
    assert cite.get_center() == pytest.approx(corner) and cap_height(cite) >= FLOOR


def test_the_fitter_moves_a_text_the_check_finds_just_inside_the_gap():
    """A text 0.09 above the citation overlaps a room of MIN_GAP by less than the fitter's tolerance; the room
    reaches the tolerance further (fit.CITATION_ROOM), so the fitter moves what the layout check would report."""
    from scenes.kit.fit import CITATION_ROOM, make_room

    assert CITATION_ROOM > layout.MIN_GAP
    cite = LectureScene.cite_label(SOURCE)
    verdict = make_text("Measured: the plain gradient is close to white noise, the residual one is not",
                        size=SIZE_SMALL).to_edge(LEFT, buff=0.5)
    verdict.shift(UP * (cite.get_top()[1] + 0.09 - verdict.get_bottom()[1]))
    assert any("stacked" in p for p in layout_problems([verdict, cite], FRAME_W, FRAME_H))
    assert make_room([verdict, cite], [], FRAME_W, FRAME_H)
    assert layout_problems([verdict, cite], FRAME_W, FRAME_H) == []
