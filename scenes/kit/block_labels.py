"""Block names on screen: a model's module paths shortened, grouped and thinned so that labels never overlap.

Example::

    labels = BlockLabels(["layer1.0", "layer1.1", "layer2.0", "layer2.1"], xs=np.linspace(-4, 4, 4))
    labels.below(axes, buff=0.1)

A user model's trace names its blocks (its residual additions) by module path (``meta.layers``: ``layer3.4``,
``transformer.h.11.mlp``, ``encoder.layers.3``). :func:`plan_block_labels` decides what is written under a row
of 2 to 100+ evenly spaced blocks:

- the dotted prefix every name shares becomes a heading, without its trailing dot (``transformer.h``);
- the rest of each name splits into a group (all but its last component: ``11``) and a member (``mlp``);
  consecutive blocks of one group share a bracket and one group label (``layer3`` over 36 blocks);
- member labels are thinned to every k-th block of their group (k from :data:`STRIDES`), group labels to every
  k-th group, and a label longer than its room gets a middle ellipsis (``enco…ers.3``), never fewer than
  :data:`MIN_KEPT` characters; where even the groups' first members would collide the member row is left out
  and the heading lists the members (``transformer.h (attn, mlp)``).

:class:`BlockLabels` draws the plan and checks the drawn boxes once more (a label that would still touch its
neighbour is dropped), so no two texts overlap whatever the names and the count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from manim import Line, VGroup

from scenes.kit.style import PALETTE, SIZE_SMALL, make_text

__all__ = ["BlockLabels", "LabelPlan", "plan_block_labels", "block_names", "split_prefix", "middle_ellipsis",
           "unique_names", "short_name", "estimate_width", "STRIDES", "MIN_KEPT", "ELLIPSIS"]

STRIDES = (1, 2, 3, 4, 5, 10, 20, 25, 50, 100, 200, 500, 1000, 10**9)  # every k-th label, k tried in this order
MIN_KEPT = 8  # a label is shortened with an ellipsis only down to this many characters (or its own length)
ELLIPSIS = "…"
_GAP = 0.12  # scene units between two labels of one row
_OVERHANG = 0.3  # how far (scene units) a label may reach past the first or the last block's outer edge


def block_names(trace, blocks: int | None = None) -> list[str]:
    """The names of a trace's blocks in array order: ``meta.layers`` when it names every block (a user model's
    module paths), else ``block.1`` ... ``block.N`` (the built-in runs). ``blocks``: the per-block arrays'
    length (default: ``out_grad_norm``'s last axis, else ``meta.blocks``)."""
    if blocks is None:
        blocks = int(np.shape(trace["out_grad_norm"])[-1]) if "out_grad_norm" in trace.arrays else trace.meta.blocks
    layers = trace.meta.layers
    if layers and len(layers) == blocks:
        return [str(name) for name in layers]
    return [f"block.{l + 1}" for l in range(int(blocks or 0))]


def unique_names(names: Sequence[str]) -> list[str]:
    """``names`` with a repeated one (a module called twice in one forward pass) numbered: ``block``,
    ``block#2``."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def split_prefix(names: Sequence[str]) -> tuple[str, list[str]]:
    """(prefix, rests): the leading dotted components every name shares (``"transformer.h."``; ``""`` when none),
    never a name's last component, and each name without it."""
    parts = [name.split(".") for name in names]
    if not parts:
        return "", []
    limit = min(len(p) for p in parts) - 1
    k = 0
    while k < limit and all(p[k] == parts[0][k] for p in parts):
        k += 1
    prefix = ".".join(parts[0][:k]) + "." if k else ""
    return prefix, [".".join(p[k:]) for p in parts]


def middle_ellipsis(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters with an ellipsis in the middle, keeping more of the end (the
    index): ``middle_ellipsis("encoder.layers.3", 9) == "enco…s.3"``... at least one character each side."""
    if len(text) <= max_chars:
        return text
    keep = max(max_chars - 1, 2)
    tail = (keep + 1) // 2
    return text[:keep - tail] + ELLIPSIS + text[-tail:]


def short_name(name: str, max_chars: int = 14) -> str:
    """One block's name for a readout or a legend: its last two dotted components (``layer3.4``,
    ``11.mlp``), with a middle ellipsis past ``max_chars``."""
    return middle_ellipsis(".".join(name.split(".")[-2:]), max_chars)


# Widths (scene units at size 18) of ASCII characters in DejaVu Sans and Noto Sans CJK, whichever is wider,
# measured from ten of each (Pango); anything else: that of a digit.
_CHAR_WIDTH = {**{c: 0.08 for c in "ijl.,:;|!'"}, **{c: 0.101 for c in "frtI"}, **{c: 0.15 for c in "_sczkvyx"},
               **{c: 0.216 for c in "wM#%@"}, **{c: 0.251 for c in "mW"}, ELLIPSIS: 0.251}


def estimate_width(text: str, size: float = SIZE_SMALL) -> float:
    """Estimated width (scene units) of ``text`` at ``size``: the sum of :data:`_CHAR_WIDTH` (a digit or most
    lower-case letters 0.162 at size 18, capitals 0.185). A planning guess; :class:`BlockLabels` checks the
    drawn boxes."""
    return sum(_CHAR_WIDTH.get(c, 0.185 if c.isupper() else 0.162) for c in text) * size / 18


@dataclass(frozen=True)
class LabelPlan:
    """What a row of block labels shows. ``members``: (block index, text, x of its centre); ``groups``: (first block, last
    block, text; "" when its label is thinned out, x of the text's centre); ``heading``: the shared prefix without its
    trailing dot (``transformer.h``; "" when none; with the members when their row is left out); ``stride`` / ``group_stride``: every how many labels are shown (0: that row is
    left out)."""

    heading: str
    members: tuple[tuple[int, str, float], ...]
    groups: tuple[tuple[int, int, str, float], ...]
    stride: int
    group_stride: int


def _runs(keys: Sequence[str | None]) -> list[list[int]]:
    """Indices of consecutive equal ``keys``, one list per run."""
    runs: list[list[int]] = []
    for i, key in enumerate(keys):
        if runs and keys[runs[-1][0]] == key:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _fit(text: str, room: float, measure: Callable[[str], float], kept: int = MIN_KEPT) -> str | None:
    """``text`` or its longest middle ellipsis (by bisection: widths grow with the characters kept) that
    ``measure`` finds no wider than ``room``; None when that would keep fewer than ``kept`` characters (or fewer
    than the text has)."""
    if measure(text) <= room:
        return text
    low, high = min(len(text), kept), len(text) - 1  # bisect the number of characters kept
    if low > high or measure(middle_ellipsis(text, low)) > room:
        return None
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if measure(middle_ellipsis(text, mid)) <= room else (low, mid - 1)
    return middle_ellipsis(text, low)


def _place(centres: Sequence[float], texts: Sequence[str], measure, gap: float, bounds: tuple[float, float],
           kept: int = MIN_KEPT, drift: float | Sequence[float] = 0.0) -> tuple[list[str], list[float]] | None:
    """(texts, x of each) for texts meant to be centred at ``centres``, moved as little as needed to stay ``gap``
    apart and inside ``bounds`` (:func:`_spread`) but never more than half its width plus ``drift`` (one for all,
    or one per text) from its centre. Tried whole, then each text fitted (:func:`_fit`) into an equal share of
    the row, then into the room its neighbours leave (the smaller distance to the centre before or after, less
    ``gap``) and ``bounds`` leave it centred. None when no attempt fits."""
    drifts = [float(drift)] * len(texts) if isinstance(drift, (int, float)) else [float(d) for d in drift]
    share = (bounds[1] - bounds[0] - gap * (len(texts) - 1)) / max(len(texts), 1)
    for attempt in ("row", "share", "centred"):
        out = []
        for k, (x, text) in enumerate(zip(centres, texts)):
            near = [abs(x - centres[j]) - gap for j in (k - 1, k + 1) if 0 <= j < len(centres)]
            room = {"row": bounds[1] - bounds[0], "share": share,
                    "centred": min(near + [2 * (x - bounds[0]), 2 * (bounds[1] - x)])}[attempt]
            fitted = _fit(text, room, measure, kept)
            if fitted is None:
                break
            out.append(fitted)
        if len(out) < len(texts):
            continue
        widths = [measure(text) for text in out]
        xs = _spread(centres, widths, gap, bounds)
        if xs is not None and all(abs(x - c) <= w / 2 + d for x, c, w, d in zip(xs, centres, widths, drifts)):
            return out, xs
    return None


def _spread(desired: Sequence[float], widths: Sequence[float], gap: float,
            bounds: tuple[float, float]) -> list[float] | None:
    """Centres as near ``desired`` as they can be (least squares) with neighbours ``gap`` apart, edge to edge,
    and every text inside ``bounds``; None when the texts do not fit side by side. Pool-adjacent-violators on
    the centres less the cumulative widths (an isotonic regression)."""
    offsets, total = [], 0.0
    for k, w in enumerate(widths):
        total += 0.0 if k == 0 else (widths[k - 1] + w) / 2 + gap
        offsets.append(total)
    blocks: list[list[float]] = []  # [mean, count] of pooled targets
    for target in (d - o for d, o in zip(desired, offsets)):
        blocks.append([target, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            value, count = blocks.pop()
            blocks[-1] = [(blocks[-1][0] * blocks[-1][1] + value * count) / (blocks[-1][1] + count),
                          blocks[-1][1] + count]
    ys = [value for value, count in blocks for _ in range(int(count))]
    low, high = bounds[0] + widths[0] / 2 - offsets[0], bounds[1] - widths[-1] / 2 - offsets[-1]
    if low > high + 1e-9:
        return None
    return [min(max(y, low), high) + o for y, o in zip(ys, offsets)]


def _member_choice(runs: list[list[int]], k: int, last_too: bool) -> list[int]:
    """Every ``k``-th block of each run (its first always), none within k/2 blocks of the run's end; with
    ``last_too`` the very last block as well (it replaces the chosen block nearest it if they are close)."""
    chosen = []
    for run in runs:
        picks = [i for j, i in enumerate(run) if j % k == 0 and (j == 0 or len(run) - j >= (k + 1) // 2)]
        chosen += picks
    if last_too:
        last = runs[-1][-1]
        if chosen[-1] != last:
            if last - chosen[-1] < (k + 1) // 2 and len(chosen) > 1:
                chosen[-1] = last
            else:
                chosen.append(last)
    return chosen


def plan_block_labels(names: Sequence[str], xs: Sequence[float], bounds: tuple[float, float] | None = None,
                      measure: Callable[[str], float] = estimate_width, gap: float = _GAP) -> LabelPlan:
    """The labels of ``names`` (module paths, in block order) under blocks centred at ``xs`` (increasing,
    evenly spaced, scene units); no label reaches past ``bounds`` (default: half a block spacing plus
    :data:`_OVERHANG` beyond the end blocks).

    Raises ValueError for no names, or ``xs`` of another length or not increasing. See the module docstring
    for the rules."""
    n = len(names)
    if not n:
        raise ValueError("no block names to label")
    centre = [float(x) for x in xs]
    if len(centre) != n:
        raise ValueError(f"{n} names for {len(centre)} blocks")
    if n > 1 and not all(b > a for a, b in zip(centre, centre[1:])):
        raise ValueError("block positions must increase")
    slot = (centre[-1] - centre[0]) / (n - 1) if n > 1 else 1.0
    if bounds is None:
        bounds = (centre[0] - slot / 2 - _OVERHANG, centre[-1] + slot / 2 + _OVERHANG)
    prefix, rests = split_prefix(unique_names(names))
    head = prefix.rstrip(".")  # the heading: the shared components, without the separator that joined them
    split = [rest.rsplit(".", 1) if "." in rest else [None, rest] for rest in rests]
    runs = _runs([g for g, _ in split])
    grouped = any(len(run) > 1 and split[run[0]][0] is not None for run in runs)
    if not grouped:  # one row of whole names: 0, k, 2k, ... and the last; shorter ellipses only if nothing fits
        for kept in (MIN_KEPT, 3, 1):
            for k in STRIDES:
                chosen = _member_choice([list(range(n))], k, last_too=True)
                placed = _place([centre[i] for i in chosen], [rests[i] for i in chosen], measure, gap, bounds, kept)
                if placed is not None:
                    return LabelPlan(head, tuple(zip(chosen, *placed)), (), k, 0)
        return LabelPlan(head, (), (), 0, 0)  # not even "…" fits between the bounds
    # groups: every k-th group labelled, as near the middle of its blocks as its neighbours allow, but always
    # over some of them (a label never drifts off its own bracket)
    half = slot / 2
    group_centre = [(centre[run[0]] + centre[run[-1]]) / 2 for run in runs]
    group_half = [(centre[run[-1]] - centre[run[0]]) / 2 + half for run in runs]
    group_text = [split[run[0]][0] or "" for run in runs]
    group_stride, shown, where = 0, [""] * len(runs), list(group_centre)
    for k in STRIDES:
        chosen = [r for r in range(0, len(runs), k) if group_text[r]]
        if not chosen:
            break
        placed = _place([group_centre[r] for r in chosen], [group_text[r] for r in chosen], measure, gap, bounds,
                        drift=[group_half[r] - 0.6 * half for r in chosen])
        if placed is not None:
            group_stride = k
            for r, text, x in zip(chosen, *placed):
                shown[r], where[r] = text, x
            break
    groups = tuple((run[0], run[-1], text, x) for run, text, x in zip(runs, shown, where))
    member_text = [m for _, m in split]
    if group_stride == 1:
        for k in STRIDES:
            chosen = _member_choice(runs, k, last_too=False)
            if k > 1 and len(chosen) == len(runs):
                break  # only each group's first member would be left: the row says nothing
            placed = _place([centre[i] for i in chosen], [member_text[i] for i in chosen], measure, gap, bounds)
            if placed is not None:
                return LabelPlan(head, tuple(zip(chosen, *placed)), groups, k, group_stride)
    distinct = list(dict.fromkeys(m for g, m in split if g is not None))
    if all(m.isdigit() for m in distinct):  # the blocks of a stage, numbered: the brackets say enough
        return LabelPlan(head, (), groups, 0, group_stride)
    listed = ", ".join(middle_ellipsis(m, 12) for m in (distinct if len(distinct) <= 4 else distinct[:2] + ["…"]))
    heading = f"{head} ({listed})" if head else f"({listed})"
    return LabelPlan(heading, (), groups, 0, group_stride)


class BlockLabels(VGroup):
    """The labels of a row of blocks whose centres are ``xs`` (scene x, evenly spaced, increasing).

    Rows from the top: the member labels (``0``, ``attn``), a bracket under each group of blocks, the group
    labels (``layer3``). ``heading`` is a Text of the shared prefix (or None); it is not part of the group: the
    scene places it. ``plan`` is the :class:`LabelPlan` drawn; ``dropped`` counts labels left out because
    their drawn box touched a neighbour's."""

    def __init__(self, names: Sequence[str], xs: Sequence[float], bounds: tuple[float, float] | None = None,
                 size: float = SIZE_SMALL, color=None, gap: float = _GAP) -> None:
        super().__init__()
        xs = np.asarray(xs, dtype=np.float64)
        color = color or PALETTE["muted"]
        self.plan = plan_block_labels(names, xs, bounds, lambda s: estimate_width(s, size), gap)
        n = len(names)
        slot = float(xs[-1] - xs[0]) / (n - 1) if n > 1 else 1.0
        left = float(xs[0]) - slot / 2
        self.dropped = 0
        self.bounds = bounds if bounds is not None else (xs[0] - slot / 2 - _OVERHANG,
                                                                             xs[-1] + slot / 2 + _OVERHANG)
        self.members = self._row([(x, text) for _, text, x in self.plan.members], size, color, 0.0, gap)
        top = -(self.members.height + 0.08) if len(self.members) else 0.0
        self.brackets = VGroup()
        if self.plan.groups:
            for first, last, _, _ in self.plan.groups:
                inset = 0.2 * min(slot, 0.2)  # a small space between the brackets of neighbouring groups
                a, b = left + first * slot + inset, left + (last + 1) * slot - inset
                self.brackets.add(Line([a, top, 0], [b, top, 0], color=color, stroke_width=2),
                                  Line([a, top, 0], [a, top + 0.07, 0], color=color, stroke_width=2),
                                  Line([b, top, 0], [b, top + 0.07, 0], color=color, stroke_width=2))
        placed = [(x, text) for _, _, text, x in self.plan.groups if text]
        self.groups = self._row(placed, size, color, top - 0.08, gap)
        self.add(self.members, self.brackets, self.groups)
        self.heading = make_text(self.plan.heading, size=size, color=color) if self.plan.heading else None

    def _row(self, items: list[tuple[float, str]], size: float, color, top: float, gap: float) -> VGroup:
        """Texts centred at x with their tops at ``top``, moved inside the bounds where the drawn box reaches
        past them; one whose box then comes within half ``gap`` of the one kept before it is dropped (the plan's
        widths are estimates)."""
        row = VGroup()
        right = -math.inf
        low, high = self.bounds
        for x, text in items:
            mob = make_text(text, size=size, color=color)
            mob.move_to([x, 0, 0]).align_to([0, top, 0], direction=[0, 1, 0])
            mob.shift([max(low - mob.get_left()[0], 0.0) + min(high - mob.get_right()[0], 0.0), 0, 0])
            if mob.get_left()[0] < right + gap * 0.5 or mob.width > high - low:
                self.dropped += 1
                continue
            right = mob.get_right()[0]
            row.add(mob)
        return row

    def below(self, mobject, buff: float = 0.1) -> "BlockLabels":
        """Put the labels' top ``buff`` under ``mobject``, keeping their x."""
        self.shift((mobject.get_bottom()[1] - buff - self.get_top()[1]) * np.array([0, 1, 0]))
        return self
