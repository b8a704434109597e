"""One look for every chart of the HTML report: colours, markers, tick formats, layout.

A provider is a hue of one qualitative palette; its regions are shades of that hue, each
with its own marker symbol, so "provider · region" pairs stay apart in every chart and
the KPI cards use the same hue. p50 is drawn solid, p99 dashed. Ticks have fixed formats
(d3-format strings, as Plotly takes them) so an axis never reads ``45.5648``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# D3's category10 without its red and grey: red is kept for errors, grey for "ok".
PROVIDER_HUES = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
)  # fmt: skip
# Shade per region index: 0 is the hue itself, < 0 mixes in black, > 0 mixes in white.
REGION_SHADES = (0.0, -0.45, 0.45, -0.7, 0.7)
REGION_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "x")
OK_COLOUR = "#c7c7c7"
ERROR_COLOURS = ("#d62728", "#8b0000", "#f4a582", "#e7298a", "#67001f", "#fdae61", "#ff9896")
P50_DASH, P99_DASH = "solid", "dash"

# d3-format tick formats. "~" trims trailing zeros; ",": thousands separators.
MS_TICKS = ",~r"  # 5, 20, 1,000, 0.5
COUNT_TICKS = ",~r"
SHARE_TICKS = ".3~%"  # 2.5%, 99%
USD_TICKS = "$,.3~r"  # $0.05, $1.2, $20
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"


def _mix(hex_colour: str, amount: float) -> str:
    """``hex_colour`` mixed with black (amount < 0) or white (amount > 0)."""
    rgb = [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]
    target = 255 if amount > 0 else 0
    mixed = [round(c + (target - c) * abs(amount)) for c in rgb]
    return "#" + "".join(f"{c:02x}" for c in mixed)


@dataclass(frozen=True)
class Palette:
    """Colours, markers and names of a report's providers and regions."""

    providers: tuple[str, ...]
    regions: tuple[str, ...]

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str]]) -> Palette:
        """The palette of these (provider, region) pairs, each list sorted by name."""
        seen = set(pairs)
        return cls(tuple(sorted({p for p, _ in seen})), tuple(sorted({r for _, r in seen})))

    def hue(self, provider: str) -> str:
        """The provider's own colour (its first region's shade)."""
        return PROVIDER_HUES[self.providers.index(provider) % len(PROVIDER_HUES)]

    def colour(self, provider: str, region: str) -> str:
        """The provider's hue in the region's shade."""
        shade = REGION_SHADES[self.regions.index(region) % len(REGION_SHADES)]
        return _mix(self.hue(provider), shade) if shade else self.hue(provider)

    def symbol(self, region: str) -> str:
        """The region's marker symbol."""
        return REGION_SYMBOLS[self.regions.index(region) % len(REGION_SYMBOLS)]

    def name(self, provider: str, region: str) -> str:
        """Legend name: ``provider · region``, or the provider alone when there is one region."""
        return provider if len(self.regions) == 1 else f"{provider} · {region}"

    def legend_title(self, extra: str = "") -> str:
        """What the legend's names and styles mean (``extra``: what else a name says)."""
        if len(self.regions) == 1:
            return f"provider{extra}<br><sup>region {self.regions[0]}</sup>"
        return f"provider · region{extra}<br><sup>colour = provider, shade + marker = region</sup>"


# Mantissas of log-axis ticks, densest first: the densest set that fits is used.
_LOG_MANTISSAS = ((1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 5), (1, 2, 5), (1,))
_MOST_BEYOND = 0.35  # decades


def _candidates(lo: float, hi: float, mantissas: tuple[int, ...], step: int = 1) -> list[float]:
    decades = range(math.floor(math.log10(lo)) - step, math.ceil(math.log10(hi)) + step + 1)
    return [float(f"{m * 10.0**d:.12g}") for d in decades if d % step == 0 for m in mantissas]


def log_ticks(values: Iterable[float], most: int = 7) -> dict[str, Any]:
    """Tick values and a range for a log axis over ``values`` (positive ones only).

    Plotly's own log ticks label every digit on a short range (``70 80 90 100``), which
    collides in a narrow panel. This picks the densest of 1-2-3-…, 1-2-3-5, 1-2-5 and
    powers of ten (then every other power…) that gives at most ``most`` ticks, and
    widens the range towards the ticks just outside the data so that, with 1-2-5 ticks
    or denser, every point has a labelled tick on each side."""
    positive = [v for v in values if v > 0]
    if not positive:
        return {}
    lo, hi = min(positive), max(positive)
    ticks: list[float] = []
    for mantissas, step in [(m, 1) for m in _LOG_MANTISSAS] + [((1,), s) for s in range(2, 9)]:
        grid = _candidates(lo, hi, mantissas, step)
        below = max((t for t in grid if t <= lo), default=lo)
        above = min((t for t in grid if t >= hi), default=hi)
        ticks = [t for t in grid if below <= t <= above]
        if len(ticks) <= most:
            break
    # Out to the ticks around the data (with room for their labels and the markers), but
    # never more than a third of a decade beyond the data: sparse ticks would waste width.
    low = max(math.log10(ticks[0]), math.log10(lo) - _MOST_BEYOND) - 0.04
    high = min(math.log10(ticks[-1]), math.log10(hi) + _MOST_BEYOND) + 0.04
    return {"tickvals": ticks, "range": [low, high]}


def error_colour(index: int) -> str:
    """Colour of the ``index``-th error class (warm colours, never the providers' hues)."""
    return ERROR_COLOURS[index % len(ERROR_COLOURS)]


def base_layout(title: str, height: int, note: str = "") -> dict[str, Any]:
    """Layout shared by every chart: white background, light grid, legend on the right;
    ``note`` is a line under the title saying how to read the chart."""
    heading: dict[str, Any] = {"text": title, "x": 0.0, "xanchor": "left", "font": {"size": 16}}
    if note:
        heading["subtitle"] = {"text": note, "font": {"size": 12, "color": "#666"}}
    return {
        "title": heading,
        "height": height,
        "margin": {"l": 70, "r": 20, "t": 100 if note else 70, "b": 60},
        "font": {"family": FONT, "size": 13, "color": "#222"},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "hovermode": "closest",
        "hoverlabel": {"namelength": -1},
        "legend": {"itemsizing": "constant", "font": {"size": 12}, "tracegroupgap": 2},
    }


def axis(title: str, tickformat: str, *, log: bool = False, **extra: Any) -> dict[str, Any]:
    """An axis with a unit in its title and a fixed tick format."""
    return {
        "title": {"text": title},
        "type": "log" if log else "linear",
        "tickformat": tickformat,
        "showgrid": True,
        "gridcolor": "#e6e6e6",
        "zeroline": False,
        "showline": True,
        "linecolor": "#999",
        "ticks": "outside",
        "automargin": True,
        **extra,
    }
