"""Text that fits: a translated or reworded text that reaches past the frame, or onto another text, is wrapped,
shrunk (never below the legibility floor), moved or stacked until it fits.

Example::

    from scenes.kit.fit import fit_text, fit_texts
    note = fit_text(label, frame_width=14.22, frame_height=8.0)   # None: it fitted already
    notes = fit_texts(scene.mobjects, 14.22, 8.0, [FadeIn(caption)])   # before the animation plays

:class:`scenes.kit.base.LectureScene` calls :func:`fit_texts` before every animation when the words are not the
lecture's own English or Chinese (another language, the pseudo-locale en-XA, ``--text``): those layouts were drawn
for their words, and stay untouched frame for frame. It works on the texts that will be on screen once the
animation has run (:func:`texts_after`), in two steps:

1. each by itself (:func:`fit_text`): a text its scene scaled below the floor (cap height 1/45 of the frame:
   scenes/kit/layout.py) is set back to it; one wider than the safe area (the frame less a :data:`MARGIN` on each
   side) is broken onto a second line at the space nearest its middle (keeping the edge it is set from when it ran
   past only the other side), else scaled down to the safe width but never below the floor; then moved inside.
2. each two whose boxes overlap (:func:`make_room`): the one not drawn yet gives way, by the first of: shrinking
   away from the other about its far edge (to the floor at most), wrapping onto two lines that grow away from the
   other (downwards below it), both, moving up, down or aside; where none keeps it inside and clear of every other
   text, the texts of that column are stacked one under the other and lifted inside the margin. Two side by side
   on one line closer than the layout check's MIN_GAP count as overlapping; a text over a marker (a ``Dot``) leaves
   it the same ways, and no way lands a text on one.

What is left is what the layout check (scenes.kit.layout.layout_problems) reports. Each change is one line of
``LectureScene.fitted`` (the scene, the text, by how much, how), written to the numbers JSON and printed by
``render.py i18n check`` and, for your own words, by ``render.py render`` before it renders.
"""

from __future__ import annotations

from collections.abc import Iterable

from manim import Mobject, Text

from scenes.kit.layout import CAP_FLOOR, MARGIN, MIN_GAP, bounding_box, cap_height, markers, text_mobjects

__all__ = ["MARGIN", "fit_text", "fit_texts", "make_room", "overshoot", "texts_after", "citation_room"]


def _box(mob: Mobject) -> tuple[float, float, float, float]:
    """(left, right, bottom, top) of ``mob`` in scene units (scenes.kit.layout.bounding_box)."""
    return tuple(float(v) for v in bounding_box(mob))


def citation_room(citation: Mobject) -> tuple[float, float, float, float]:
    """The box a citation (``LectureScene.cite_label``) keeps to itself: its own, :data:`CITATION_ROOM` higher and
    lower, so that a text clear of it (overlapping it by no more than the check's tolerance) is at least the layout
    check's :data:`MIN_GAP` above or below the citation."""
    left, right, bottom, top = _box(citation)
    return left, right, bottom - CITATION_ROOM, top + CITATION_ROOM


def _is_citation(mob: Mobject) -> bool:
    """Whether ``mob`` is (or holds) the citation: a text with ``citation = True`` (``LectureScene.cite_label``)."""
    return any(getattr(text, "citation", False) for text in text_mobjects([mob]))


def _room_box(mob: Mobject) -> tuple[float, float, float, float]:
    """The box :func:`make_room` keeps ``mob`` in: :func:`_box`, a citation's (``citation = True``) its
    :func:`citation_room`."""
    if _is_citation(mob):
        return citation_room(mob)
    return _box(mob)


def overshoot(mob: Mobject, frame_width: float, frame_height: float, margin: float = MARGIN) -> float:
    """How far (scene units) ``mob`` reaches past the safe area on its worst side; 0 when inside."""
    left, right, bottom, top = _box(mob)
    half_w, half_h = frame_width * (0.5 - margin), frame_height * (0.5 - margin)
    return max(0.0, -half_w - left, right - half_w, -half_h - bottom, top - half_h)


