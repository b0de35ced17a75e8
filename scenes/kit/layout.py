"""Layout checks: every text inside the frame, no text over another (used by tests and --check).

Example::

    problems = layout_problems(scene.mobjects, frame_width=14.22, frame_height=8.0)
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from manim import MathTex, Mobject, SingleStringMathTex, Tex, Text, VMobject

__all__ = ["text_mobjects", "layout_problems"]

TEXT_TYPES = (Text, SingleStringMathTex, MathTex, Tex)


def text_mobjects(mobjects: Iterable[Mobject]) -> list[Mobject]:
    """Visible outermost text mobjects (Text, MathTex, Tex) among ``mobjects`` and their families."""
    found: list[Mobject] = []

    def visit(mob: Mobject) -> None:
        if isinstance(mob, TEXT_TYPES):
            if _visible(mob):
                found.append(mob)
            return  # its letters are not separate texts
        for sub in mob.submobjects:
            visit(sub)

    for mob in mobjects:
        visit(mob)
    return found


def _visible(mob: Mobject) -> bool:
    family = mob.family_members_with_points()
    if not family:
        return False
    opacities = [max(float(np.max(m.get_fill_opacities(), initial=0)), float(np.max(m.get_stroke_opacities(), initial=0)))
                 for m in family]
    return max(opacities) > 0.05


def _box(mob: Mobject) -> tuple[float, float, float, float]:
    """(left, right, bottom, top): the values of ``get_left()[0]``, ``get_right()[0]``, ``get_bottom()[1]``
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


def layout_problems(mobjects: Iterable[Mobject], frame_width: float, frame_height: float,
                    tolerance: float = 0.02) -> list[str]:
    """One line per text that reaches past the frame's edge (by any amount: a glyph cut at the edge is cut)
    and per pair of texts whose boxes overlap by more than ``tolerance`` scene units on both axes."""
    texts = text_mobjects(mobjects)
    problems = []
    half_w, half_h = frame_width / 2, frame_height / 2
    boxes = [_box(m) for m in texts]
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
    return problems
