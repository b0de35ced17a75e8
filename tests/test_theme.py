"""Themes: WCAG contrast of every text colour, colour-blind-safe hues, and scenes that draw only from the theme.

Example::

    pytest tests/test_theme.py

The WCAG 2.1 contrast ratio is computed here from its definition (sRGB -> linear -> relative luminance),
independently of scenes/kit/theme.py; each check has a twin fed a tampered palette that must fail it. The
source scan finds colour literals (hex strings, Manim's colour constants) anywhere in scenes/ but
scenes/kit/theme.py; the dry-run check finds colours that no theme role gave (Manim's default white, a
constant imported under another name) on screen after every step of every scene in the light theme.
"""

from __future__ import annotations

import colorsys
import io
import tokenize
from pathlib import Path

import manim
import numpy as np
import pytest
from manim import ManimColor

from scenes import SCENES_IN_ORDER
from scenes.kit.style import PALETTE, RoleColors
from scenes.kit.theme import (HUES, OKABE_ITO, ROLES, SHOWN_TOGETHER, THEME_NAMES, THEMES, THIN_STROKE, Theme,
                              fit_contrast, set_theme, stroke_opacity)

from data.make_traces import tiny_trace_files, write_tiny_traces
from dry_run import LIGHT_DEFAULT, built_scene, dry_run, scene_group
from frame_checks import tiny_traces_of
from theme_checks import colour_checked, low_contrast_strokes, wcag_luminance, wcag_ratio

ROOT = Path(__file__).resolve().parent.parent
SCENES_DIR = ROOT / "scenes"


def low_contrast_roles(colors: dict[str, str], minimum: float = 4.5) -> dict[str, float]:
    """Every role but the background is a text colour (scenes colour labels by role)."""
    background = colors["background"]
    ratios = {role: wcag_ratio(c, background) for role, c in colors.items() if role != "background"}
    return {role: r for role, r in ratios.items() if r < minimum}


def hex_palette(theme: Theme) -> dict[str, str]:
    return {role: theme[role].to_hex() for role in ROLES}


def test_wcag_formula_against_known_ratios():
    assert wcag_ratio("#000000", "#FFFFFF") == pytest.approx(21.0)
    assert wcag_ratio("#777777", "#FFFFFF") == pytest.approx(4.48, abs=0.01)  # the classic just-failing grey
    assert wcag_ratio("#767676", "#FFFFFF") == pytest.approx(4.54, abs=0.01)  # ... and the just-passing one


@pytest.mark.parametrize("name", THEME_NAMES)
def test_every_text_colour_has_4_5_to_1_contrast(name):
    palette = hex_palette(THEMES[name])
    assert set(palette) == set(ROLES)
    assert low_contrast_roles(palette) == {}


@pytest.mark.parametrize("name", THEME_NAMES)
def test_contrast_check_fails_on_a_tampered_palette(name):
    """The twin: the raw Okabe-Ito colours (before fitting) or a text colour near the background fail."""
    palette = hex_palette(THEMES[name])
    tampered = dict(palette, text=ManimColor(palette["background"]).interpolate(ManimColor(palette["text"]), 0.4).to_hex())
    assert "text" in low_contrast_roles(tampered)
    raw = dict(palette, **{role: OKABE_ITO[hue] for role, hue in HUES.items()})
    # unfitted, five of the six Okabe-Ito colours are too pale for the light background, blue too dark for the dark one
    assert set(low_contrast_roles(raw)) == ({"plain", "identity", "branch", "grad", "warn"} if name == "light"
                                            else {"residual"})


def test_themes_differ_and_fit_contrast_raises_when_impossible():
    assert relative_order(THEMES["dark"]) == "light text on dark" and relative_order(THEMES["light"]) == "dark text on light"
    with pytest.raises(ValueError, match="no lightness"):
        fit_contrast("#808080", "#808080", minimum=21)


def relative_order(theme: Theme) -> str:
    return "light text on dark" if wcag_luminance(theme.text) > wcag_luminance(theme.background) else "dark text on light"


# -- thin lines: 3:1 on the light background (WCAG 2.1 SC 1.4.11), the dark theme's left as drawn ------------------

