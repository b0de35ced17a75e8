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

from scenes.kit.layout import text_mobjects

__all__ = ["MARGIN", "fit_text", "fit_texts", "overshoot"]

MARGIN = 0.03  # of the frame's width (left, right) and height (top, bottom): nothing drawn closer to the edge


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
            done.append("wrapped onto two lines")
        if text.width > safe_w:
            text.scale(safe_w / text.width)
            done.append(f"scaled to {safe_w / width:.0%}")
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


def fit_texts(mobjects: Iterable[Mobject], frame_width: float, frame_height: float) -> list[str]:
    """:func:`fit_text` on every outermost text among ``mobjects`` (LaTeX too: moved and shrunk, never wrapped);
    the notes of those that did not fit."""
    notes = [fit_text(mob, frame_width, frame_height) for mob in text_mobjects(mobjects)]
    return [note for note in notes if note]
