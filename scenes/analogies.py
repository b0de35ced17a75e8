"""Analogies: "keep as is + fine-tune", told five times before any network appears.

Example::

    python render.py render Analogies --quality l --lang zh

A residual block computes H(x) = x + F(x): the input passes whole and the layers only add a
correction (He et al. 2015, §3.1). Five everyday pictures of the same sum, in the study note's order:
skip-level reporting in a company (reports summarised level by level get distorted, so the top also hears
the front line directly), a draft copied whole with notes beside it, a highway's main line with ramps, a
stock base with seasoning added, and a factory whose conveyor belt carries the goods to the end while
stations along it improve them ("attention is the factory, the residual is the conveyor belt"). The scene
shows no measured numbers: it is the intuition the later, data-driven scenes test (ConveyorBelt measures
the last picture in a Transformer).
"""

from __future__ import annotations

import numpy as np
from manim import (DOWN, LEFT, RIGHT, UP, Arrow, ArcBetweenPoints, Circle, Create, Dot, FadeIn, FadeOut, Line,
                   MathTex, MoveAlongPath, Polygon, Rectangle, Square, VGroup, Write)

from scenes.kit.base import LectureScene
from scenes.kit.style import PALETTE, SIZE_BODY, SIZE_LABEL, SIZE_SMALL
from scenes.kit.widgets import make_highway_icon

__all__ = ["Analogies"]

PANEL_X = (-4.6, 0.0, 4.6)  # centres of the three panels of a full page (scene units)
# The pictures in the order of the study note, as pages of panels: (picture, centre x).
PAGES = ((("company", PANEL_X[0]), ("draft", PANEL_X[1]), ("road", PANEL_X[2])),
         (("soup", -3.0), ("factory", 3.0)))
DRAWING_Y = 0.45  # centre line of the drawings