def _wrapped(text: Text) -> Text | None:
    """``text`` on two lines, broken at the space nearest its middle (None: no space, or a line already broken)."""
    words = getattr(text, "original_text", "")
    if "\n" in words or " " not in words.strip():
        return None
    middle = len(words) / 2
    cut = min((i for i, c in enumerate(words) if c == " "), key=lambda i: abs(i - middle))
    from scenes.kit.style import make_text

    return make_text(words[:cut] + "\n" + words[cut + 1:], size=text.font_size, color=text.get_color())


def _adopt(text: Text, lines: Text) -> None:
    """After ``text.become(lines)``: what the layout check measures a text's size by (scenes.kit.layout.cap_height:
    Manim's ``font_size``) and the words follow the new lines."""
    text.initial_height, text.original_text, text._font_size = lines.initial_height, lines.original_text, \
        lines._font_size


def fit_text(text: Text, frame_width: float, frame_height: float, margin: float = MARGIN) -> str | None:
    """Bring ``text`` inside the safe area in place (see the module docstring); a one-line note of what was done,
    or None when it fitted."""
    done = []
    left, right, bottom, top = _box(text)
    try:
        small = CAP_FLOOR * frame_height / cap_height(text, top - bottom)
    except TypeError:  # not a text
        small = 1.0
    if small > 1 + 1e-6:  # scaled below the floor by its scene (to fit a place its words outgrew): back to it
        text.scale(small * 1.001)
        done.append(f"scaled up to the legibility floor ({small:.0%})")
    over = overshoot(text, frame_width, frame_height, margin)
    if over <= 1e-6 and not done:
        return None
    safe_w, safe_h = frame_width * (1 - 2 * margin), frame_height * (1 - 2 * margin)
    width = text.width
    if width > safe_w:
        two = _wrapped(text) if isinstance(text, Text) else None
        if two is not None and two.width < width:
            centre, (left, right, _, _) = text.get_center(), _box(text)
            text.become(two).move_to(centre)
            _adopt(text, two)
            # keep the edge it is set from: a line of a left-aligned list that ran off the right keeps its left edge
            # (centred, it would jump out of the list's column), one that ran off the left its right edge
            half_w = frame_width * (0.5 - margin)
            if left >= -half_w and right > half_w:
                text.shift([left - _box(text)[0], 0, 0])
            elif right <= half_w and left < -half_w:
                text.shift([right - _box(text)[1], 0, 0])
            done.append("wrapped onto two lines")
        if text.width > safe_w:
            try:  # never below the house's smallest capitals: the layout check reports what is still too wide
                least = CAP_FLOOR * frame_height / cap_height(text)
            except TypeError:
                least = 0.0
            factor = max(safe_w / text.width, min(1.0, least))
            text.scale(factor)
            done.append(f"scaled to {factor:.0%}" + (f", still {text.width - safe_w:.2f} units too wide"
                                                      if text.width > safe_w + 1e-6 else ""))
    if text.height > safe_h:
        text.scale(safe_h / text.height)
        done.append("scaled to the frame's height")
    left, right, bottom, top = _box(text)
    half_w, half_h = frame_width * (0.5 - margin), frame_height * (0.5 - margin)
    dx = max(0.0, -half_w - left) - max(0.0, right - half_w)
    dy = max(0.0, -half_h - bottom) - max(0.0, top - half_h)
    if dx or dy:
        text.shift([dx, dy, 0])
        done.append(f"moved {abs(dx) + abs(dy):.2f} in")
    words = str(getattr(text, "original_text", "") or type(text).__name__).replace("\n", " ")
    if small > 1 + 1e-6 and over <= 1e-6:
        return f"{words[:60]!r} was drawn at {1 / small:.0%} of the legibility floor: " + ", ".join(done)
    return f"{words[:60]!r} reached {over:.2f} units ({over / frame_width:.1%} of the width) past the safe area: " \
           + ", ".join(done)