def _shade(color, background: str, opacity: float) -> str:
    """``color`` at ``opacity`` over ``background``, mixed per 8-bit sRGB channel (as Cairo paints)."""
    c, b = ManimColor(color).to_rgb(), ManimColor(background).to_rgb()
    return "#" + "".join(f"{round((opacity * x + (1 - opacity) * y) * 255):02X}" for x, y in zip(c, b))


@pytest.mark.parametrize("role", [r for r in ROLES if r != "background"])
def test_thin_lines_reach_3_to_1_on_the_light_background_and_the_dark_ones_stay(role):
    """stroke_opacity gives the least opacity (0.01 steps) from the one asked for whose shade has 3:1 on the light
    background, for a line thinner than THIN_STROKE; a thick line, a line not drawn and every dark line keep theirs.
    Before: the grid (muted at 0.25) had 1.42:1 there, the other seeds' curves (0.45-0.6) 1.9-2.5:1."""
    light, dark = THEMES["light"], THEMES["dark"]
    for opacity in (0.1, 0.25, 0.45, 0.5, 0.6, 0.8):
        for width in (1, 1.5, 2, 3, 4.9):
            level = stroke_opacity(light[role], opacity, width, light)
            assert opacity <= level <= 1.0
            assert wcag_ratio(_shade(light[role], light.background, level), light.background) >= 3.0, (opacity, width)
            if level > opacity:  # the least such opacity
                assert wcag_ratio(_shade(light[role], light.background, level - 0.01), light.background) < 3.0
            assert stroke_opacity(dark[role], opacity, width, dark) == opacity
        assert stroke_opacity(light[role], opacity, THIN_STROKE, light) == opacity
    assert stroke_opacity(light[role], 0.0, 1, light) == 0.0 and stroke_opacity(light[role], 0.5, 0, light) == 0.5


def test_thin_line_check_finds_the_old_grid_and_passes_the_new_one():
    """The twin of the scenes' ``stroke_log``: the old grid line (muted at 0.25, width 1) is found on the light
    background (1.42:1) and not on the dark one (no minimum asked there); the grid as drawn now, a thick band, a
    line whose opacity is a measured value and a dot's background-coloured ring are not."""
    from manim import Line, VGroup

    from scenes.kit.widgets import GRID_OPACITY

    light = THEMES["light"]
    old = Line(manim.LEFT, manim.RIGHT, stroke_width=1, stroke_opacity=0.25, color=light["muted"])
    found = low_contrast_strokes([VGroup(old)], light)
    assert len(found) == 1 and "1.42:1" in next(iter(found)), found
    assert low_contrast_strokes([old], THEMES["dark"]) == set()
    new = old.copy().set_stroke(opacity=stroke_opacity(light["muted"], GRID_OPACITY, 1, light))
    assert low_contrast_strokes([new], light) == set()
    assert low_contrast_strokes([old.copy().set_stroke(width=THIN_STROKE)], light) == set()
    measured = VGroup(old.copy())
    measured.opacity_is_data = True
    assert low_contrast_strokes([measured], light) == set()
    assert low_contrast_strokes([old.copy().set_stroke(color=light["background"], opacity=1)], light) == set()


# -- colour-blind safety: Okabe-Ito hues, only lightness moved ---------------------------------------

def hls(hex_color: str) -> tuple[float, float, float]:
    return colorsys.rgb_to_hls(*ManimColor(hex_color).to_rgb())


@pytest.mark.parametrize("name", THEME_NAMES)
def test_roles_keep_their_okabe_ito_hue_and_saturation(name):
    for role, hue in HUES.items():
        (h0, l0, s0), (h1, l1, s1) = hls(OKABE_ITO[hue]), hls(THEMES[name][role].to_hex())
        assert abs(h1 - h0) * 360 < 2.0, f"{name}.{role}: hue {h1 * 360:.1f} vs Okabe-Ito {hue} {h0 * 360:.1f}"
        assert abs(s1 - s0) < 0.03, f"{name}.{role}: saturation {s1:.3f} vs {s0:.3f}"
        if l1 != pytest.approx(l0, abs=1e-3):  # moved only where contrast demanded it
            assert wcag_ratio(OKABE_ITO[hue], THEMES[name].background) < 4.5, f"{name}.{role} moved without need"


