"""Dark and light themes: one colour per role, from the colour-blind-safe Okabe–Ito palette.

Example::

    python render.py render IdentityHighway --theme light      # for a projector in a bright hall
    RESIDUAL_THEME=light manim -ql scenes/highway.py IdentityHighway

Scenes never name a colour: they ask for a role (``PALETTE["plain"]`` in :mod:`scenes.kit.style` reads the
current theme). Both themes give every role the same Okabe–Ito hue (Okabe & Ito 2008, "Color Universal
Design"; Wong 2011, Nature Methods 8:441): plain networks vermillion, residual networks blue, the
identity path bluish green, the residual branch orange, gradients yellow, warnings reddish purple. Where
a colour is too light (or too dark) to reach WCAG 2.1's 4.5:1 contrast against the theme's background,
only its HLS lightness is moved, in steps of 1/1000, until it does (:func:`fit_contrast`); hue and
saturation stay. Every role may colour text, so every role meets 4.5:1 in both themes
(``tests/test_theme.py`` checks it with its own WCAG computation).

Thin lines (grid lines, the thin curves of the other seeds) are drawn half transparent, as a lighter shade of
their colour. On the light theme's near-white a projector in a bright hall washes such a shade out, so there a
stroke thinner than :data:`THIN_STROKE` is drawn at least opaque enough that the shade it makes over the
background reaches :data:`MIN_STROKE_CONTRAST` (WCAG 2.1 success criterion 1.4.11, non-text contrast, 3:1):
:func:`stroke_opacity`. The dark theme (screens, dim rooms) keeps its faint grid as drawn (no minimum).
"""

from __future__ import annotations

import colorsys
import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

import numpy as np
from manim import ManimColor


__all__ = [
    "OKABE_ITO", "HUES", "ROLES", "SHOWN_TOGETHER", "THEMES", "THEME_NAMES", "MIN_TEXT_CONTRAST", "Theme", "get_theme", "set_theme",
    "current_theme", "relative_luminance", "contrast_ratio", "fit_contrast", "VIRIDIS", "to_rgb", "MIN_STROKE_CONTRAST", "THIN_STROKE",
    "stroke_opacity", "blend",
]

THEME_NAMES = ("dark", "light")  # "dark" (the default) first; cli/params.py repeats them so that --help loads no
# manim (tests/test_cli.py checks that the two agree)

# Okabe & Ito (2008), as listed by Wong (2011), Nature Methods 8:441, Fig. 2.
OKABE_ITO = MappingProxyType({
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
})

# role -> Okabe–Ito colour, the same in both themes. Chosen so that the pairs of SHOWN_TOGETHER stay
# apart for protan, deutan and tritan viewers in both themes (on the light background the darkened
# orange, vermillion and yellow look alike to protans and deutans, so no two of them share a picture).
HUES = MappingProxyType({
    "plain": "vermillion",  # plain network: no shortcut
    "residual": "blue",  # residual network
    "identity": "bluish_green",  # the identity path / highway (the fast lane)
    "branch": "orange",  # the residual branch F(x) (the side road)
    "grad": "yellow",  # gradients flowing backwards
    "warn": "reddish_purple",  # bounds, warm-up, divergence
})
ROLES = ("background", "text", "muted", *HUES)
# Roles that scenes set side by side as categories: (role, role, where).
SHOWN_TOGETHER = (
    ("plain", "residual", "every comparison of the two networks"),
    ("identity", "branch", "H(x) = F(x) + x: highway, analogies, Add & Norm, summary"),
    ("plain", "warn", "Post-LN vs Post-LN with warm-up; sigmoid: measured shrink vs the 1/4 bound"),
    ("residual", "warn", "Pre-LN vs Post-LN with warm-up"),
    ("grad", "warn", "exploding: the two plain runs; highway vs DenseNet"),
    ("grad", "residual", "DenseNet vs ResNet"),
    ("identity", "plain", "sigmoid: sigma and sigma'; highway: skipped block vs plain layer"),
    ("identity", "warn", "sigmoid: sigma and the 1/4 bound"),
    ("identity", "residual", "nested function classes; Add & Norm: the identity path and the memory"),
)
# Viridis (van der Walt & Smith, matplotlib 2.0), nine stops: the sequential scale of a value map (DepthTimeMap),
# perceptually uniform, legible in grey and to the common colour-vision deficiencies; the same in both themes.
VIRIDIS = ("#440154", "#472D7B", "#3B528B", "#2C728E", "#21918C", "#28AE80", "#5EC962", "#ADDC30", "#FDE725")
MIN_TEXT_CONTRAST = 4.5  # WCAG 2.1 success criterion 1.4.3 (AA, normal text)
MIN_STROKE_CONTRAST = 3.0  # WCAG 2.1 success criterion 1.4.11 (non-text contrast: lines read as parts of a chart)
THIN_STROKE = 5.0  # Manim stroke width below which a line is thin: 0.05 scene units, 6.75 px at 1080p, 3 px at 480p


def to_rgb(color: str | ManimColor) -> np.ndarray:
    """float64 [3] RGB in [0, 1] of a colour (a hex string or a ManimColor), for pixels a scene computes."""
    return np.asarray(ManimColor(color).to_rgb(), np.float64)