def _overlap(a: tuple, b: tuple) -> tuple[float, float]:
    """(dx, dy): how far two boxes (left, right, bottom, top) overlap on each axis (<= 0: apart)."""
    return min(a[1], b[1]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[2], b[2])


def fit_texts(mobjects: Iterable[Mobject], frame_width: float, frame_height: float, animations: Iterable = (),
              drawn: Iterable[Mobject] | None = None, reserved: Iterable[tuple] = ()) -> list[str]:
    """Before ``animations`` play on a scene showing ``mobjects``: :func:`fit_text` on every outermost text that
    will be on screen (:func:`texts_after`; LaTeX too: moved and shrunk, never wrapped), then :func:`make_room`
    between them, where the texts not in ``drawn`` (None: those the animations bring) give way first; the notes.
    ``reserved``: boxes (left, right, bottom, top) kept for a text still to come (the citation's :func:`citation_room`,
    ``LectureScene.cite``): every other text leaves them as it leaves a marker; a citation (``citation = True``)
    may lie in them."""
    mobjects, animations = list(mobjects), list(animations)
    after = texts_after(mobjects, animations)
    notes = [fit_text(mob, frame_width, frame_height) for mob in after]
    notes = [note for note in notes if note]
    if drawn is None:
        drawn = text_mobjects(mobjects)
    old = {id(t) for t in drawn}
    fresh = [t for t in after if id(t) not in old]
    coming = [getattr(anim, "mobject", None) for anim in _flat(animations)]
    return notes + make_room(after, fresh, frame_width, frame_height, mobjects,
                             [_box(d) for d in markers([*mobjects, *[m for m in coming if m is not None]])], reserved)


def _flat(animations: Iterable) -> list:
    """``animations`` and the parts of the groups among them (AnimationGroup, Succession, LaggedStart)."""
    found = []
    for anim in animations:
        found.append(anim)
        found += _flat(getattr(anim, "animations", None) or [])
    return found


# -- texts over each other: shrink (to the floor), wrap, move -----------------------------------------------------

GAP = 0.04  # scene units left between two texts the fitter separates (the layout check allows 0.02 of overlap)
SIDE_GAP = MIN_GAP + 0.01  # ... and between two it sets side by side on one line (the check asks for MIN_GAP)
_CLEAR = 0.02  # the layout check's tolerance: boxes that overlap by no more than this on an axis do not clash
CITATION_ROOM = MIN_GAP + _CLEAR  # how far a citation's room reaches above and below it (citation_room)


