"""Cheaper frames for the same pixels: still parts drawn once per ``play``, restyling without copies.

Example::

    moved = draw_first(self, title, legend, *row_labels)   # inside construct(), before a long animation
    self.play(Restyle(bars, lambda bar, i: bar.set_fill(opacity=levels[i])), run_time=0.4)

Manim's Cairo renderer draws, at the start of every ``play``, the mobjects *before* the first one that
moves into a background image, then redraws only the first moving mobject and everything after it (in
drawing order) on every frame. A label added after an animated chart is therefore redrawn at every frame
although it never changes. :func:`draw_first` moves such parts to the front of the drawing order. That
changes no pixel only where a part overlaps nothing it is moved in front of, so every part is checked on
bounding boxes (grown by ``margin`` for strokes and anti-aliasing) against each mobject it would pass;
a part that touches one stays where it is.

:class:`Restyle` animates every member of a group to a new style the way ``member.animate.set_fill(...)``
does (Manim's Transform: the same straight-path interpolation of points and colours, frame for frame), but
without the two deep copies per member that each ``.animate`` makes, which cost more than the drawing in
scenes that restyle dozens of blocks per step.

:func:`drop_svg_paths` lets the glyphs of a ``Text`` forget the svgelements path they were built from:
Manim reads it once, to make the points, but every deep copy (each Transform, FadeIn, ``.animate``) copies it
again, which made copying a line of text 6-7 times slower than copying its points. :func:`share_svg_paths` does
the same for every glyph (``MathTex`` and braces included): a copy shares the path instead of copying it.

Building a text costs more than copying it: ~60 ms per line in Manim 0.22, most of it reading Pango's SVG.
:class:`GlyphText` (what ``make_text`` builds) skips the VGroup per SVG element (~100 per line) that no text
reads, and :func:`parse_each_path_once` lets svgelements parse each distinct path string (a glyph of a font at
a size, used again in every later text) once per process. Together: ~40 % less per text, the same points.

Every ``tempconfig`` sets Manim's ``config.renderer`` twice (on entry and again when it restores the config), and
Manim's setter reassigns ``__bases__`` of every class made by its ``ConvertToOpenGL`` metaclass (~300) each time,
even when the renderer stays what it was: ~8 ms a call. :func:`keep_renderer_bases` skips that reassignment when
the renderer asked for is the one the bases were last set for.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import svgelements as se
from manim import RIGHT, Animation, Mobject, Scene, Text, config, logger
from manim._config.utils import ManimConfig
from manim.constants import RendererType
from manim.utils.paths import straight_path

__all__ = ["draw_first", "boxes_overlap", "Restyle", "drop_svg_paths", "share_svg_paths", "GlyphText",
           "parse_each_path_once", "PARSED_PATHS_MAX", "keep_renderer_bases"]

_STYLE = ("fill_rgbas", "stroke_rgbas", "background_stroke_rgbas", "stroke_width", "background_stroke_width",
          "sheen_direction", "sheen_factor")  # what VMobject.interpolate_color interpolates


def _box(mob: Mobject, margin: float) -> np.ndarray | None:
    """[[x_min, y_min], [x_max, y_max]] of ``mob``'s points (scene units), grown by ``margin``; None without points."""
    points = [m.points[:, :2] for m in mob.family_members_with_points()]
    if not points:
        return None
    allp = np.concatenate(points)
    return np.array([allp.min(axis=0) - margin, allp.max(axis=0) + margin])


def boxes_overlap(a: Mobject, b: Mobject, margin: float = 0.08) -> bool:
    """Whether the bounding boxes of ``a`` and ``b`` (each grown by ``margin`` scene units) intersect."""
    box_a, box_b = _box(a, margin), _box(b, margin)
    if box_a is None or box_b is None:
        return False
    return bool(np.all(box_a[0] <= box_b[1]) and np.all(box_b[0] <= box_a[1]))


