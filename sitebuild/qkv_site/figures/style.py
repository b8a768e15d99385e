"""Light and dark figure styles that match the site's Material palettes.

The colours are Material for MkDocs' own (``default`` and ``slate`` schemes, primary
indigo, accent deep orange / amber), so a figure sits on the page as if drawn by it.
Lines use the Okabe-Ito palette, which stays distinct under the common colour-vision
deficiencies; heatmaps use viridis, which is perceptually uniform and colour-blind safe.

Examples
--------
>>> STYLES["dark"].background
'#1e2129'
>>> sorted(STYLES)
['dark', 'light']
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass


def _hex(rgb: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{round(c * 255):02x}" for c in rgb)


def _parse(color: str) -> tuple[float, float, float]:
    return tuple(int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))


def _hsl(hue: float, saturation: float, lightness: float) -> tuple[float, float, float]:
    return colorsys.hls_to_rgb(hue / 360, lightness, saturation)


def _over(rgb: tuple[float, float, float], alpha: float, background: str) -> str:
    """The opaque colour of ``rgb`` at ``alpha`` drawn over ``background``."""
    back = _parse(background)
    return _hex(tuple(alpha * c + (1 - alpha) * b for c, b in zip(rgb, back, strict=True)))


# Material's slate scheme: hsla(var(--md-hue) = 225deg, 15%, L%, alpha).
_SLATE_BG = _hex(_hsl(225, 0.15, 0.14))  # --md-default-bg-color
_SLATE_FG = _hsl(225, 0.15, 0.90)  # --md-default-fg-color* (with alphas .82, .56, .32, .12)

# Okabe & Ito (2008), "Color Universal Design".
OKABE_ITO = {
    "black": "#000000",
    "orange": "#e69f00",
    "sky blue": "#56b4e9",
    "bluish green": "#009e73",
    "yellow": "#f0e442",
    "blue": "#0072b2",
    "vermillion": "#d55e00",
    "reddish purple": "#cc79a7",
}


@dataclass(frozen=True)
class Style:
    """Colours of one theme, and the matplotlib settings that apply them."""

    name: str
    background: str
    text: str  # --md-default-fg-color
    muted: str  # --md-default-fg-color--light: tick labels, reference lines
    faint: str  # --md-default-fg-color--lighter: axes edges
    grid: str  # --md-default-fg-color--lightest
    primary: str  # what the site uses for links in this scheme
    accent: str  # the scheme's accent
    scaled: str  # "divided by √d_k" wherever it appears
    unscaled: str  # raw dot products wherever they appear
    lines: tuple[str, ...]  # further series, in order
    cmap: str = "viridis"

    def text_on(self, rgba) -> str:
        """Black or white, whichever reads better on a heatmap cell of colour ``rgba``."""
        r, g, b = rgba[:3]
        luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
        return "#000000" if luminance > 0.45 else "#ffffff"

    def rc(self) -> dict:
        """matplotlib rcParams for this theme (use with ``matplotlib.rc_context``)."""
        return {
            "font.family": ["DejaVu Sans"],  # ships with matplotlib: same glyphs everywhere
            "mathtext.fontset": "dejavusans",
            # Figures are drawn about 480 px wide and shrink to ~350 px on a phone:
            # 11-12 pt keeps every label at 10 px or more there.
            "font.size": 12,
            "axes.titlesize": 12,
            "axes.titleweight": "bold",
            "axes.labelsize": 12,
            "xtick.labelsize": 11,
            "ytick.labelsize": 11,
            "legend.fontsize": 11,
            "figure.facecolor": self.background,
            "figure.edgecolor": self.background,
            "savefig.facecolor": self.background,
            "savefig.edgecolor": self.background,
            "axes.facecolor": self.background,
            "axes.edgecolor": self.faint,
            "axes.labelcolor": self.text,
            "axes.titlecolor": self.text,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": False,
            "axes.prop_cycle": _cycler(self.lines),
            "grid.color": self.grid,
            "grid.linewidth": 0.8,
            "text.color": self.text,
            "xtick.color": self.muted,
            "ytick.color": self.muted,
            "xtick.labelcolor": self.text,
            "ytick.labelcolor": self.text,
            "legend.frameon": False,
            "legend.labelcolor": self.text,
            "lines.linewidth": 2.0,
            "lines.markersize": 5,
            "hatch.color": self.muted,
            "svg.fonttype": "path",  # text as shapes: no dependency on the reader's fonts
            "image.cmap": self.cmap,
            "figure.dpi": 100,
            # a margin around the edge, so no title or label touches it
            "figure.constrained_layout.h_pad": 0.07,
            "figure.constrained_layout.w_pad": 0.07,
        }


def _cycler(colors):
    from cycler import cycler  # a matplotlib dependency

    return cycler(color=list(colors))


LIGHT = Style(
    name="light",
    background="#ffffff",
    text=_over((0, 0, 0), 0.87, "#ffffff"),
    muted=_over((0, 0, 0), 0.54, "#ffffff"),
    faint=_over((0, 0, 0), 0.32, "#ffffff"),
    grid=_over((0, 0, 0), 0.07, "#ffffff"),
    primary="#4051b5",  # indigo --md-primary-fg-color
    accent="#ff6e42",  # deep orange --md-accent-fg-color
    scaled=OKABE_ITO["blue"],
    unscaled=OKABE_ITO["vermillion"],
    lines=tuple(
        OKABE_ITO[c]
        for c in ("blue", "vermillion", "bluish green", "reddish purple", "orange", "sky blue", "black")
    ),
)

DARK = Style(
    name="dark",
    background=_SLATE_BG,
    text=_over(_SLATE_FG, 0.82, _SLATE_BG),
    muted=_over(_SLATE_FG, 0.56, _SLATE_BG),
    faint=_over(_SLATE_FG, 0.32, _SLATE_BG),
    grid=_over(_SLATE_FG, 0.12, _SLATE_BG),
    primary="#82aaff",  # links on slate: docs/assets/css/a11y.css lightens Material's #5488e8
    accent="#ffaa00",  # amber --md-accent-fg-color
    # On a dark background the lighter members of each Okabe-Ito pair read better.
    scaled=OKABE_ITO["sky blue"],
    unscaled=OKABE_ITO["orange"],
    lines=tuple(
        OKABE_ITO[c]
        for c in ("sky blue", "orange", "bluish green", "reddish purple", "vermillion", "yellow", "blue")
    ),
)

STYLES = {"light": LIGHT, "dark": DARK}