def texts_after(mobjects: Iterable[Mobject], animations: Iterable = ()) -> list[Mobject]:
    """The outermost visible texts on screen once ``animations`` have run from the scene's ``mobjects``: a
    ``FadeOut``'s (any remover's) leave, a ``FadeIn``'s / ``Write``'s / ``Create``'s come, a ``Transform``'s
    target stands for the text it turns into (its mobject takes the target's points), a ``ReplacementTransform``'s
    target replaces it; an animation that ends where it began (``Indicate``: its rate function is 0 at 1) changes
    nothing. A ``mob.animate`` builder counts as a transform into ``mob.target``."""
    from manim import Animation, ReplacementTransform, Transform, TransformFromCopy

    order: dict[int, Mobject] = {}
    for mob in text_mobjects(mobjects):
        order[id(mob)] = mob

    def leave(mob):
        for text in text_mobjects([mob], visible_only=False):
            order.pop(id(text), None)

    def come(mob):
        for text in text_mobjects([mob]):
            order[id(text)] = text

    def visit(anim) -> None:
        parts = getattr(anim, "animations", None)
        if parts:  # AnimationGroup, LaggedStart, Succession
            for part in parts:
                visit(part)
            return
        if not isinstance(anim, Animation):  # mob.animate...: a transform into mob.target
            mob, target = getattr(anim, "mobject", None), getattr(getattr(anim, "mobject", None), "target", None)
            if isinstance(mob, Mobject) and isinstance(target, Mobject):
                leave(mob)
                come(target)
            return
        mob = anim.mobject
        if getattr(anim, "remover", False):
            leave(mob)
            return
        try:
            back_where_it_began = abs(float(anim.rate_func(1.0))) < 1e-6
        except Exception:  # a rate function that needs more than a float
            back_where_it_began = False
        if back_where_it_began:
            return
        target = getattr(anim, "target_mobject", None)
        replaced = isinstance(anim, ReplacementTransform) and isinstance(target, Mobject)
        if replaced or (isinstance(anim, Transform) and not isinstance(anim, TransformFromCopy)
                        and isinstance(target, Mobject) and target is not mob and text_mobjects([target])):
            leave(mob)
            come(target)
            return
        come(mob)  # FadeIn, Write, Create ... (a Transform's target is made as it begins: the mobject itself)

    for anim in animations:
        visit(anim)
    return list(order.values())


def _unit_of(text: Mobject, parents: dict[int, Mobject]) -> Mobject:
    """The mobject the fitter moves for ``text``: the paragraph it is a line of (a group made by
    scenes.kit.style.make_wrapped_text, marked ``paragraph``), else the text itself."""
    return parents.get(id(text), text)


def _paragraphs(mobjects: Iterable[Mobject]) -> dict[int, Mobject]:
    """id(line) -> its paragraph, for every paragraph among ``mobjects``' families."""
    found: dict[int, Mobject] = {}
    for mob in mobjects:
        for member in mob.get_family():
            if getattr(member, "paragraph", False):
                for line in member.submobjects:
                    found[id(line)] = member
    return found


def _floor_factor(unit: Mobject, frame_height: float) -> float:
    """The least factor ``unit`` may be scaled by and keep its smallest capitals at the floor (1.0: at it already)."""
    caps = []
    for text in text_mobjects([unit], visible_only=False):
        try:
            box = _box(text)
            caps.append(cap_height(text, box[3] - box[2]))
        except TypeError:
            pass
    if not caps:
        return 1.0
    return min(1.0, CAP_FLOOR * frame_height / min(caps) * 1.001)


def _clash(a: tuple, b: tuple) -> float | None:
    """How deep two boxes clash, as the layout check sees it (scenes.kit.layout.layout_problems): their overlap on
    the lesser axis where both exceed its tolerance, or, side by side on one line (heights overlapping by half the
    shorter's), how far they are from :data:`MIN_GAP` apart; None: no clash."""
    dx, dy = _overlap(a, b)
    if dx > _CLEAR and dy > _CLEAR:
        return min(dx, dy)
    if dx > -MIN_GAP and dy > 0.5 * min(a[3] - a[2], b[3] - b[2]):
        return dx + MIN_GAP
    return None


def _clashes(box: tuple, others: list[tuple]) -> bool:
    return any(_clash(box, other) is not None for other in others)


def _inside(box: tuple, frame_width: float, frame_height: float) -> bool:
    half_w, half_h = frame_width * (0.5 - MARGIN), frame_height * (0.5 - MARGIN)
    return box[0] >= -half_w - 1e-6 and box[1] <= half_w + 1e-6 and box[2] >= -half_h - 1e-6 and box[3] <= half_h + 1e-6


def _scaled(box: tuple, factor: float, anchor: tuple[float, float]) -> tuple:
    ax, ay = anchor
    return (ax + (box[0] - ax) * factor, ax + (box[1] - ax) * factor, ay + (box[2] - ay) * factor,
            ay + (box[3] - ay) * factor)


