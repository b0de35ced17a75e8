"""HighwayDenseNetResidual: three ways to let the input through: gate, concatenate, add.

Example::

    python render.py render HighwayDenseNetResidual --quality l --set width=64

- Highway networks (Srivastava et al. 2015, "Training Very Deep Networks", Eq. 3):
  y = F(x) T(x) + x (1 - T(x)), T(x) = sigma(W_T x + b_T): a learned gate, extra parameters per layer.
- DenseNet (Huang et al. 2017, "Densely Connected Convolutional Networks", Eq. 2):
  x_l = H_l([x_0, ..., x_{l-1}]): every layer's output is concatenated, so the width grows by the
  growth rate k per layer.
- ResNet (He et al. 2015, Eq. 1): y = x + F(x): no extra parameters, constant width.

Every count on screen comes from :func:`connection_costs` applied to the width and depth of the
``chain_rule`` experiment's nets (so ``--set width=64`` changes them); tests check it against the
parameters of equivalent torch modules.
"""

from __future__ import annotations

from typing import Any

from manim import DOWN, LEFT, FadeIn, GrowFromEdge, MathTex, VGroup, Write

from simulation.experiments import RESIDUAL

from scenes.kit.base import LectureScene
from scenes.kit.layout import EDGE_BUFF
from scenes.kit.style import PALETTE, SIZE_BODY, SIZE_LABEL, SIZE_SMALL, make_text
from scenes.kit.widgets import make_bar_row

__all__ = ["HighwayDenseNetResidual", "connection_costs", "linear_params", "branch_params", "KINDS"]

KINDS = ("highway", "dense", "residual")


def linear_params(n_in: int, n_out: int, bias: bool = True) -> int:
    """Parameters of a fully connected layer R^n_in -> R^n_out: n_out * n_in weights (+ n_out biases)."""
    return n_out * n_in + (n_out if bias else 0)


def branch_params(n_in: int, n_out: int) -> int:
    """Parameters of the branch F = Linear(n_in, n_out) -> activation -> Linear(n_out, n_out), the
    block of :func:`simulation.models.make_branch` without normalisation."""
    return linear_params(n_in, n_out) + linear_params(n_out, n_out)