# Machado, Oliveira & Fernandes (2009), "A physiologically-based model for simulation of color vision
# deficiency", IEEE TVCG 15(6), Table 1 at severity 1.0; they act on linear RGB.
CVD = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
}


def _linear(rgb: np.ndarray) -> np.ndarray:
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def _lab(linear_rgb: np.ndarray) -> np.ndarray:
    """CIE L*a*b* (D65) of linear sRGB."""
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = m @ np.clip(linear_rgb, 0, 1) / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def cvd_distance(a: str, b: str, deficiency: str | None) -> float:
    """CIE76 colour difference of ``a`` and ``b`` as seen with ``deficiency`` (None: normal vision)."""
    la, lb = (_linear(np.array(ManimColor(c).to_rgb())) for c in (a, b))
    if deficiency:
        la, lb = CVD[deficiency] @ la, CVD[deficiency] @ lb
    return float(np.linalg.norm(_lab(la) - _lab(lb)))


MIN_DELTA_E = {"core": 20, "other": 10}  # CIE76; 2.3 is just noticeable, 10 plainly different side by side
CORE = {("plain", "residual"), ("identity", "branch")}


def confusable_pairs(colors: dict[str, str], pairs=SHOWN_TOGETHER) -> list[tuple[str, str, str, float]]:
    """Pairs shown together whose colours come closer than MIN_DELTA_E for some viewer."""
    found = []
    for a, b, *_ in pairs:
        minimum = MIN_DELTA_E["core" if (a, b) in CORE else "other"]
        for deficiency in (None, *CVD):
            if (distance := cvd_distance(colors[a], colors[b], deficiency)) < minimum:
                found.append((a, b, deficiency or "normal", round(distance, 1)))
    return found


@pytest.mark.parametrize("name", THEME_NAMES)
def test_roles_shown_together_stay_apart_under_colour_blindness(name):
    assert {(a, b) for a, b, _ in SHOWN_TOGETHER} >= CORE
    assert confusable_pairs(hex_palette(THEMES[name])) == []


def test_colour_blindness_check_fails_on_red_and_green():
    """The twins: the classic red/green pair looks alike to a deuteranope; the palette before this
    theme (gold identity path, orange warnings) loses identity vs warn for protans on a light background."""
    palette = dict(hex_palette(THEMES["dark"]), plain="#D62728", residual="#2CA02C")
    assert ("plain", "residual", "deuteranopia") in [p[:3] for p in confusable_pairs(palette)]
    light = THEMES["light"].background
    hues = dict(identity="orange", warn="yellow", plain="vermillion")
    palette = dict(hex_palette(THEMES["light"]), **{r: fit_contrast(OKABE_ITO[h], light) for r, h in hues.items()})
    assert ("identity", "warn", "protanopia") in [p[:3] for p in confusable_pairs(palette)]


# -- no colour literal in scenes/ outside theme.py -------------------------------------------------------

MANIM_COLOR_NAMES = frozenset(n for n in dir(manim) if isinstance(getattr(manim, n), ManimColor))


def colour_literals(source: str) -> list[str]:
    """Hex colour strings, Manim colour constants (WHITE, RED_E, ...), Manim colour-module imports and
    ``ManimColor(...)`` constructions in Python ``source`` (comments and docstrings are not code)."""
    found = []
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.STRING:
            text = tok.string.lstrip("rbuRBUfF").strip("'\"")
            if _looks_like_hex(text) or text.upper() in MANIM_COLOR_NAMES:
                found.append(f"line {tok.start[0]}: {tok.string}")
        elif tok.type == tokenize.NAME:
            nxt = tokens[i + 1].string if i + 1 < len(tokens) else ""
            if tok.string in MANIM_COLOR_NAMES:
                found.append(f"line {tok.start[0]}: {tok.string}")
            elif tok.string in ("ManimColor", "rgb_to_color", "hex_to_rgb", "color_to_rgb") and nxt == "(":
                found.append(f"line {tok.start[0]}: {tok.string}(...)")
            elif tok.string == "color" and i and tokens[i - 1].string == "." and tokens[i - 2].string == "utils":
                found.append(f"line {tok.start[0]}: manim.utils.color")
    return found