def _anchor(box: tuple, other: tuple, axis: int) -> tuple[float, float]:
    """The point of ``box`` kept still when it shrinks away from ``other`` along ``axis`` (0: x, 1: y): its edge
    on the far side from ``other``, at its middle on the other axis."""
    mx, my = (box[0] + box[1]) / 2, (box[2] + box[3]) / 2
    if axis == 0:
        return (box[0] if mx < (other[0] + other[1]) / 2 else box[1]), my
    return mx, (box[3] if my > (other[2] + other[3]) / 2 else box[2])


def _shrink_factor(box: tuple, other: tuple, axis: int) -> float:
    """The factor that takes ``box``, shrunk about :func:`_anchor`, :data:`GAP` clear of ``other`` along ``axis``."""
    ax, ay = _anchor(box, other, axis)
    if axis == 0:
        span = (box[1] - ax) if ax == box[0] else (ax - box[0])
        room = (other[0] - SIDE_GAP - ax) if ax == box[0] else (ax - other[1] - SIDE_GAP)
    else:
        span = (ay - box[2]) if ay == box[3] else (box[3] - ay)
        room = (ay - other[3] - GAP) if ay == box[3] else (other[2] - GAP - ay)
    return room / span if span > 1e-9 else 0.0


def _wrapped_lines(text: Mobject) -> Mobject | None:
    """``text`` (a one-line Text) as two lines at its size now, or None (see :func:`_wrapped`)."""
    return _wrapped(text) if isinstance(text, Text) else None


def _candidates(unit: Mobject, box: tuple, other: tuple, least: float):
    """(note, box, apply) for each way to take ``unit`` (now at ``box``) clear of ``other``, in the order tried:
    shrink (never by less than ``least``: the floor), wrap onto two lines (growing away from ``other``), wrap and
    shrink, move."""
    for axis in (0, 1):
        factor = _shrink_factor(box, other, axis)
        if least <= factor < 1:
            anchor = _anchor(box, other, axis)
            yield (f"scaled to {factor:.0%}", _scaled(box, factor, anchor),
                   lambda f=factor, a=anchor: unit.scale(f, about_point=[a[0], a[1], 0]))
    two = _wrapped_lines(unit)
    if two is not None:
        w, h = two.width, two.height
        mx, my = (box[0] + box[1]) / 2, (box[2] + box[3]) / 2
        far = _anchor(box, other, 0)[0]  # its side edge away from the other: kept where the other is beside it
        kept = far + w / 2 if far == box[0] else far - w / 2
        beside = _overlap(box, other)[0] < 0.5 * (box[1] - box[0])
        xs = [kept, mx] if beside else [mx, kept]
        below = my <= (other[2] + other[3]) / 2  # below the other: its top kept, it grows downwards (else upwards)
        ys = [box[3] - h / 2, box[2] + h / 2, my] if below else [box[2] + h / 2, box[3] - h / 2, my]
        for x in xs:
            for y in ys:
                placed = (x - w / 2, x + w / 2, y - h / 2, y + h / 2)

                def wrap(two=two, x=x, y=y):
                    unit.become(two).move_to([x, y, 0])
                    _adopt(unit, two)
                yield "wrapped onto two lines", placed, wrap
                for axis in (0, 1):
                    factor = _shrink_factor(placed, other, axis)
                    if least <= factor < 1:
                        anchor = _anchor(placed, other, axis)

                        def wrap_shrink(wrap=wrap, f=factor, a=anchor):
                            wrap()
                            unit.scale(f, about_point=[a[0], a[1], 0])
                        yield f"wrapped onto two lines, scaled to {factor:.0%}", _scaled(placed, factor, anchor), \
                            wrap_shrink
    up, down = other[3] + GAP - box[2], other[2] - GAP - box[3]
    right, left = other[1] + SIDE_GAP - box[0], other[0] - SIDE_GAP - box[1]
    moves = [(0, up, "up"), (0, down, "down"), (right, 0, "right"), (left, 0, "left")]
    for dx, dy, way in sorted(moves, key=lambda m: abs(m[0]) + abs(m[1])):
        yield (f"moved {abs(dx) + abs(dy):.2f} {way}", (box[0] + dx, box[1] + dx, box[2] + dy, box[3] + dy),
               lambda dx=dx, dy=dy: unit.shift([dx, dy, 0]))