def draw_first(scene: Scene, *parts: Mobject, margin: float = 0.08) -> list[Mobject]:
    """Move each of ``parts`` (mobjects on screen, or submobjects of them) to the front of ``scene``'s
    drawing order, in the order given, where that changes no pixel; returns the parts moved.

    A part is moved only when its bounding box, grown by ``margin`` scene units on each side, meets the box
    of no drawn mobject (leaf with points) that comes before it now and is not itself moved: those are the
    ones it will be drawn under instead of over. Call it when the parts will not be animated in the plays
    that follow (an animated part is redrawn at every frame either way), and when what they pass stays where
    it is while they are on screen (a mobject that later moves over a part would be drawn over it).
    Scenes with ``z_index`` set keep their order (nothing is moved)."""
    if scene.renderer.camera.use_z_index and any(m.z_index for m in scene.get_mobject_family_members()):
        return []
    order = scene.get_mobject_family_members()
    position = {id(m): i for i, m in enumerate(order)}
    moved: list[tuple[int, Mobject]] = []
    taken: set[int] = set()
    for part in parts:
        family = [m for m in part.family_members_with_points()]
        if not family or any(id(m) not in position for m in family):
            continue  # not on screen (or only partly): leave it
        first = min(position[id(m)] for m in family)
        members = {id(m) for m in part.get_family()}
        passed = [m for m in order[:first] if id(m) not in members and id(m) not in taken
                  and len(m.points) and m not in scene.foreground_mobjects]
        if any(boxes_overlap(part, m, margin) for m in passed):
            continue
        # the family in between must be contiguous, or members of other parts would be reordered with it
        last = max(position[id(m)] for m in family)
        inside = [m for m in order[first:last + 1] if len(m.points)]
        if any(id(m) not in members for m in inside):
            continue
        moved.append((first, part))
        taken.update(members)
    moved.sort(key=lambda pair: pair[0])  # the moved parts keep their order among themselves
    if moved:
        scene.bring_to_back(*(part for _, part in moved))
    return [part for _, part in moved]


def drop_svg_paths(mob: Mobject) -> Mobject:
    """Set ``path_obj`` (the parsed svgelements path of an SVG glyph, read only when its points are made, in
    ``VMobjectFromSVGPath.__init__``) to None on every member of ``mob``'s family; returns ``mob``. Points,
    colours and so every frame stay the same. (A :class:`GlyphText` has no ``id_to_vgroup_dict`` groups to copy
    either.)"""
    for member in mob.get_family():
        if getattr(member, "path_obj", None) is not None:
            member.path_obj = None
    return mob


def _copy_sharing_path(self, memo: dict):
    if self.path_obj is not None:
        memo[id(self.path_obj)] = self.path_obj  # deepcopy hands back what the memo holds: this same path
    return Mobject.__deepcopy__(self, memo)


def share_svg_paths() -> None:
    """Make every deep copy of an SVG glyph (``VMobjectFromSVGPath``: the parts of ``Text``, ``MathTex``,
    ``Brace``) share its svgelements ``path_obj`` with the original instead of copying it (~10 objects per
    curve). Manim reads the path only in ``__init__``, to make the points (and there, before any copy, makes
    its arcs quadratic); points and colours are still copied, so every frame is the same. Idempotent; installed
    by :meth:`scenes.kit.base.LectureScene.setup`. In the tests' dry builds, copies of glyphs were about a third of
    the deep-copying time."""
    from manim.mobject.svg.svg_mobject import VMobjectFromSVGPath

    if "__deepcopy__" not in VMobjectFromSVGPath.__dict__:
        VMobjectFromSVGPath.__deepcopy__ = _copy_sharing_path


_SHAPES = (se.Path, se.SimpleLine, se.Rect, se.Circle, se.Ellipse, se.Polygon, se.Polyline, se.Text)