def _looks_like_hex(text: str) -> bool:
    body = text[1:] if text.startswith("#") else None
    return body is not None and len(body) in (3, 4, 6, 8) and all(c in "0123456789abcdefABCDEF" for c in body)


def test_scenes_source_has_no_colour_literal_outside_the_theme():
    files = [p for p in sorted(SCENES_DIR.rglob("*.py")) if p.name != "theme.py"]
    assert len(files) > 10
    found = {str(p.relative_to(ROOT)): hits for p in files if (hits := colour_literals(p.read_text(encoding="utf-8")))}
    assert found == {}, f"colour literals outside scenes/kit/theme.py (use PALETTE[role]): {found}"


def test_colour_scan_finds_hostile_literals():
    """The twin: every Manim colour constant, hex strings of every length, ManimColor(...), colour modules."""
    for name in sorted(MANIM_COLOR_NAMES):
        assert colour_literals(f"x = Dot(color={name})\n"), name
        assert colour_literals(f"x = Dot(color='{name.lower()}')\n"), name
    for literal in ("'#FFF'", "'#ffff'", '"#A1B2C3"', "'#a1b2c3d4'", "r'#123456'"):
        assert colour_literals(f"c = {literal}\n"), literal
    assert colour_literals("c = ManimColor((1, 0, 0))\n")
    assert colour_literals("from manim.utils.color import XKCD\n")
    # not colours: roles, comments, a '#' inside other text, a name that merely contains a colour's
    assert colour_literals('c = PALETTE["plain"]  # was #E8685F, RED\nlabel = "#3 of 5"\nREDUCE = 1\n') == []


# -- on screen: every colour comes from the theme ------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_traces(tmp_path_factory):
    folder = {}

    def get(experiment: str) -> dict[str, str]:
        files = tiny_trace_files(experiment)
        if files is None:  # an experiment added after the committed tiny traces were made
            folder.setdefault("path", tmp_path_factory.mktemp("tiny"))
            files = write_tiny_traces(experiment, folder["path"])
        return files

    return get


# The light theme in the default run: the four scenes whose light frames it compares (together they use every
# widget: tests/dry_run.LIGHT_DEFAULT); every scene in both themes in the slow set, which CI runs (issue 21).


def _theme_marks(scene: type, theme: str) -> list:
    """Light: in the xdist group of the scene's English build (tests/dry_run.scene_group), whose light build the frame
    tests compare and this test reads; slow outside LIGHT_DEFAULT. Dark: slow (a build of its own)."""
    marks = [] if theme == "light" and scene.__name__ in LIGHT_DEFAULT else [pytest.mark.slow]
    return marks + ([pytest.mark.xdist_group(scene_group(scene, "en"))] if theme == "light" else [])


@pytest.mark.parametrize("scene,theme", [pytest.param(scene, theme, id=f"{scene.__name__}-{theme}",
                                                      marks=_theme_marks(scene, theme))
                                         for theme in ("light", "dark") for scene in SCENES_IN_ORDER])
def test_scene_draws_only_theme_colours_and_readable_text(scene, theme, tiny_traces, tmp_path):
    files = None
    if scene.experiment:  # the files the frame tests read (the seed spread's too) where they are committed
        files = tiny_traces_of(scene) or tiny_traces(scene.experiment)
    if theme == "light":  # the light frame test's build: tests/dry_run.built_scene checks colours in every light build
        built = built_scene(scene, "en", files, "light")
    else:
        built = dry_run(colour_checked(scene, theme, files), tmp_path)
    assert built.camera.background_color.to_hex() == THEMES[theme].background
    assert built.colour_log == set(), f"{scene.__name__} draws colours that are not the theme's"
    assert built.contrast_log == set(), f"{scene.__name__} shows text below 4.5:1 against the background"
    assert built.stroke_log == set(), f"{scene.__name__} draws thin lines below the theme's contrast for lines"