def _words(mob: Mobject) -> str:
    texts = text_mobjects([mob], visible_only=False)
    return " ".join(str(getattr(t, "original_text", "") or getattr(t, "tex_string", "") or "") for t in texts)


def make_room(texts: list[Mobject], fresh: Iterable[Mobject], frame_width: float, frame_height: float,
              mobjects: Iterable[Mobject] = (), dots: Iterable[tuple] = (),
              reserved: Iterable[tuple] = ()) -> list[str]:
    """Take apart every two of ``texts`` (those on screen after the coming animations: :func:`texts_after`) whose
    boxes overlap: the one not drawn yet (in ``fresh``; else the longer, a Text before LaTeX) is shrunk about its
    far edge (never below the floor, :data:`CAP_FLOOR`), else wrapped onto two lines growing away from the other,
    else both, else moved up, down or aside, whichever keeps it inside the safe area and clear of every other
    text; a paragraph (make_wrapped_text) is shrunk or moved whole. A text over one of ``dots`` (boxes of the markers
    on screen: scenes.kit.layout.markers) leaves it the same ways; no way lands a text on one. ``reserved`` (see
    :func:`fit_texts`) count as markers for every text but a citation. Notes of what changed, one per change."""
    dots, reserved = list(dots), list(reserved)
    parents = _paragraphs([*mobjects, *texts])
    units: dict[int, Mobject] = {}
    for text in texts:
        unit = _unit_of(text, parents)
        units.setdefault(id(unit), unit)
    units_list = list(units.values())
    new = {id(_unit_of(t, parents)) for t in fresh}
    boxes = {id(u): _room_box(u) for u in units_list}
    least: dict[int, float] = {}  # id -> the least factor it may be scaled by (_floor_factor), once asked for
    notes: list[str] = []

    def rank(unit: Mobject) -> tuple:  # who gives way first: not the citation (its corner), a text not drawn yet,
        # a Text, the wider
        return (_is_citation(unit), id(unit) not in new,
                not isinstance(unit, Text) and not getattr(unit, "paragraph", False),
                -(boxes[id(unit)][1] - boxes[id(unit)][0]))

    def give_way(a: Mobject, b: Mobject, depth: float) -> str | None:
        """The first way (:func:`_candidates`) for one of ``a``, ``b`` to leave the other that keeps it inside and
        clear of every other text, else a stack (:func:`_restack`), applied; what was done, or None."""
        for mover, other in sorted([(a, b), (b, a)], key=lambda pair: rank(pair[0])):
            rest = [boxes[id(u)] for u in units_list if u is not mover] + dots + reserved
            if id(mover) not in least:
                least[id(mover)] = _floor_factor(mover, frame_height)
            for note, box, apply in _candidates(mover, boxes[id(mover)], boxes[id(other)], least[id(mover)]):
                if _inside(box, frame_width, frame_height) and not _clashes(box, rest):
                    apply()
                    boxes[id(mover)] = _room_box(mover)
                    least.pop(id(mover))
                    return f"{_words(mover)[:60]!r} overlapped {_words(other)[:30]!r} by {depth:.2f} units: {note}"
        shifts = _restack(units_list, boxes, a, b, frame_height)
        for unit, dy in shifts or ():
            unit.shift([0, dy, 0])
            boxes[id(unit)] = _room_box(unit)
        return shifts and f"{_words(a)[:60]!r} overlapped {_words(b)[:30]!r} by {depth:.2f} units: stacked, " + \
            ", ".join(f"{_words(u)[:20]!r} {abs(dy):.2f} {'up' if dy > 0 else 'down'}" for u, dy in shifts)

    def leave_dot(unit: Mobject, dot: tuple, depth: float) -> str | None:
        """The first way for ``unit`` to leave the marker box ``dot`` that keeps it inside and clear of every other
        text and marker, applied; what was done, or None."""
        rest = [boxes[id(u)] for u in units_list if u is not unit] + [d for d in dots + reserved if d is not dot]
        if id(unit) not in least:
            least[id(unit)] = _floor_factor(unit, frame_height)
        for note, box, apply in _candidates(unit, boxes[id(unit)], dot, least[id(unit)]):
            if _inside(box, frame_width, frame_height) and not _clashes(box, rest):
                apply()
                boxes[id(unit)] = _room_box(unit)
                least.pop(id(unit))
                return f"{_words(unit)[:60]!r} covered a marker by {depth:.2f} units: {note}"
        return None

    for _ in range(3):  # a change can make a new clash: passes until none changes (three settle the lecture)
        changed = False
        for unit in units_list:
            for dot in dots + ([] if _is_citation(unit) else reserved):
                depth = min(_overlap(boxes[id(unit)], dot))
                if depth > _CLEAR and (done := leave_dot(unit, dot, depth)):
                    notes.append(done)
                    changed = True
        for i, a in enumerate(units_list):
            for b in units_list[i + 1:]:
                depth = _clash(boxes[id(a)], boxes[id(b)])
                if depth is not None and (done := give_way(a, b, depth)):
                    notes.append(done)
                    changed = True
        if not changed:
            break
    return notes