class GlyphText(Text):
    """Manim's ``Text`` without the groups nothing reads, and with each glyph's outline read once per process.

    ``SVGMobject.get_mobjects_from`` makes a VGroup per element of the SVG (each glyph's ``<use>``, its group, the
    root) for ``id_to_vgroup_dict``, which only ``MathTex``'s colouring by substring uses. This reads the same
    elements in the same order (a depth-first walk of groups and uses) into the same glyphs, and leaves
    ``id_to_vgroup_dict`` empty. As in Manim, an element that cannot be read is logged and skipped.

    Pango writes each glyph once (a ``<symbol>`` with one path) and places it with ``<use x= y=>``; svgelements
    copies, parses and transforms the glyph's path anew at every place, and Manim turns its segments into points
    one by one (~70 % of a text's cost). :meth:`generate_mobject` hands svgelements the same document with each
    glyph's path cut to a one-move stand-in (styles, uses and transforms as they were), and makes each glyph's
    points from its outline read once (:func:`_glyph_outline`): svgelements' own matrix arithmetic on the same
    numbers, then Manim's ``handle_commands`` arithmetic, vectorised, in the same order of operations: the same
    points, bit for bit (tests/test_frame_cost.py compares with Manim's ``Text``). A document with anything else
    to draw (a shape outside a ``<symbol>``, an arc) and the OpenGL renderer take Manim's way."""

    def generate_mobject(self):
        glyphs = _placed_glyphs(self) if config.renderer == RendererType.CAIRO else None
        if glyphs is None:
            return super().generate_mobject()
        self.add(*glyphs)
        self.id_to_vgroup_dict = {}
        self.flip(RIGHT)  # Flip y, as SVGMobject.generate_mobject does
        return self

    def get_mobjects_from(self, svg: se.SVG) -> tuple[list, dict]:
        glyphs, stack = [], [svg]
        while stack:
            element = stack.pop()
            if isinstance(element, (se.Group, se.Use)):
                stack.extend(element[::-1])
            if isinstance(element, _SHAPES):
                try:
                    glyph = self.get_mob_from_shape_element(element)
                except Exception as exc:  # what Manim's loop does with it
                    logger.error(f"Exception occurred in 'get_mobjects_from'. Details: {exc}")
                    continue
                if glyph is not None:
                    glyphs.append(glyph)
        return glyphs, {}


_SVG_NS = "{http://www.w3.org/2000/svg}"
_DRAWN_TAGS = {_SVG_NS + tag for tag in ("path", "rect", "circle", "ellipse", "line", "polyline", "polygon", "image",
                                         "text")}
GLYPH_OUTLINES_MAX = 20_000  # distinct glyph paths kept (PARSED_PATHS_MAX's count)
_OUTLINES: dict[str, tuple | None] = {}


def _glyph_outline(pathdef: str) -> tuple | None:
    """The points Manim reads from svgelements' parse of ``pathdef`` (an (n, 2) array, in segment order) and the
    program of ``VMobjectFromSVGPath.handle_commands`` over them: ("M", i) a move to point i, ("L", i), ("Q", c, i),
    ("C", c1, c2, i) a line or curve from the pen to point i, ("Z",) a close. None where a segment is one Manim
    turns into others (an arc): that text takes Manim's way."""
    if pathdef in _OUTLINES:
        return _OUTLINES[pathdef]
    path = se.Path()
    _PARSE(path, pathdef)
    points, program = [], []

    def point(p) -> int:
        points.append((p[0], p[1]))
        return len(points) - 1

    outline = None
    for segment in path._segments:
        kind = segment.__class__
        if kind is se.Move:
            program.append(("M", point(segment.end)))
        elif kind is se.Line:
            program.append(("L", point(segment.end)))
        elif kind is se.QuadraticBezier:
            program.append(("Q", point(segment.control), point(segment.end)))
        elif kind is se.CubicBezier:
            program.append(("C", point(segment.control1), point(segment.control2), point(segment.end)))
        elif kind is se.Close:
            program.append(("Z",))
        else:
            break
    else:
        outline = (np.array(points, dtype=np.float64).reshape(-1, 2), tuple(program))
    if len(_OUTLINES) < GLYPH_OUTLINES_MAX:
        _OUTLINES[pathdef] = outline
    return outline


