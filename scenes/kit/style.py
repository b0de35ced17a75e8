"""Palette (the current theme's), fonts, sizes and text helpers shared by every scene.

Example::

    from scenes.kit.style import PALETTE, make_text
    title = make_text("Residual", size=SIZE_TITLE, lang="zh")
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping

import numpy as np
from manim import Text, ManimColor, interpolate_color

from narration.i18n import LANGUAGES, language, languages
from narration.text import LANGS  # defined once for the scenes, the beat record and the narration
from scenes.kit.frame_cost import GlyphText, drop_svg_paths
from scenes.kit.theme import ROLES, current_theme

__all__ = [
    "PALETTE", "RoleColors", "FONTS", "set_language", "SIZE_TITLE", "SIZE_BODY", "SIZE_LABEL", "SIZE_SMALL",
    "make_text", "make_wrapped_text", "format_number", "power_of_ten", "value_to_color", "LANGS", "current_language",
]



class _ThemePalette(Mapping):
    """``PALETTE[role]``: the role's colour in the current theme (:mod:`scenes.kit.theme`), looked up on
    every access, so a scene drawn after ``set_theme("light")`` is light throughout."""

    def __getitem__(self, role: str) -> ManimColor:
        return current_theme()[role]

    def __iter__(self) -> Iterator[str]:
        return iter(ROLES)

    def __len__(self) -> int:
        return len(ROLES)

    def __repr__(self) -> str:
        return f"PALETTE(theme={current_theme().name!r})"


# One colour per role, used the same way in every scene; the theme decides which colour that is.
PALETTE = _ThemePalette()


class RoleColors(Mapping):
    """``{key: role}`` read as ``{key: colour of that role in the current theme}``, resolved on each
    access (a module-level table of colours would freeze the theme that was current at import).

    Example: ``RUN_COLORS = RoleColors(post_ln="plain", pre_ln="residual")``."""

    def __init__(self, **roles: str) -> None:
        unknown = sorted(set(roles.values()) - set(ROLES))
        if unknown:
            raise KeyError(f"no colour role {', '.join(unknown)}; roles: {', '.join(ROLES)}")
        self.roles = dict(roles)

    def __getitem__(self, key: str) -> ManimColor:
        return PALETTE[self.roles[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.roles)

    def __len__(self) -> int:
        return len(self.roles)

# One font per language, from the table of languages (narration.i18n.LANGUAGES): DejaVu Sans for Latin scripts,
# Noto Sans CJK SC (Debian fonts-noto-cjk) for Chinese ...
FONTS = {code: language.font for code, language in LANGUAGES.items()}
_current = {"lang": "en"}
SIZE_TITLE = 38
SIZE_BODY = 28
SIZE_LABEL = 22
SIZE_SMALL = 18  # the smallest size used: still readable at 480p


def set_language(lang: str) -> None:
    """Language of the texts made from now on (LectureScene.setup calls it). ValueError for a language that has
    neither a catalog under locale/ now (one made since this process started counts) nor is English or en-XA."""
    found = languages()
    if lang not in found:
        raise ValueError(f"unknown language {lang!r}; available: {', '.join(found)}")
    _current["lang"] = lang


def current_language() -> str:
    """The language :func:`set_language` chose last ("en" until a scene sets one)."""
    return _current["lang"]


_BUILT_TEXTS: dict[tuple, Text] = {}  # this process's texts, by everything make_text passes to Text; never shown


def _plain(value) -> bool:
    """Whether ``value``'s repr says all of it (so it can be part of a key): no object that prints its id."""
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool, ManimColor))


def make_text(content: str, size: float = SIZE_BODY, color: ManimColor | None = None, **kwargs) -> Text:
    """A Pango ``Text`` in the current language's font. Never put Chinese into MathTex (no CJK font).

    In Chinese the norm bars ‖ come from the Latin font: the CJK font draws them full-width. The glyphs drop
    their parsed SVG paths once drawn into points (scenes.kit.frame_cost.drop_svg_paths): copies, which every
    Transform and FadeIn makes, then cost a sixth; the points, hence the frames, are the same.

    The same text (content, font, size, colour, options) asked for again in this process is a copy of the
    one built first: ~2 ms instead of ~40 ms (Pango's SVG parsed into glyphs again), the same points and
    style, so the same frames."""
    lang = _current["lang"]
    font = FONTS.get(lang) or language(lang).font
    if font != FONTS["en"] and "‖" in content:
        kwargs.setdefault("t2f", {"‖": FONTS["en"]})
    color = color or PALETTE["text"]
    if not _plain(kwargs) or not _plain(color):
        return drop_svg_paths(GlyphText(content, font=font, font_size=size, color=color, **kwargs))
    key = (content, font, float(size), repr(color), repr(sorted(kwargs.items())))
    if key not in _BUILT_TEXTS:
        _BUILT_TEXTS[key] = drop_svg_paths(GlyphText(content, font=font, font_size=size, color=color, **kwargs))
    return _BUILT_TEXTS[key].copy()