def _restack(units: list[Mobject], boxes: dict[int, tuple], a: Mobject, b: Mobject,
             frame_height: float) -> list[tuple[Mobject, float]] | None:
    """Stack ``a`` and ``b`` (one above the other) :data:`GAP` apart by moving texts only up and down: the lower
    pushed down, and each text it then lands on pushed down in turn; the stack lifted back inside the safe area
    where it reached below it, pushing up the texts it then meets. [(unit, dy)] of the texts moved, or None where
    no such stack fits."""
    half_h = frame_height * (0.5 - MARGIN)
    cur = {id(u): boxes[id(u)] for u in units}
    by_id = {id(u): u for u in units}
    moved: dict[int, None] = {}  # ids in the order first moved (dicts, not sets: a set of ids iterates in address
    # order, which differs between runs, and the first overlapping pair found decides the stack)

    def shift(i: int, dy: float) -> None:
        l, r, bo, t = cur[i]
        cur[i] = (l, r, bo + dy, t + dy)
        moved[i] = None

    def relax(down: bool, start: Iterable[int]) -> bool:
        stack = dict.fromkeys(start)
        for _ in range(4 * len(units)):
            pair = next(((i, j) for i in stack for j in cur if j != i and min(_overlap(cur[i], cur[j])) > _CLEAR), None)
            if pair is None:
                return True
            i, j = pair
            hi, lo = (i, j) if sum(cur[i][2:]) >= sum(cur[j][2:]) else (j, i)
            if down:
                shift(lo, cur[hi][2] - GAP - cur[lo][3])
                stack[lo] = None
            else:
                shift(hi, cur[lo][3] + GAP - cur[hi][2])
                stack[hi] = None
        return False

    if not relax(True, (id(a), id(b))):
        return None
    low = min(cur[i][2] for i in moved)
    if low < -half_h:
        for i in list(moved):
            shift(i, -half_h - low + 1e-3)
        if not relax(False, list(moved)):
            return None
    if any(cur[i][2] < -half_h - 1e-6 or cur[i][3] > half_h + 1e-6 for i in moved):
        return None
    return [(by_id[i], cur[i][2] - boxes[i][2]) for i in moved if abs(cur[i][2] - boxes[i][2]) > 1e-9]