def test_theme_colour_check_catches_a_default_white(tmp_path):
    """The twins: a MathTex left in Manim's default white is a foreign colour, and on the light
    background it is unreadable; a muted label faded on purpose is neither."""
    from scenes.kit.base import LectureScene

    class Tampered(LectureScene):
        def construct(self):
            self.play(manim.FadeIn(manim.MathTex("x")))
            self.play(manim.FadeIn(manim.Text("faded", color=PALETTE["muted"]).set_opacity(0.3)))

    built = dry_run(colour_checked(Tampered, "light", None), tmp_path)
    assert built.colour_log and all("#FFFFFF" in entry for entry in built.colour_log)
    assert built.contrast_log and all("#FFFFFF" in entry for entry in built.contrast_log)


# -- the theme is chosen per scene and read on every access ----------------------------------------------

def test_palette_follows_the_current_theme(monkeypatch):
    try:
        run_colors = RoleColors(post="plain", pre="residual")
        for name in THEME_NAMES:
            set_theme(name)
            assert PALETTE["background"] == THEMES[name]["background"]
            assert run_colors["pre"] == THEMES[name]["residual"]
        monkeypatch.setenv("RESIDUAL_THEME", "light")
        assert set_theme(None).name == "light"
        with pytest.raises(ValueError, match="unknown theme 'sepia'; available: dark, light"):
            set_theme("sepia")
        with pytest.raises(KeyError, match="no colour role"):
            RoleColors(post="pink")
    finally:
        set_theme("dark")


def test_cli_knows_the_same_themes():
    from cli import params as cli_params

    assert tuple(cli_params.THEMES) == THEME_NAMES
    assert cli_params.RENDER_DEFAULTS["theme"] == "dark"


# -- --theme on the command line and in the TOML file ---------------------------------------------------

def _corner(png: Path) -> str:
    import av

    with av.open(str(png)) as container:
        frame = next(container.decode(video=0)).to_ndarray(format="rgb24")
    return ManimColor(frame[2, 2] / 255).to_hex()


def test_theme_option_colours_the_render_and_is_part_of_its_key(tmp_path):
    from click.testing import CliRunner

    from render import cli

    def render(*extra):
        args = ["render", "cli_scenes:TinySquare", "--format", "png", "-o", str(tmp_path / "out"), *extra]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        return result

    still = tmp_path / "out" / "480p15" / "en" / "TinySquare.png"
    render("--theme", "light")
    assert _corner(still) == THEMES["light"].background
    record = (still.parent / "TinySquare.png.render.json").read_text()
    assert '"theme": "light"' in record
    assert "scenes: 0 to render" in render("--theme", "light").stderr  # same theme: up to date
    assert "scenes: 1 to render" in render().stderr  # default (dark): rendered again
    assert _corner(still) == THEMES["dark"].background
    config = tmp_path / "lecture.toml"
    config.write_text('[render]\ntheme = "light"\n')
    assert "scenes: 1 to render" in render("--config", str(config)).stderr
    assert _corner(still) == THEMES["light"].background
    assert "scenes: 1 to render" in render("--config", str(config), "--theme", "dark").stderr  # command line wins
    assert _corner(still) == THEMES["dark"].background


def test_bad_theme_is_one_line_and_non_zero(tmp_path):
    from click.testing import CliRunner

    from render import cli

    result = CliRunner().invoke(cli, ["render", "cli_scenes:TinySquare", "--theme", "sepia", "-o", str(tmp_path)])
    assert result.exit_code == 2 and "'sepia' is not one of 'dark', 'light'" in result.output
    config = tmp_path / "bad.toml"
    config.write_text('[render]\ntheme = "sepia"\n')
    result = CliRunner().invoke(cli, ["render", "cli_scenes:TinySquare", "--config", str(config), "-o", str(tmp_path)])
    assert result.exit_code == 1 and "theme must be one of dark, light; got 'sepia'" in result.output
    assert not (tmp_path / "480p15").exists()


def test_render_key_changes_with_the_theme():
    from cli.media import RenderJob

    job = RenderJob("S", "m", {}, {}, {}, "0" * 16, "l", "en", "mp4", False, "/x")
    assert job.theme == "dark"
    assert RenderJob(**{**job.__dict__, "theme": "light"}).key() != job.key()
