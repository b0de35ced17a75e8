"""NestedFunctionClasses: a bigger function class helps only if it contains the smaller one.

Example::

    python render.py render NestedFunctionClasses --quality l

The picture of D2L §8.6.1 (Fig. 8.6.1): function classes F1 ... F6 drawn as regions of growing area.
Non-nested classes drift, so the best function in F6 can be farther from the truth f* than the best
in F3; nested classes F1 ⊆ ... ⊆ F6 can only get closer. The geometry is computed (ellipses, nearest
points); the scene shows no measured numbers. A residual block that learns F = 0 reproduces the net
without it, so adding residual blocks nests the classes (He et al. 2015, §3.1).
"""

from __future__ import annotations

import numpy as np
from manim import LEFT, RIGHT, Create, DashedLine, Ellipse, FadeIn, MathTex, Star, Transform, Write

from scenes.kit.base import LectureScene
from scenes.kit.layout import line_width
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, value_to_color

__all__ = ["NestedFunctionClasses", "get_function_classes", "ellipse_points", "nearest_point", "contains",
           "TRUTH"]

# Panel coordinates (scene units, relative to a panel's centre) of the truth f* in each picture.
TRUTH = {False: np.array([0.0, 1.3]), True: np.array([2.35, 1.45])}
SCALE = 1.25  # scene units per unit of the class geometry


def get_function_classes(nested: bool, n: int = 6) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n`` classes as axis-aligned ellipses [(centre (2,), semi-axes (2,)), ...], area growing with i.

    Nested: each shifts less than it grows, so it contains the previous one. Non-nested: each shifts
    more than it grows, drifting down and to the right past the truth ``TRUTH[False]``.
    """
    i = np.arange(n, dtype=np.float64)[:, None]
    if nested:
        centres = np.array([-1.2, -0.6]) + i * np.array([0.22, 0.13])
        semi = np.array([0.55, 0.38]) + i * np.array([0.3, 0.2])
    else:
        centres = np.array([-1.8, 0.55]) + i * np.array([0.62, -0.33])
        semi = np.array([0.45, 0.32]) + i * np.array([0.12, 0.08])
    return list(zip(centres, semi))


def ellipse_points(centre: np.ndarray, semi: np.ndarray, n: int = 360) -> np.ndarray:
    """``n`` points [n, 2] on the boundary of the ellipse with ``centre`` and semi-axes ``semi``."""
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.asarray(centre) + np.stack([np.cos(t), np.sin(t)], axis=1) * np.asarray(semi)


def contains(outer: tuple[np.ndarray, np.ndarray], inner: tuple[np.ndarray, np.ndarray]) -> bool:
    """True when every boundary point of ellipse ``inner`` lies inside (or on) ellipse ``outer``."""
    centre, semi = outer
    pts = ellipse_points(*inner)
    return bool(np.all((((pts - centre) / semi) ** 2).sum(axis=1) <= 1 + 1e-9))


def nearest_point(centre: np.ndarray, semi: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, float]:
    """The point of the ellipse region closest to ``target`` and its distance (0 when inside);
    found on 3600 boundary samples, so accurate to about 1e-3 of the ellipse's size."""
    target = np.asarray(target, dtype=np.float64)
    if (((target - centre) / semi) ** 2).sum() <= 1:
        return target, 0.0
    pts = ellipse_points(centre, semi, 3600)
    dist = np.linalg.norm(pts - target, axis=1)
    k = int(np.argmin(dist))
    return pts[k], float(dist[k])


class NestedFunctionClasses(LectureScene):
    """D2L Fig. 8.6.1: non-nested classes F1...F6 drift away from f*, nested ones close in."""

    def construct(self) -> None:
        # 1. Title and the two panels with their truth f*.
        title = self.title("title")
        self.narrate("n_intro", 3.5)
        self.play(FadeIn(title), run_time=1)
        panels = {}
        for nested, x in ((False, -3.55), (True, 3.3)):
            origin = np.array([x, -0.1])
            heading = self.text("nested" if nested else "non_nested", size=SIZE_LABEL)
            heading.move_to([x, 2.5, 0])
            truth = self.to_scene(origin, TRUTH[nested])
            star = Star(outer_radius=0.16, color=PALETTE["identity"], fill_opacity=1).move_to(truth)
            star_label = MathTex("f^*", font_size=36, color=PALETTE["identity"]).next_to(star, RIGHT, buff=0.1)
            if star_label.get_right()[0] > line_width() / 2:  # at the frame's margin: on the star's other side
                star_label.next_to(star, LEFT, buff=0.1)
            panels[nested] = {"origin": origin, "truth": truth}
            self.play(FadeIn(heading), FadeIn(star, scale=2), FadeIn(star_label), run_time=1)
        legend = self.text("closest", size=SIZE_SMALL, color=PALETTE["muted"]).move_to([0, -2.55, 0])
        self.wait(0.5)

        # 2. The classes grow one by one; the dashed line joins f* to the closest point of the newest.
        self.narrate("n_grow", 7)
        classes = {nested: get_function_classes(nested) for nested in panels}
        n = len(classes[True])
        links: dict[bool, DashedLine] = {}
        for i in range(n):
            anims = []
            for nested, panel in panels.items():
                centre, semi = classes[nested][i]
                color = value_to_color(i, 0, n - 1, low=PALETTE["residual"], high=PALETTE["branch"], log=False)
                shape = Ellipse(width=2 * semi[0] * SCALE, height=2 * semi[1] * SCALE, color=color,
                                stroke_width=3).move_to(self.to_scene(panel["origin"], centre))
                label = MathTex(f"F_{i + 1}", font_size=30, color=color)
                label.move_to(self.to_scene(panel["origin"], self.label_position(centre, semi, nested)))
                point, _ = nearest_point(centre, semi, TRUTH[nested])
                link = DashedLine(panel["truth"], self.to_scene(panel["origin"], point), color=PALETTE["text"],
                                  stroke_width=2)
                anims += [Create(shape), FadeIn(label)]
                if nested in links:
                    anims.append(Transform(links[nested], link))
                else:
                    links[nested] = link
                    anims.append(Create(link))
            if i == 0:
                anims.append(FadeIn(legend))
            self.play(*anims, run_time=1.4)
        self.wait(1.5)

        # 3. Why residual nets are nested: F = 0 gives the shallower net back.
        formula = MathTex(r"f_{L+1}(x) = f_L(x) + F\bigl(f_L(x)\bigr),\quad F = 0 \;\Rightarrow\; f_{L+1} = f_L"
                          r"\quad\Rightarrow\quad \mathcal{F}_L \subseteq \mathcal{F}_{L+1}",
                          font_size=30, color=PALETTE["text"]).move_to([-1.3, -3.2, 0])
        self.narrate("n_residual", 4.5)
        self.play(Write(formula), run_time=2)
        self.cite("D2L §8.6, Fig. 8.6.1")
        self.wait(3)

    def to_scene(self, origin: np.ndarray, point: np.ndarray) -> np.ndarray:
        """Scene point [3] of a geometry ``point`` [2] in the panel whose centre is ``origin`` [2]."""
        return np.append(origin + SCALE * np.asarray(point), 0)

    @staticmethod
    def label_position(centre: np.ndarray, semi: np.ndarray, nested: bool) -> np.ndarray:
        """Geometry point [2] for the name of a class: above a drifting class (outside it, clear of its
        neighbours), inside the right end of a nested one (between its boundary and the previous one's)."""
        if nested:
            return centre + np.array([semi[0] - 0.24, 0.0])
        return centre + np.array([0.0, semi[1] + 0.2])