def _outline_points(outline: tuple, matrix: se.Matrix) -> np.ndarray | None:
    """The points ``handle_commands`` makes of the glyph ``outline`` placed by ``matrix`` (Cairo: four per cubic);
    None where the program draws before its first move (Manim raises there)."""
    xy, program = outline
    x, y = xy[:, 0], xy[:, 1]
    placed = np.zeros((len(xy), 3))
    placed[:, 0] = x * matrix.a + y * matrix.c + 1 * matrix.e  # svgelements' Matrix.point_in_matrix_space
    placed[:, 1] = x * matrix.b + y * matrix.d + 1 * matrix.f
    copies, thirds = [], []  # (row, point) and (row, i, j, k): row = (p_i + p_j + p_k) / 3, Manim's order
    rows = 0
    pen = start = None

    def cubic(p0, c1, c2, p3) -> None:
        nonlocal rows
        for offset, row in enumerate((p0, c1, c2, p3)):
            (copies if isinstance(row, int) else thirds).append((rows + offset, row))
        rows += 4

    for op in program:
        code = op[0]
        if code == "M":
            pen = start = op[1]
            continue
        if pen is None:
            return None
        if code == "L":
            cubic(pen, (pen, pen, op[1]), (pen, op[1], op[1]), op[1])
        elif code == "Q":
            cubic(pen, (pen, op[1], op[1]), (op[1], op[1], op[2]), op[2])
        elif code == "C":
            cubic(pen, op[1], op[2], op[3])
        else:  # close: a line back to the last move where the pen is not already there
            if abs(np.linalg.norm(placed[pen] - placed[start])) > 0.0001:
                cubic(pen, (pen, pen, start), (pen, start, start), start)
            else:
                continue
        pen = op[-1] if code != "Z" else start
    out = np.empty((rows, 3))
    if copies:
        at, source = np.array(copies).T
        out[at] = placed[source]
    if thirds:
        at = np.array([row for row, _ in thirds])
        i, j, k = np.array([ijk for _, ijk in thirds]).T
        out[at] = (placed[i] + placed[j] + placed[k]) / 3
    return out


def _placed_glyphs(text: Text) -> list | None:
    """The glyph mobjects of ``text``'s Pango SVG, or None where the document is not only glyphs placed by uses."""
    import io
    import xml.etree.ElementTree as ET

    from manim.mobject.svg.svg_mobject import VMobjectFromSVGPath

    tree = ET.parse(text.get_file_path())
    outlines = []
    for symbol in tree.getroot().iter(_SVG_NS + "symbol"):
        for element in symbol:
            if element.tag != _SVG_NS + "path" or len(element):
                return None
            outline = _glyph_outline(element.get("d", ""))
            if outline is None:
                return None
            element.set("d", f"M {len(outlines)} 0")  # the stand-in: which glyph it is
            outlines.append(outline)
    stand_ins = {id(element) for symbol in tree.getroot().iter(_SVG_NS + "symbol") for element in symbol}
    if any(element.tag in _DRAWN_TAGS and id(element) not in stand_ins for element in tree.getroot().iter()):
        return None
    svg = se.SVG.parse(io.BytesIO(ET.tostring(text.modify_xml_tree(tree).getroot())), reify=False)
    glyphs, stack = [], [svg]
    while stack:  # GlyphText.get_mobjects_from's walk
        element = stack.pop()
        if isinstance(element, (se.Group, se.Use)):
            stack.extend(element[::-1])
        if not isinstance(element, _SHAPES):
            continue
        if not isinstance(element, se.Path) or len(element._segments) != 1:
            return None
        glyph = outlines[int(element._segments[0].end[0])]
        matrix = se.Matrix(element.transform)
        element.reify()  # what parsing with reify does to the shape: its stroke width, its transform reset
        points = _outline_points(glyph, matrix)
        if points is None:
            return None
        if not len(points):
            continue  # Manim's get_mob_from_shape_element: a path without points is no glyph
        mob = VMobjectFromSVGPath(se.Path(), **text.path_string_config)
        mob.points = points
        text.apply_style_to_mobject(mob, element)
        if isinstance(element, se.Transformable) and element.apply:
            text.handle_transform(mob, element.transform)
        glyphs.append(mob)
    return glyphs


PARSED_PATHS_MAX = 20_000  # distinct path strings kept (a glyph is ~2-4 kB of segments): the lecture uses ~3,000
_PARSED: dict[str, list] = {}
_PARSE = se.Path.parse


