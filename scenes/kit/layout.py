"""Layout checks: every text inside the frame's margin, none below the legibility floor, no text over another
(used by tests and --check).

Example::

    problems = layout_problems(scene.mobjects, frame_width=14.22, frame_height=8.0)

The legibility floor (issue 34): a clip is shown on a projector, and the last row of a lecture hall reads nothing
whose capitals are lower than about 1/45 of the screen. A text's *cap height* is measured, not guessed: the height
in scene units of a capital "H" set in the text's own font at its effective size, i.e.

    cap_height = effective font size x (height of "H" at font size 1, in that font)

where the effective font size is Manim's ``font_size`` of the text as it is now (it follows every ``scale``, as
the ratio of the text's height to its height when made), and the height of "H" per point is measured once per
process by setting an "H" with Pango (``Text``, per font: DejaVu Sans 0.01011 scene units per point, Noto Sans
CJK SC 0.01020) or with LaTeX (``MathTex``/``Tex``: 0.00709 per point, Computer Modern). With the frame 8 units
high the floor, 8/45 = 0.178 units, is ``Text`` at font size 17.6 (the house's SIZE_SMALL, 18, has 1/43.9)
and ``MathTex`` at 25.1. A Chinese text is measured by the Latin "H" of its font (the ideographs are taller).
The margin: every text lies at least 3 % of the frame's width from the left and right edges and 3 % of its
height from the top and bottom.

A text on screen is drawn fully opaque (:data:`FULL_OPACITY`): a word faded to a fifth of its colour (a switched-off
part of a diagram) has a fifth of its contrast and is lost at the back of a hall; what is meant as switched off says
so in the muted text colour instead. A text faded below 5 % is taken as gone (being faded in or out) and not checked.

Two more findings catch what a translation's longer words do to a layout drawn for English: two texts on one line
(their heights overlap by half the shorter's) closer than :data:`MIN_GAP` side by side read as one run of words
("…4 pasos)error de test"), and a text over a marker (a ``Dot``: a curve's tip, a path's end node) hides it.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from manim import DEFAULT_FONT_SIZE, Dot, MarkupText, MathTex, Mobject, SingleStringMathTex, Tex, Text, VMobject
from manim.constants import SCALE_FACTOR_PER_FONT_POINT
from manim.mobject.text.text_mobject import TEXT_MOB_SCALE_FACTOR

__all__ = ["text_mobjects", "layout_problems", "cap_height", "legibility_problems", "CAP_FLOOR", "MARGIN",
           "adopt_text_sizes", "EDGE_BUFF", "line_width", "inside_margin", "bounding_box", "MIN_GAP", "markers", "FULL_OPACITY", "text_opacity"]

TEXT_TYPES = (Text, MarkupText, SingleStringMathTex, MathTex, Tex)
CAP_FLOOR = 1 / 45  # the smallest cap height, as a fraction of the frame's height (read from the back of a hall)
MARGIN = 0.03  # the margin kept free of text on every side, as a fraction of the frame's width / height
MIN_GAP = 0.1  # the least space (scene units) between two texts side by side on one line: about a word space
FULL_OPACITY = 0.99  # a visible text's glyphs are drawn at least this opaque (fill): no faded words on screen
EDGE_BUFF = 0.5  # scene units from a side edge for to_edge / to_corner: clears the margin (0.43 of a 14.22-wide frame)
_CAP_PER_POINT: dict[tuple[str, str | None], float] = {}  # (kind, font) -> scene units of an "H" per font point


def text_mobjects(mobjects: Iterable[Mobject], visible_only: bool = True) -> list[Mobject]:
    """Visible (``visible_only``) outermost text mobjects (Text, MarkupText, MathTex, Tex) among ``mobjects`` and
    their families, inside VGroups too."""
    found: list[Mobject] = []

    def visit(mob: Mobject) -> None:
        if isinstance(mob, TEXT_TYPES):
            if not visible_only or _visible(mob):
                found.append(mob)
            return  # its letters are not separate texts
        for sub in mob.submobjects:
            visit(sub)

    for mob in mobjects:
        visit(mob)
    return found


def line_width(frame_width: float | None = None) -> float:
    """The widest a line of text may be: the frame's width less the margin on both sides (13.3 scene units at
    the default 14.22), less 1 %."""
    from manim import config

    width = config.frame_width if frame_width is None else frame_width
    return width * (1 - 2 * MARGIN) * 0.99


def inside_margin(mob: Mobject) -> Mobject:
    """Shift ``mob`` (a label placed next to something) the least distance that puts its box inside the frame's
    margin (:data:`MARGIN`), where it fits; returns ``mob``."""
    from manim import config

    half_w = config.frame_width / 2 - MARGIN * config.frame_width
    half_h = config.frame_height / 2 - MARGIN * config.frame_height
    l, r, b, t = bounding_box(mob)
    dx = (-half_w - l) if l < -half_w else (half_w - r) if r > half_w else 0.0
    dy = (-half_h - b) if b < -half_h else (half_h - t) if t > half_h else 0.0
    if dx or dy:
        mob.shift([dx * 1.001, dy * 1.001, 0])
    return mob


def _cap_per_point(kind: str, font: str | None) -> float:
    """Height in scene units of a capital "H" at font size 1: set once per process at size 48 (Pango for
    ``kind`` "pango" in ``font``, LaTeX's \\mathrm{H} for "tex") and divided by 48."""
    key = (kind, font)
    if key not in _CAP_PER_POINT:
        probe = Text("H", font=font, font_size=48) if kind == "pango" else MathTex(r"\mathrm{H}", font_size=48)
        _CAP_PER_POINT[key] = probe.height / 48
    return _CAP_PER_POINT[key]


def cap_height(mob: Mobject, height: float | None = None) -> float:
    """Cap height of a text mobject (Text, MarkupText, MathTex, Tex) as drawn now, in scene units: Manim's
    effective ``font_size`` times the measured height of "H" per point in its font (see the module's docstring).
    ``height``: the mobject's height if known (the layout check has its box), else measured. Raises TypeError for
    another mobject."""
    if height is None:
        height = mob.height
    if isinstance(mob, (Text, MarkupText)):
        # Manim's Text.font_size, from a height already measured
        size = height / mob.initial_height / TEXT_MOB_SCALE_FACTOR * 2.4 * mob._font_size / DEFAULT_FONT_SIZE
        return float(size) * _cap_per_point("pango", mob.font or None)
    if isinstance(mob, SingleStringMathTex):  # MathTex and Tex are SingleStringMathTex too: their font_size
        return float(height / mob.initial_height / SCALE_FACTOR_PER_FONT_POINT) * _cap_per_point("tex", None)
    raise TypeError(f"cap_height: {type(mob).__name__} is not a text mobject")


def adopt_text_sizes(animations) -> None:
    """After a ``Transform(a, b)`` ``a`` is drawn with ``b``'s points but keeps its own ``initial_height``, from which
    Manim's ``font_size`` (hence :func:`cap_height`) is read: give each text of ``a`` that of its counterpart in
    ``b``. ReplacementTransform puts ``b`` itself on screen; other animations keep the text's own points."""
    from manim import ReplacementTransform, Transform

    for anim in animations:
        if getattr(anim, "animations", None):  # AnimationGroup, Succession, LaggedStart: their parts
            adopt_text_sizes(anim.animations)
        if not isinstance(anim, Transform) or isinstance(anim, ReplacementTransform):
            continue
        target = getattr(anim, "target_mobject", None)
        if target is None:
            continue
        shown, meant = text_mobjects([anim.mobject], visible_only=False), text_mobjects([target], visible_only=False)
        if len(shown) != len(meant):
            continue
        for a, b in zip(shown, meant):
            if type(a) is type(b) and getattr(b, "initial_height", 0) > 0:
                a.initial_height = b.initial_height
                if hasattr(b, "_font_size"):
                    a._font_size = b._font_size
                if isinstance(a, (Text, MarkupText)):
                    a.font = b.font


def _visible(mob: Mobject) -> bool:
    family = mob.family_members_with_points()
    if not family:
        return False
    opacities = [max(float(np.max(m.get_fill_opacities(), initial=0)), float(np.max(m.get_stroke_opacities(), initial=0)))
                 for m in family]
    return max(opacities) > 0.05


def text_opacity(mob: Mobject) -> float:
    """The opacity of a text's faintest visible glyph (the fill opacity its letters are drawn with, 0 to 1; a glyph
    below 5 % is hidden, not faded); 0 for a text with none."""
    drawn = [float(np.max(m.get_fill_opacities(), initial=0)) for m in mob.family_members_with_points()]
    return min((a for a in drawn if a > 0.05), default=0.0)


def bounding_box(mob: Mobject) -> tuple[float, float, float, float]:
    """(left, right, bottom, top) in scene units: the values of ``get_left()[0]``, ``get_right()[0]``, ``get_bottom()[1]``
    and ``get_top()[1]``, from one pass over the boundary points instead of four (Manim's
    ``get_critical_point`` takes the min or max of the same points; none: all 0)."""
    points = _points_defining_boundary(mob)
    if len(points) == 0:
        return 0.0, 0.0, 0.0, 0.0
    low, high = points.min(axis=0), points.max(axis=0)
    return low[0], high[0], low[1], high[1]


def _points_defining_boundary(mob: Mobject) -> np.ndarray:
    """The points of ``mob.get_points_defining_boundary()`` [N, 3], in another order. For a VMobject Manim
    interleaves each family member's start and end anchors point by point in Python (``get_anchors``: a
    third of a layout check); here they are two strided slices of each member's points."""
    if not isinstance(mob, VMobject):
        return mob.get_points_defining_boundary()
    chunks = []
    for member in mob.get_family():
        points, n = member.points, member.n_points_per_cubic_curve
        if len(points) == 1:
            chunks.append(points)
        elif len(points) % n:  # Manim's zip(strict=True) refuses a partial curve: the same error
            chunks.append(np.array(member.get_anchors()))
        elif len(points):
            chunks += [points[::n], points[n - 1::n]]
    return np.concatenate(chunks) if chunks else np.zeros((0, 3))


def _describe(mob: Mobject) -> str:
    text = getattr(mob, "text", None) or getattr(mob, "tex_string", None) or type(mob).__name__
    return repr(str(text)[:40])


def markers(mobjects: Iterable[Mobject]) -> list[Mobject]:
    """Visible ``Dot`` mobjects among ``mobjects`` and their families (outside texts): the marks a text must not cover."""
    found: list[Mobject] = []

    def visit(mob: Mobject) -> None:
        if isinstance(mob, TEXT_TYPES):
            return
        if isinstance(mob, Dot):
            if _visible(mob):
                found.append(mob)
            return
        for sub in mob.submobjects:
            visit(sub)

    for mob in mobjects:
        visit(mob)
    return found


def layout_problems(mobjects: Iterable[Mobject], frame_width: float, frame_height: float,
                    tolerance: float = 0.02, floor: float | None = CAP_FLOOR, margin: float | None = MARGIN,
                    gap: float | None = MIN_GAP, opacity: float | None = FULL_OPACITY) -> list[str]:
    """One line per text that reaches past the frame's edge (by any amount: a glyph cut at the edge is cut),
    per pair of texts whose boxes overlap by more than ``tolerance`` scene units on both axes and per text whose box
    overlaps a marker's (a visible ``Dot``) by more than ``tolerance`` on both axes; with ``gap`` (default
    :data:`MIN_GAP`; None: not checked) per pair of texts on one line (their heights overlapping by half the
    shorter's) less than ``gap`` apart side by side, and per text less than ``gap`` above or below the citation
    (a text with ``citation = True``, as ``LectureScene.cite`` makes it) where they overlap in x; with ``floor``
    and ``margin`` (the defaults; None: not checked) also :func:`legibility_problems`; with ``opacity`` (default
    :data:`FULL_OPACITY`; None: not checked) per visible text whose faintest glyph is drawn less opaque than that."""
    mobjects = list(mobjects)
    texts = text_mobjects(mobjects)
    problems = []
    half_w, half_h = frame_width / 2, frame_height / 2
    boxes = [bounding_box(m) for m in texts]
    if floor is not None or margin is not None:
        problems += _legibility(texts, boxes, frame_width, frame_height, floor, margin)
    for mob in texts if opacity is not None else ():
        if (drawn := text_opacity(mob)) < opacity:
            problems.append(f"faded: {_describe(mob)} is drawn at opacity {drawn:.2f} (a text on screen is drawn fully "
                            f"opaque; a switched-off part says so in the muted colour)")
    for mob, (l, r, b, t) in zip(texts, boxes):
        if l < -half_w or r > half_w or b < -half_h or t > half_h:
            problems.append(f"outside the frame: {_describe(mob)} spans x [{l:.2f}, {r:.2f}], y [{b:.2f}, {t:.2f}]")
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            (l1, r1, b1, t1), (l2, r2, b2, t2) = boxes[i], boxes[j]
            dx = min(r1, r2) - max(l1, l2)
            dy = min(t1, t2) - max(b1, b2)
            if dx > tolerance and dy > tolerance:
                problems.append(f"overlap: {_describe(texts[i])} and {_describe(texts[j])}")
            elif gap is not None and dx > -gap and dy > 0.5 * min(t1 - b1, t2 - b2) and dx <= tolerance:
                problems.append(f"too close: {_describe(texts[i])} and {_describe(texts[j])} on one line, "
                                f"{-dx:.3f} apart (at least {gap})")
            elif (gap is not None and dx > tolerance and -gap < dy <= tolerance
                  and (getattr(texts[i], "citation", False) or getattr(texts[j], "citation", False))):
                problems.append(f"too close: {_describe(texts[i])} and {_describe(texts[j])} stacked, {-dy:.3f} "
                                f"apart (at least {gap}): the citation reads as one more line of the text")
    dots = markers(mobjects)
    if dots:
        for mob, (l1, r1, b1, t1) in zip(texts, boxes):
            for dot in dots:
                l2, r2, b2, t2 = bounding_box(dot)
                if min(r1, r2) - max(l1, l2) > tolerance and min(t1, t2) - max(b1, b2) > tolerance:
                    x, y = (l2 + r2) / 2, (b2 + t2) / 2
                    problems.append(f"over a marker: {_describe(mob)} covers the dot at ({x:.2f}, {y:.2f})")
    return problems


def legibility_problems(mobjects: Iterable[Mobject], frame_width: float, frame_height: float,
                        floor: float | None = CAP_FLOOR, margin: float | None = MARGIN) -> list[str]:
    """One line per visible text whose cap height (:func:`cap_height`) is below ``floor`` x ``frame_height``, and
    per text that reaches into the margin (``margin`` x ``frame_width`` from the left or right edge, ``margin`` x
    ``frame_height`` from the top or bottom) without leaving the frame (:func:`layout_problems` says that)."""
    texts = text_mobjects(mobjects)
    return _legibility(texts, [bounding_box(m) for m in texts], frame_width, frame_height, floor, margin)


def _legibility(texts: list[Mobject], boxes: list[tuple], frame_width: float, frame_height: float,
                floor: float | None, margin: float | None) -> list[str]:
    problems = []
    lowest = floor * frame_height if floor is not None else 0.0
    half_w, half_h = frame_width / 2, frame_height / 2
    inner_w, inner_h = half_w - (margin or 0.0) * frame_width, half_h - (margin or 0.0) * frame_height
    for mob, (l, r, b, t) in zip(texts, boxes):
        cap = cap_height(mob, t - b) if floor is not None else lowest
        if cap < lowest - 1e-9:
            problems.append(f"below the legibility floor: {_describe(mob)} has cap height {cap:.3f} "
                            f"(1/{frame_height / cap:.1f} of the frame; floor 1/{1 / floor:.0f} = {lowest:.3f})")
        outside = l < -half_w or r > half_w or b < -half_h or t > half_h
        if margin and not outside and (l < -inner_w or r > inner_w or b < -inner_h or t > inner_h):
            problems.append(f"in the {margin:.0%} margin: {_describe(mob)} spans x [{l:.2f}, {r:.2f}], "
                            f"y [{b:.2f}, {t:.2f}] (text must stay within x [{-inner_w:.2f}, {inner_w:.2f}], "
                            f"y [{-inner_h:.2f}, {inner_h:.2f}])")
    return problems
