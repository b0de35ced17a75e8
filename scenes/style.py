"""Palette, fonts, sizes and text helpers shared by every scene.

Example::

    from scenes.style import PALETTE, make_text
    title = make_text("Residual", size=SIZE_TITLE, lang="zh")
"""

from __future__ import annotations

import math

import numpy as np
from manim import Text, ManimColor, interpolate_color

__all__ = [
    "PALETTE", "FONTS", "set_language", "SIZE_TITLE", "SIZE_BODY", "SIZE_LABEL", "SIZE_SMALL", "make_text",
    "format_number", "value_to_color", "LANGS", "current_language",
]

LANGS = ("en", "zh")

# One colour per role, used the same way in every scene.
PALETTE = {
    "background": ManimColor("#101319"),
    "text": ManimColor("#ECEFF4"),
    "muted": ManimColor("#8A93A6"),
    "plain": ManimColor("#E8685F"),  # plain network: no shortcut
    "residual": ManimColor("#4FB8C4"),  # residual network
    "identity": ManimColor("#F2C14E"),  # the identity path / highway
    "branch": ManimColor("#A58BE0"),  # the residual branch F(x)
    "grad": ManimColor("#7BD88F"),  # gradients flowing backwards
    "warn": ManimColor("#FF9F43"),
}

# One font per language; Noto Sans CJK SC (Debian fonts-noto-cjk) has the Chinese glyphs.
FONTS = {"en": "DejaVu Sans", "zh": "Noto Sans CJK SC"}
_current = {"lang": "en"}
SIZE_TITLE = 38
SIZE_BODY = 28
SIZE_LABEL = 22
SIZE_SMALL = 18  # the smallest size used: still readable at 480p


def set_language(lang: str) -> None:
    """Language of the texts made from now on (LectureScene.setup calls it)."""
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}; available: {', '.join(LANGS)}")
    _current["lang"] = lang


def current_language() -> str:
    """The language :func:`set_language` chose last ("en" until a scene sets one)."""
    return _current["lang"]


def make_text(content: str, size: float = SIZE_BODY, color: ManimColor | None = None, **kwargs) -> Text:
    """A Pango ``Text`` in the current language's font. Never put Chinese into MathTex (no CJK font).

    In Chinese the norm bars ‖ come from the Latin font: the CJK font draws them full-width."""
    lang = _current["lang"]
    if lang != "en" and "‖" in content:
        kwargs.setdefault("t2f", {"‖": FONTS["en"]})
    return Text(content, font=FONTS[lang], font_size=size, color=color or PALETTE["text"], **kwargs)


def format_number(value: float, digits: int = 2) -> str:
    """Short human form: 0.153, 12.4, 3.1e-08, whole numbers from 1,000 on as 2,048; 'nan' / 'inf' / '0'
    spelled out."""
    if value is None or not math.isfinite(value):
        return "nan" if value is None or math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value == 0:
        return "0"
    magnitude = abs(value)
    if float(value).is_integer() and 1e3 <= magnitude < 1e9:
        return f"{int(value):,}"  # counts (parameters, widths) stay exact: 2,048 rather than 2.05e+03
    if 1e-2 <= magnitude < 1e4:
        if magnitude >= 10 ** (digits + 1) - 0.5:
            return f"{value:,.0f}"  # 1,234 rather than 1.23e+03
        return f"{value:.{digits}g}" if magnitude < 1 else f"{value:.{digits + 1}g}"
    return f"{value:.{digits - 1}e}".replace("e-0", "e-").replace("e+0", "e+")


def value_to_color(value: float, vmin: float, vmax: float, low: ManimColor | None = None,
                   high: ManimColor | None = None, log: bool = True) -> ManimColor:
    """Colour of ``value`` between ``low`` (at vmin) and ``high`` (at vmax), on a log scale by default.
    Non-positive or non-finite values on a log scale get ``low``."""
    low, high = low or PALETTE["plain"], high or PALETTE["residual"]
    if log:
        if not (value > 0 and math.isfinite(value)):
            return low
        value, vmin, vmax = math.log10(value), math.log10(vmin), math.log10(vmax)
    alpha = float(np.clip((value - vmin) / (vmax - vmin or 1.0), 0.0, 1.0))
    return interpolate_color(low, high, alpha)