def relative_luminance(color: str | ManimColor) -> float:
    """WCAG 2.1 relative luminance of an sRGB colour, 0 (black) to 1 (white)."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in ManimColor(color).to_rgb())
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: str | ManimColor, b: str | ManimColor) -> float:
    """WCAG 2.1 contrast ratio of two colours, 1 to 21 (order does not matter)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def fit_contrast(color: str, background: str, minimum: float = MIN_TEXT_CONTRAST) -> str:
    """``color`` (hex) itself when it has ``minimum`` contrast against ``background``; otherwise the
    nearest colour of the same hue and HLS saturation, with lightness moved away from the background's
    in steps of 0.001, that has it. Raises ValueError when no lightness reaches ``minimum``."""
    if contrast_ratio(color, background) >= minimum:
        return ManimColor(color).to_hex().upper()
    h, lightness, s = colorsys.rgb_to_hls(*ManimColor(color).to_rgb())
    step = -0.001 if relative_luminance(background) > 0.18 else 0.001  # darker on light, lighter on dark
    while 0.0 <= lightness <= 1.0:
        lightness += step
        candidate = ManimColor(colorsys.hls_to_rgb(h, min(max(lightness, 0.0), 1.0), s)).to_hex().upper()
        if contrast_ratio(candidate, background) >= minimum:  # checked after rounding to 8 bits
            return candidate
    raise ValueError(f"no lightness of {color} reaches {minimum}:1 against {background}")


def blend(color: str | ManimColor, background: str | ManimColor, opacity: float) -> str:
    """Hex of ``color`` drawn at ``opacity`` over ``background``: the mix Cairo paints, in sRGB (8 bits)."""
    mix = opacity * to_rgb(color) + (1.0 - opacity) * to_rgb(background)
    return ManimColor(np.round(mix * 255) / 255).to_hex().upper()


def stroke_opacity(color: str | ManimColor, opacity: float, width: float, theme: "Theme | None" = None) -> float:
    """The opacity to draw a stroke of ``color`` and Manim stroke ``width`` with, where ``opacity`` is the one
    asked for: that, unless the stroke is thinner than :data:`THIN_STROKE` and ``theme`` (default: the current one)
    asks its thin strokes for ``min_stroke_contrast``; then the least opacity from ``opacity`` up, in steps of 0.01,
    whose :func:`blend` over the background has that contrast (1 where none has). A stroke not drawn (opacity or
    width 0) stays so."""
    theme = theme or current_theme()
    minimum = theme.min_stroke_contrast
    if minimum is None or not 0.0 < width < THIN_STROKE or not 0.0 < opacity < 1.0:  # none asked, thick, not drawn
        return opacity
    level = opacity
    while level < 1.0 and contrast_ratio(blend(color, theme.background, level), theme.background) < minimum:
        level = min(1.0, round(level + 0.01, 2))
    return level


@dataclass(frozen=True)
class Theme:
    """A background, a text colour, a muted text colour; the Okabe–Ito roles are fitted to them."""

    name: str  # "dark" | "light"
    background: str  # hex; the camera's background colour (Manim's background_color)
    text: str  # hex; titles, formulas, labels
    muted: str  # hex; axes, captions, citations
    min_stroke_contrast: float | None = None  # a thin stroke's shade over the background reaches this; None: any
    colors: Mapping[str, ManimColor] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        colors = {"background": self.background, "text": self.text, "muted": self.muted}
        colors.update({role: fit_contrast(OKABE_ITO[hue], self.background) for role, hue in HUES.items()})
        object.__setattr__(self, "colors", MappingProxyType({k: ManimColor(v) for k, v in colors.items()}))

    def __getitem__(self, role: str) -> ManimColor:
        try:
            return self.colors[role]
        except KeyError:
            raise KeyError(f"no colour role {role!r}; roles: {', '.join(ROLES)}") from None


THEMES = MappingProxyType({
    # Dark: for screens and dim rooms; only Okabe-Ito blue is lightened (to #0083CD) to reach 4.5:1.
    "dark": Theme("dark", background="#101319", text="#ECEFF4", muted="#8A93A6"),
    # Light: for projectors in bright halls; an off-white that does not glare.
    # Thin half-transparent lines are made opaque enough for 3:1 there (stroke_opacity).
    "light": Theme("light", background="#FAFAF7", text="#1B1F27", muted="#5C6270", min_stroke_contrast=MIN_STROKE_CONTRAST),
})
if tuple(THEMES) != THEME_NAMES:  # a palette for each name, "dark" (the default) first
    raise ImportError(f"scenes/kit/theme.py has palettes {tuple(THEMES)} for the names {THEME_NAMES}")
_current = {"theme": THEMES["dark"]}


def get_theme(name: str) -> Theme:
    """The theme called ``name``; ValueError naming the themes for any other name."""
    if name not in THEMES:
        raise ValueError(f"unknown theme {name!r}; available: {', '.join(THEMES)}")
    return THEMES[name]


def set_theme(name: str | None) -> Theme:
    """Make ``name`` (None: ``$RESIDUAL_THEME``, else "dark") the theme of what is drawn from now on
    (LectureScene.setup calls it, as it calls set_language). Returns the theme."""
    theme = get_theme(name or os.environ.get("RESIDUAL_THEME") or "dark")
    _current["theme"] = theme
    return theme


def current_theme() -> Theme:
    """The theme set last (dark until set_theme is called)."""
    return _current["theme"]