def connection_costs(kind: str, width: int, depth: int, growth: int) -> dict[str, Any]:
    """Widths and parameter counts of ``depth`` blocks joined the ``kind`` way, starting at ``width``.

    Returns a dict of plain ints: ``widths`` [depth + 1] (the representation's width before the first
    block and after each block), ``branch`` [depth] (parameters of each block's F), ``shortcut``
    [depth] (parameters of the connection itself: the gate T for "highway", 0 otherwise) and ``total``.

    - "highway": F: width -> width plus the gate T = sigmoid(Linear(width, width)); width constant.
    - "dense": block l reads all width + l * growth features and adds ``growth`` new ones
      (F: width + l * growth -> growth, concatenated); the width grows by ``growth`` per block.
    - "residual": F: width -> width, added to the identity; width constant, no extra parameters.

    Raises ValueError for an unknown ``kind`` or a width, depth or growth below 1.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown connection {kind!r}; available: {', '.join(KINDS)}")
    if min(width, depth, growth) < 1:
        raise ValueError(f"width, depth and growth must be >= 1; got {width}, {depth}, {growth}")
    if kind == "dense":
        widths = [width + l * growth for l in range(depth + 1)]
        branch = [branch_params(widths[l], growth) for l in range(depth)]
        shortcut = [0] * depth
    else:
        widths = [width] * (depth + 1)
        branch = [branch_params(width, width)] * depth
        shortcut = [linear_params(width, width) if kind == "highway" else 0] * depth
    return {"widths": widths, "branch": branch, "shortcut": shortcut, "total": sum(branch) + sum(shortcut)}


class HighwayDenseNetResidual(LectureScene):
    """Gate (Highway), concatenate (DenseNet) or add (ResNet): computed widths and parameter counts."""

    experiment = "chain_rule"  # the nets whose width and depth are compared
    growth = 12  # DenseNet growth rate k: new features per layer; 12 is the paper's smallest (Huang 2017, Table 2)
    param_limits = {"growth": (1, 256)}  # Huang 2017 uses k = 12 to 48

    def construct(self) -> None:
        config = self.traces[RESIDUAL].run_config
        width, depth, growth = int(config.width), int(config.depth), int(self.growth)
        costs = {kind: connection_costs(kind, width, depth, growth) for kind in KINDS}
        self.numbers["config"] = {"width": width, "depth": depth, "growth": growth}
        for kind, c in costs.items():
            for l, w in enumerate(c["widths"]):
                self.number(f"{kind}.width.{l}", w)
            for l, p in enumerate(c["branch"]):
                self.number(f"{kind}.branch_params.{l}", p)

        # 1. Title and the set-up shared by all three.
        title = self.title("title")
        setup = self.text("setup", size=SIZE_SMALL, color=PALETTE["muted"], width=self.number("width", width),
                          depth=self.number("depth", depth), k=self.number("growth", growth))
        setup.next_to(title, DOWN, buff=0.15)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), FadeIn(setup), run_time=1.5)

        # 2. One column per connection: name, source, formula, idea, widths as bars.
        columns = self.get_columns(costs)
        headers = self.get_row_headers(depth)
        for kind in KINDS:
            col = columns[kind]
            self.narrate(f"n_{kind}", 4)
            if kind == "highway":
                self.play(FadeIn(headers[0]), run_time=0.5)
            self.play(FadeIn(col["name"]), FadeIn(col["source"]), Write(col["formula"]), run_time=1.5)
            self.play(FadeIn(col["idea"]), FadeIn(col["bars"][1]),
                      *[GrowFromEdge(bar, DOWN) for bar in col["bars"][0]], run_time=1.5)
            self.wait(0.5)

        # 3. The computed counts, row by row.
        self.narrate("n_numbers", 4)
        rows = self.get_number_rows(costs, depth)
        for header, row in zip(headers[1:], rows):
            self.play(FadeIn(header), *[FadeIn(cell) for cell in row], run_time=1)
        self.wait(3)

    # -- builders -----------------------------------------------------------------------------------
    COLUMN_X = {"highway": -2.2, "dense": 1.7, "residual": 5.2}
    ROW_Y = {"name": 2.35, "source": 1.95, "formula": 1.35, "idea": 0.75, "bars": -0.75,
             "shortcut": -1.3, "branch": -1.8, "width": -2.3, "total": -2.8}
    COLORS = {"highway": "warn", "dense": "grad", "residual": "residual"}

    def get_columns(self, costs: dict[str, dict]) -> dict[str, dict]:
        formulas = {
            "highway": r"y = F(x)\,T(x) + x\,\bigl(1 - T(x)\bigr)",
            "dense": r"x_\ell = H_\ell\bigl([x_0, x_1, \ldots, x_{\ell-1}]\bigr)",
            "residual": r"y = x + F(x)",
        }
        sources = {"highway": "Srivastava et al. 2015", "dense": "Huang et al. 2017", "residual": "He et al. 2015"}
        vmax = max(max(c["widths"]) for c in costs.values())
        columns = {}
        for kind, x in self.COLUMN_X.items():
            color = PALETTE[self.COLORS[kind]]
            name = self.text(kind, size=SIZE_BODY, color=color).move_to([x, self.ROW_Y["name"], 0])
            source = make_text(sources[kind], size=SIZE_SMALL, color=PALETTE["muted"])
            source.move_to([x, self.ROW_Y["source"], 0])
            formula = MathTex(formulas[kind], font_size=28, color=PALETTE["text"])
            formula.move_to([x, self.ROW_Y["formula"], 0])
            idea = self.text(f"{kind}_idea", size=SIZE_SMALL, color=color).move_to([x, self.ROW_Y["idea"], 0])
            bars = make_bar_row(costs[kind]["widths"][1:], color, width=2.8, height=1.0, vmax=vmax)
            bars.move_to([x, self.ROW_Y["bars"], 0], aligned_edge=DOWN)
            columns[kind] = {"name": name, "source": source, "formula": formula, "idea": idea, "bars": bars}
        return columns

    def get_row_headers(self, depth: int) -> VGroup:
        keys = ("row_widths", "row_shortcut", "row_branch", "row_width", "row_total")
        ys = (self.ROW_Y["bars"] + 0.5, self.ROW_Y["shortcut"], self.ROW_Y["branch"], self.ROW_Y["width"],
              self.ROW_Y["total"])
        headers = VGroup()
        for key, y in zip(keys, ys):
            header = self.text(key, size=SIZE_SMALL, color=PALETTE["muted"], depth=self.number("depth", depth))
            headers.add(header.move_to([0, y, 0]).to_edge(LEFT, buff=EDGE_BUFF))
        return headers

    def get_number_rows(self, costs: dict[str, dict], depth: int) -> list[list]:
        rows: list[list] = [[], [], [], []]
        reference = costs["residual"]["total"]
        for kind, x in self.COLUMN_X.items():
            c, color = costs[kind], PALETTE[self.COLORS[kind]]
            shortcut = self.number(f"{kind}.shortcut_params", c["shortcut"][0])
            if c["branch"][0] == c["branch"][-1]:
                branch = self.number(f"{kind}.branch_params", c["branch"][0])
            else:
                branch = self.t("range", first=self.number(f"{kind}.branch_params.0", c["branch"][0]),
                                last=self.number(f"{kind}.branch_params.{depth - 1}", c["branch"][-1]))
            final_width = self.number(f"{kind}.final_width", c["widths"][-1])
            total = self.t("total", total=self.number(f"{kind}.total_params", c["total"]),
                           ratio=self.number(f"{kind}.total_vs_residual", c["total"] / reference, digits=3))
            for row, (value, y) in enumerate(zip((shortcut, branch, final_width, total),
                                                 ("shortcut", "branch", "width", "total"))):
                cell = make_text(value, size=SIZE_LABEL, color=color).move_to([x, self.ROW_Y[y], 0])
                rows[row].append(cell)
        return rows
