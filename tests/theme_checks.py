"""Theme checks of a built scene: every colour drawn is the theme's, every opaque text and every thin line readable
(WCAG 2.1).

Not a test module: tests/test_theme.py tests these and with them every scene in both themes; tests/dry_run.py builds
every scene it builds in the light theme with :func:`colour_checked`, so the light frame tests and the colour
checks of a scene read one build.
"""

from __future__ import annotations

import itertools

import manim
import numpy as np
from manim import ManimColor, VMobject

from scenes.kit.theme import ROLES, THEMES, THIN_STROKE, Theme

__all__ = ["wcag_luminance", "wcag_ratio", "foreign_colours", "TEXT_TYPES", "low_contrast_texts", "hex_of",
           "colour_checked", "low_contrast_strokes"]


# -- WCAG 2.1, from its definition (https://www.w3.org/TR/WCAG21/#dfn-relative-luminance) -------------

def _srgb_channel_to_linear(c8: int) -> float:
    c = c8 / 255
    return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4  # 0.03928 as WCAG writes it


def wcag_luminance(hex_color: str) -> float:
    h = hex_color.lstrip("#")
    r, g, b = (_srgb_channel_to_linear(int(h[i:i + 2], 16)) for i in (0, 2, 4))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def wcag_ratio(a: str, b: str) -> float:
    hi, lo = sorted((wcag_luminance(a), wcag_luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def foreign_colours(mobjects, theme: Theme, tol: float = 1.5 / 255) -> set[str]:
    """Colours of visible strokes and fills that are neither a role's colour nor a blend of two roles
    (scenes shade a role toward the text colour, or interpolate between two roles)."""
    palette = np.array([theme[role].to_rgb() for role in ROLES])
    pairs = [(palette[i], palette[j] - palette[i]) for i, j in itertools.permutations(range(len(palette)), 2)]
    found = set()
    for mob in mobjects:
        for sub in mob.get_family():
            if not isinstance(sub, VMobject) or not len(sub.points):
                continue
            rgbas = [sub.fill_rgbas] + ([sub.stroke_rgbas] if sub.get_stroke_width() > 0 else [])
            for rgba in np.concatenate(rgbas):
                if rgba[3] <= 0:
                    continue
                rgb = rgba[:3]
                if np.abs(palette - rgb).max(1).min() <= tol:
                    continue
                if any(np.abs(a + np.clip((rgb - a) @ d / (d @ d), 0, 1) * d - rgb).max() <= tol for a, d in pairs):
                    continue
                found.add(f"{type(sub).__name__} in {type(mob).__name__}: {ManimColor(rgb).to_hex()}")
    return found


TEXT_TYPES = (manim.Text, manim.MarkupText, manim.SingleStringMathTex)  # MathTex and Tex derive from the last


def low_contrast_texts(mobjects, theme: Theme, minimum: float = 4.5) -> set[str]:
    """Fully opaque glyphs whose colour has less than ``minimum`` WCAG contrast with the background
    (text faded on purpose, opacity < 1, is decoration in WCAG's sense and not checked)."""
    found = set()
    background = theme["background"].to_hex()
    for mob in mobjects:
        for text in (m for m in mob.get_family() if isinstance(m, TEXT_TYPES)):
            for glyph in text.get_family():
                for rgba in glyph.fill_rgbas if len(glyph.points) else ():
                    if rgba[3] >= 0.99 and wcag_ratio(hex_of(rgba), background) < minimum:
                        found.add(f"{type(text).__name__} {getattr(text, 'text', '')!r}: {hex_of(rgba)}")
    return found


def low_contrast_strokes(mobjects, theme: Theme, thinner_than: float = THIN_STROKE) -> set[str]:
    """Visible strokes thinner than ``thinner_than`` (Manim stroke width) whose shade over the background (the colour
    at its opacity, mixed in 8-bit sRGB as Cairo paints it) has less WCAG contrast with the background than the
    theme's ``min_stroke_contrast`` (a theme without one: none is checked). Not checked: text glyphs
    (:func:`low_contrast_texts`), a stroke in the background's own colour (the ring that parts a dot from a line
    behind it), and a mobject whose opacity is a measured value (``opacity_is_data = True`` on it or a parent: the
    gradient pulse, dim where the gradient is small)."""
    minimum = theme.min_stroke_contrast
    if minimum is None:
        return set()
    background = theme["background"].to_hex()
    back = np.array(theme["background"].to_rgb())
    found = set()

    def visit(mob, top) -> None:
        if isinstance(mob, TEXT_TYPES) or getattr(mob, "opacity_is_data", False):
            return
        width = mob.get_stroke_width() if isinstance(mob, VMobject) else 0
        if isinstance(mob, VMobject) and len(mob.points) and 0 < width < thinner_than:
            for rgba in mob.stroke_rgbas:
                alpha = float(rgba[3])
                if alpha <= 0 or hex_of(rgba) == background:
                    continue
                shade = hex_of(np.round((alpha * rgba[:3] + (1 - alpha) * back) * 255) / 255)
                if (ratio := wcag_ratio(shade, background)) < minimum:
                    found.add(f"{type(mob).__name__} in {type(top).__name__}: {hex_of(rgba)} at opacity {alpha:.2f}, "
                              f"width {width:g}: {ratio:.2f}:1 (at least {minimum}:1)")
        for sub in mob.submobjects:
            visit(sub, top)

    for mob in mobjects:
        visit(mob, mob)
    return found


def hex_of(rgba) -> str:
    return "#" + "".join(f"{round(float(c) * 255):02X}" for c in rgba[:3])


def colour_checked(scene: type, theme: str, trace_files: dict[str, str] | None) -> type:
    """A variant of ``scene`` in ``theme`` that records, after every play and wait, foreign colours
    (``colour_log``), opaque text below 4.5:1 against the background (``contrast_log``) and thin lines below the
    theme's stroke contrast (``stroke_log``)."""

    def check(self):
        self.colour_log |= foreign_colours(self.mobjects, THEMES[self.theme])
        self.contrast_log |= low_contrast_texts(self.mobjects, THEMES[self.theme])
        self.stroke_log |= low_contrast_strokes(self.mobjects, THEMES[self.theme])

    def play(self, *args, **kwargs):
        super(variant, self).play(*args, **kwargs)
        check(self)

    def wait(self, *args, **kwargs):
        super(variant, self).wait(*args, **kwargs)
        check(self)

    def setup(self):
        super(variant, self).setup()
        self.colour_log, self.contrast_log, self.stroke_log = set(), set(), set()

    attrs = {"theme": theme, "play": play, "wait": wait, "setup": setup}
    if trace_files is not None:
        attrs["trace_files"] = trace_files
    variant = type(scene.__name__, (scene,), attrs)
    return variant