class Analogies(LectureScene):
    """Keep as is + fine-tune: skip-level reports, a draft with notes, a highway, a soup, a conveyor belt."""

    def construct(self) -> None:
        # 1. Title and the sum every picture stands for.
        title = self.title("title")
        formula = MathTex("H(x)", "=", "x", "+", "F(x)", font_size=44, color=PALETTE["text"])
        formula[2].set_color(PALETTE["identity"])
        formula[4].set_color(PALETTE["branch"])
        formula.next_to(title, DOWN, buff=0.2)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), Write(formula), run_time=2)
        self.wait(0.5)

        # 2. The panels, page by page: heading, drawing, the part that stays, the part added.
        for number, page in enumerate(PAGES):
            for key, x in page:
                self.narrate(f"n_{key}", 4.5)
                heading = self.text(key, size=SIZE_BODY).move_to([x, 1.75, 0])
                parts = getattr(self, f"get_{key}")(np.array([x, DRAWING_Y, 0]))
                x_label = self.text(f"{key}_x", size=SIZE_SMALL, color=PALETTE["identity"]).move_to([x, -0.75, 0])
                f_label = self.text(f"{key}_f", size=SIZE_SMALL, color=PALETTE["branch"]).move_to([x, -1.2, 0])
                self.play(FadeIn(heading), Create(parts["base"]), FadeIn(x_label), run_time=1.5)
                self.play(FadeIn(f_label), *parts["add"], run_time=1.5)
                if parts["then"]:
                    self.play(*parts["then"], run_time=1.5)
                    self.play(*[FadeOut(m) for m in parts["temp"]], run_time=0.3)
                self.wait(0.8)
            if number < len(PAGES) - 1:  # make room for the next page: all but the title and the sum
                self.play(*[FadeOut(m) for m in self.mobjects if m not in (title, formula)], run_time=0.6)

        # 3. The moral: with F = 0 the sum is the input itself.
        moral = self.text("moral", size=SIZE_LABEL).move_to([0, -2.2, 0])
        zero = MathTex(r"F(x) = 0 \;\Rightarrow\; H(x) = x", font_size=38, color=PALETTE["identity"])
        zero.next_to(moral, DOWN, buff=0.25)
        self.narrate("n_moral", 3.5)
        self.play(FadeIn(moral), Write(zero), run_time=1.5)
        self.cite("He et al. 2015, §3.1")
        self.wait(2.5)

    # -- the drawings: base (what stays), add (animations adding F), then, temp (extra motion) --
    def get_company(self, centre: np.ndarray) -> dict:
        """Three levels (front line, manager, top) with reports summarised upwards level by level (F(x)) and
        a skip-level line from the front line straight to the top (x); then a report travels each way."""
        boxes = VGroup(*[Rectangle(width=0.8, height=0.36, color=PALETTE["text"], stroke_width=3)
                         for _ in range(3)]).arrange(UP, buff=0.42).move_to(centre + RIGHT * 0.35)
        boxes[-1].set_fill(PALETTE["text"], opacity=0.25)  # the top
        skip = ArcBetweenPoints(boxes[0].get_left(), boxes[-1].get_left(), angle=-1.6,
                                color=PALETTE["identity"], stroke_width=5)
        chain = VGroup(*[Arrow(boxes[i].get_top(), boxes[i + 1].get_bottom(), buff=0.04, stroke_width=4,
                               max_tip_length_to_length_ratio=0.45, color=PALETTE["branch"]) for i in range(2)])
        reports = [Dot(color=PALETTE["identity"], radius=0.08), Dot(color=PALETTE["branch"], radius=0.08)]
        upwards = Line(boxes[0].get_top(), boxes[-1].get_bottom())
        ride = [MoveAlongPath(reports[0], skip), MoveAlongPath(reports[1], upwards)]
        return {"base": VGroup(boxes, skip), "add": [Create(chain)], "then": ride, "temp": reports}

    def get_factory(self, centre: np.ndarray) -> dict:
        """A conveyor belt on rollers carrying a box (x) past two stations that work on it (F(x)); then the
        box rides the belt to the end."""
        left, right = centre + LEFT * 1.7 + DOWN * 0.35, centre + RIGHT * 1.7 + DOWN * 0.35
        belt = Line(left, right, color=PALETTE["identity"], stroke_width=6)
        rollers = VGroup(*[Circle(radius=0.08, color=PALETTE["muted"], stroke_width=3).move_to(
            left + (right - left) * k / 5 + DOWN * 0.15) for k in range(6)])
        stations = VGroup()
        for k in (1, 2):
            station = Rectangle(width=0.7, height=0.45, color=PALETTE["branch"], stroke_width=3)
            station.move_to(left + (right - left) * k / 3 + UP * 0.75)
            arm = Line(station.get_bottom(), station.get_bottom() + DOWN * 0.38, color=PALETTE["branch"],
                       stroke_width=4)
            stations.add(VGroup(station, arm))
        goods = Square(side_length=0.26, color=PALETTE["identity"], fill_opacity=0.8, stroke_width=0)
        goods.move_to(left + UP * 0.15)
        ride = [MoveAlongPath(goods, Line(left + UP * 0.15, right + UP * 0.15))]
        return {"base": VGroup(belt, rollers), "add": [Create(stations)], "then": ride, "temp": [goods]}

    def get_draft(self, centre: np.ndarray) -> dict:
        """A page of text (the copy, x) and notes in the margin beside it (F(x))."""
        page = Rectangle(width=1.2, height=1.5, color=PALETTE["identity"], stroke_width=3)
        page.move_to(centre + LEFT * 0.55)
        lines = VGroup(*[Line(LEFT * 0.42, RIGHT * (0.42 - 0.15 * (i % 2)), stroke_width=3, color=PALETTE["muted"])
                         for i in range(6)]).arrange(DOWN, buff=0.14, aligned_edge=LEFT).move_to(page)
        notes = VGroup(*[Line(LEFT * 0.3, RIGHT * (0.3 - 0.12 * i), stroke_width=4, color=PALETTE["branch"])
                         for i in range(3)]).arrange(DOWN, buff=0.16, aligned_edge=LEFT)
        notes.next_to(page, RIGHT, buff=0.35).shift(UP * 0.2)
        pointer = Line(notes.get_left() + LEFT * 0.05, page.get_right() + LEFT * 0.25 + UP * 0.2,
                       stroke_width=3, color=PALETTE["branch"])
        return {"base": VGroup(page, lines), "add": [Create(notes), Create(pointer)], "then": [], "temp": []}

    def get_road(self, centre: np.ndarray) -> dict:
        """The main line (x) and a ramp that leaves and rejoins it (F(x)); then a car rides each."""
        main, ramp = make_highway_icon(length=3.6, ramp_height=0.85)
        VGroup(main, ramp).shift(centre - main.get_center() + DOWN * 0.35)
        cars = [Dot(color=PALETTE["identity"], radius=0.09), Dot(color=PALETTE["branch"], radius=0.09)]
        ride = [MoveAlongPath(cars[0], main), MoveAlongPath(cars[1], ramp)]
        return {"base": main, "add": [Create(ramp)], "then": ride, "temp": cars}

    def get_soup(self, centre: np.ndarray) -> dict:
        """A pot of stock (x) and seasoning falling into it (F(x))."""
        pot = VGroup(
            Line([-0.8, 0.35, 0], [-0.65, -0.55, 0]), Line([-0.65, -0.55, 0], [0.65, -0.55, 0]),
            Line([0.65, -0.55, 0], [0.8, 0.35, 0]), Line([-0.8, 0.25, 0], [-1.05, 0.25, 0]),
            Line([0.8, 0.25, 0], [1.05, 0.25, 0]),
        ).set_stroke(PALETTE["text"], 4)
        stock = Polygon([-0.75, 0.05, 0], [-0.63, -0.5, 0], [0.63, -0.5, 0], [0.75, 0.05, 0],
                        stroke_width=0, fill_color=PALETTE["identity"], fill_opacity=0.55)
        base = VGroup(stock, pot).move_to(centre + DOWN * 0.2)
        grains = VGroup(*[Dot(radius=0.05, color=PALETTE["branch"]) for _ in range(7)])
        for i, grain in enumerate(grains):  # scattered on the surface of the stock
            grain.move_to(stock.get_top() + DOWN * (0.08 + 0.07 * (i % 3)) + RIGHT * (0.18 * i - 0.54))
        return {"base": base, "add": [FadeIn(grains, shift=DOWN * 0.9)], "then": [], "temp": []}