# A CJK character (ideographs, CJK and full-width punctuation) is a place to break a line; other text breaks at spaces.
_CJK = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in ((0x2E80, 0x9FFF), (0x3000, 0x303F), (0xFF00, 0xFFEF)))
_TOKENS = re.compile(f"[{_CJK}]|[^{_CJK}\\s]+\\s*|\\s+")
# closing punctuation (full-width: ，。、；：！？）》」』) stays at the end of the line before
_NO_LINE_START = (set(map(chr, (0xFF0C, 0x3002, 0x3001, 0xFF1B, 0xFF1A, 0xFF01, 0xFF1F, 0xFF09, 0x300B, 0x300D, 0x300F)))
                  | set(",.;:!?)%"))


def make_wrapped_text(content: str, width: float, size: float = SIZE_BODY, color: ManimColor | None = None,
                      line_buff: float = 0.08, **kwargs) -> "VGroup":
    """``content`` as lines of :func:`make_text` at ``size`` (never scaled down), each at most ``width`` scene units
    wide: broken at spaces, or between two Chinese characters (not before closing punctuation); a VGroup of the
    lines, aligned left, ``line_buff`` apart. A single word wider than ``width`` stays whole (the layout check
    reports it). Each line costs one Pango text; a line that fits, none more. The group's ``paragraph`` is True."""
    from manim import DOWN, LEFT, VGroup

    tokens = _TOKENS.findall(content.strip())
    lines = []
    while tokens:
        whole = make_text("".join(tokens).strip(), size=size, color=color, **kwargs)
        if whole.width <= width or len(tokens) == 1:
            lines.append(whole)
            break
        k = max(1, min(len(tokens) - 1, int(len(tokens) * width / whole.width)))  # a first guess, then a token at a time
        while k > 1 and tokens[k][0] in _NO_LINE_START:
            k -= 1
        line = make_text("".join(tokens[:k]).strip(), size=size, color=color, **kwargs)
        while k > 1 and line.width > width:
            k -= 1
            while k > 1 and tokens[k][0] in _NO_LINE_START:
                k -= 1
            line = make_text("".join(tokens[:k]).strip(), size=size, color=color, **kwargs)
        while k + 1 < len(tokens):
            j = k + 1
            while j < len(tokens) and tokens[j][0] in _NO_LINE_START:
                j += 1
            if j >= len(tokens):
                break
            longer = make_text("".join(tokens[:j]).strip(), size=size, color=color, **kwargs)
            if longer.width > width:
                break
            k, line = j, longer
        lines.append(line)
        tokens = tokens[k:]
        while tokens and tokens[0].isspace():
            tokens.pop(0)
    paragraph = VGroup(*lines).arrange(DOWN, aligned_edge=LEFT, buff=line_buff)
    paragraph.paragraph = True  # scenes.kit.fit shrinks or moves it whole, never one line of it
    return paragraph


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_of_ten(exponent: int) -> str:
    """10 to the power ``exponent`` as written on a board, for a log axis's tick: "1", "10", "10⁻³", "10¹²"."""
    return {0: "1", 1: "10"}.get(exponent, f"10{str(exponent).translate(_SUPERSCRIPT)}")


def format_number(value: float, digits: int = 2) -> str:
    """Short human form: 0.153, 12.4, whole numbers from 1,000 on as 2,048, and outside 0.01 to 10,000 the way a
    lecturer writes it on a board: 3.1×10⁻⁸ (``digits`` significant digits; never the programmer's 3.1e-08);
    'nan' / 'inf' / '0' spelled out."""
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
    mantissa, exponent = f"{value:.{max(digits, 1) - 1}e}".split("e")
    return f"{mantissa}×10{str(int(exponent)).translate(_SUPERSCRIPT)}"


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