def _parse_once(path: se.Path, pathdef) -> None:
    if path._segments or not isinstance(pathdef, str):  # appending to a path already drawn: parse as svgelements does
        return _PARSE(path, pathdef)
    segments = _PARSED.get(pathdef)
    if segments is None:
        fresh = se.Path()
        _PARSE(fresh, pathdef)
        segments = fresh._segments
        if len(_PARSED) < PARSED_PATHS_MAX:
            _PARSED[pathdef] = segments
    path._segments.extend(copy.copy(segment) for segment in segments)  # each path gets its own (reify moves them)


def parse_each_path_once() -> None:
    """Make svgelements parse each distinct SVG path string (``d``) once per process: a path parsed again gets
    copies of the segments parsed the first time (svgelements' own ``copy``: new segments with new points, which
    the path's transform then moves in place as before). Pango writes a glyph of one font at one size as the same
    string in every text, dvisvgm a TeX glyph likewise, so most paths of a lecture are parsed again and again.
    Only a path parsed while empty is served from the memo; points are the same as parsing
    (tests/test_frame_cost.py). Idempotent; installed by :meth:`scenes.kit.base.LectureScene.setup`."""
    se.Path.parse = _parse_once


_SET_RENDERER = ManimConfig.renderer.fset  # Manim's setter: switches the converted classes' bases, then stores
_BASES_SET_FOR: list = [None]  # the RendererType the converted classes' bases were last switched to


def _set_renderer(self: ManimConfig, value) -> None:
    renderer = RendererType(value.lower() if isinstance(value, str) else value)  # Manim's own check: ValueError
    if renderer is _BASES_SET_FOR[0]:  # the bases are those of this renderer already: store the value alone
        self._set_from_enum("renderer", renderer, RendererType)
        return
    _SET_RENDERER(self, value)
    _BASES_SET_FOR[0] = renderer


def keep_renderer_bases() -> None:
    """Make ``config.renderer = r`` (every ``tempconfig`` does it on entry and on exit, in every ManimConfig)
    switch the bases of Manim's ``ConvertToOpenGL`` classes only when ``r`` differs from the renderer they were
    last switched to; the first call after installing switches them as Manim does. Values and errors are Manim's
    (a bad name raises its ValueError). Idempotent; installed by :meth:`scenes.kit.base.LectureScene.setup`."""
    if ManimConfig.renderer.fset is not _set_renderer:
        ManimConfig.renderer = ManimConfig.renderer.setter(_set_renderer)


def _snapshot(mob: Mobject) -> SimpleNamespace:
    """Copies of what Mobject.interpolate reads from a start or target mobject: points and the style arrays."""
    return SimpleNamespace(points=mob.points.copy(),
                           **{a: (lambda v: v.copy() if isinstance(v, np.ndarray) else v)(getattr(mob, a))
                              for a in _STYLE if hasattr(mob, a)})


class Restyle(Animation):
    """Animate each member of ``group`` (a group already on screen) from its style now to the style
    ``restyle(member, index)`` sets (e.g. ``member.set_fill(opacity=0.4)``); ``restyle`` must change
    style only, in place.

    Frame for frame the same as one ``member.animate.<method>(...)`` animation per member played with the
    same ``run_time`` and ``rate_func`` (Transform's straight path, ``lag_ratio`` 0): each family member is
    set to ``interpolate(start, target, rate_func(alpha))`` of its points and style arrays."""

    def __init__(self, group: Mobject, restyle: Callable[[Mobject, int], object], **kwargs) -> None:
        self._restyle = restyle
        self._pairs: list[tuple[Mobject, SimpleNamespace, SimpleNamespace]] = []
        super().__init__(group, **kwargs)

    def create_starting_mobject(self) -> Mobject:
        return Mobject()  # the start is kept as snapshots, not as a deep copy of the group

    def begin(self) -> None:
        family = [m for member in self.mobject.submobjects for m in member.get_family()]  # not the group itself
        starts = [_snapshot(m) for m in family]
        for index, member in enumerate(self.mobject.submobjects):
            self._restyle(member, index)
        self._pairs = [(m, start, _snapshot(m)) for m, start in zip(family, starts)]
        super().begin()  # interpolate(0): back to the start

    def interpolate_mobject(self, alpha: float) -> None:
        sub_alpha = self.get_sub_alpha(alpha, 0, 1)
        path = straight_path()
        for mob, start, end in self._pairs:
            mob.interpolate(start, end, sub_alpha, path)
