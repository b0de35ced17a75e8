"""Text that fits: a translated or reworded text that reaches past the frame is wrapped, moved or shrunk into it.

Example::

    from scenes.kit.fit import fit_text
    note = fit_text(label, frame_width=14.22, frame_height=8.0)   # None: it fitted already

:class:`scenes.kit.base.LectureScene` calls :func:`fit_texts` before every animation when the words are not the
lecture's own English or Chinese (another language, the pseudo-locale, ``--text``): those layouts were drawn for
their words, and stay untouched frame for frame. A text wider than the safe area (the frame less a
:data:`MARGIN` on each side) is broken onto a second line at the space nearest its middle where it has one and
that second line keeps it readable, else scaled down to the safe width; then it is moved inside. Each change is
one line of ``LectureScene.fitted`` (the scene, the text, by how much), written to the numbers JSON.
"""

from __future__ import annotations

from collections.abc import Iterable

from manim import Mobject, Text

from scenes.kit.layout import CAP_FLOOR, MARGIN, cap_height, text_mobjects

__all__ = ["MARGIN", "fit_text", "fit_texts", "nudge_apart", "overshoot"]


def _box(mob: Mobject) -> tuple[float, float, float, float]:
    return mob.get_left()[0], mob.get_right()[0], mob.get_bottom()[1], mob.get_top()[1]


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


def fit_text(text: Text, frame_width: float, frame_height: float, margin: float = MARGIN) -> str | None:
    """Bring ``text`` inside the safe area in place (see the module docstring); a one-line note of what was done,
    or None when it fitted."""
    over = overshoot(text, frame_width, frame_height, margin)
    if over <= 1e-6:
        return None
    safe_w, safe_h = frame_width * (1 - 2 * margin), frame_height * (1 - 2 * margin)
    width, done = text.width, []
    if width > safe_w:
        two = _wrapped(text) if isinstance(text, Text) else None
        if two is not None and two.width < width:
            centre = text.get_center()
            text.become(two).move_to(centre)
            # what the layout check measures a text's size by (scenes.kit.layout.cap_height) follows the new lines
            text.initial_height, text.original_text = two.initial_height, two.original_text
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
    return f"{words[:60]!r} reached {over:.2f} units ({over / frame_width:.1%} of the width) past the safe area: " \
           + ", ".join(done)


def _overlap(a: tuple, b: tuple) -> tuple[float, float]:
    """(dx, dy): how far two boxes (left, right, bottom, top) overlap on each axis (<= 0: apart)."""
    return min(a[1], b[1]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[2], b[2])


def nudge_apart(new: list[Mobject], shown: list[Mobject], frame_width: float, frame_height: float,
                most: float = 0.15, gap: float = 0.03) -> list[str]:
    """Move each text of ``new`` that overlaps a text of ``shown`` by at most ``most`` scene units in height
    (a descender, an accent, a second line) up or down just clear of it (``gap``), where that keeps it inside the
    safe area and clear of every other text; notes of what moved."""
    notes = []
    for text in new:
        box = _box(text)
        others = [o for o in shown if o is not text]
        for other in others:
            dx, dy = _overlap(box, _box(other))
            if dx <= 0.02 or dy <= 0.02 or dy > most:
                continue
            up = _box(other)[3] < box[3]  # the new text is the higher one: move it up
            shift = (dy + gap) * (1 if up else -1)
            moved = (box[0], box[1], box[2] + shift, box[3] + shift)
            inside = frame_height * (0.5 - MARGIN)
            if moved[3] > inside or moved[2] < -inside or any(
                    min(_overlap(moved, _box(o))) > 0.02 for o in others if o is not other):
                continue
            text.shift([0, shift, 0])
            box = moved
            words = str(getattr(text, "original_text", "") or type(text).__name__).replace("\n", " ")
            notes.append(f"{words[:60]!r} overlapped {getattr(other, 'original_text', '')[:30]!r} by {dy:.2f} "
                         f"units: moved {abs(shift):.2f} {'up' if up else 'down'}")
    return notes


def fit_texts(mobjects: Iterable[Mobject], frame_width: float, frame_height: float,
              new: Iterable[Mobject] = ()) -> list[str]:
    """:func:`fit_text` on every outermost text among ``mobjects`` and ``new`` (LaTeX too: moved and shrunk, never
    wrapped), then :func:`nudge_apart` for the texts of ``new`` (those an animation is about to show); the notes."""
    shown, coming = text_mobjects(mobjects), text_mobjects(new)
    notes = [fit_text(mob, frame_width, frame_height) for mob in [*shown, *coming]]
    notes = [note for note in notes if note]
    return notes + nudge_apart([t for t in coming if t not in shown], shown, frame_width, frame_height)
