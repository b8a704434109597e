"""A small SVG chart writer: lines, points and rectangles on linear or log axes.

Inline SVG keeps the HTML report one self-contained file with no script and no network:
it renders the same in a browser, an e-mail client or a CI artefact viewer, and there is
no JavaScript bundle to vendor and keep patched.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape

PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
)  # fmt: skip

_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_TOP, _MARGIN_BOTTOM = 64, 150, 34, 46


def color(index: int) -> str:
    """The palette colour of series ``index``."""
    return PALETTE[index % len(PALETTE)]


@dataclass
class _Series:
    name: str
    kind: str  # line | points | rects
    xs: list[float]
    ys: list[float]
    color: str
    # rects: xs/ys are x0, y0 and these are x1, y1
    x1: list[float] = field(default_factory=list)
    y1: list[float] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    emphasis: list[bool] = field(default_factory=list)
    legend: bool = True


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        start, stop = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        ticks = [10.0**e * m for e in range(start, stop + 1) for m in (1, 2, 5)]
        inside = [t for t in ticks if lo <= t <= hi]
        return inside if len(inside) >= 2 else [lo, hi]
    span = hi - lo or 1.0
    raw = span / 5
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _label(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:g}"
    return f"{value:.3g}"


class Chart:
    """One chart: add series, then ``render()`` an ``<svg>`` element."""

    def __init__(
        self,
        title: str,
        x_label: str,
        y_label: str,
        *,
        x_log: bool = False,
        y_log: bool = False,
        width: int = 620,
        height: int = 330,
        y_from_zero: bool = True,
    ) -> None:
        self.title, self.x_label, self.y_label = title, x_label, y_label
        self.x_log, self.y_log = x_log, y_log
        self.width, self.height = width, height
        self.y_from_zero = y_from_zero and not y_log
        self.series: list[_Series] = []

    def line(self, name: str, xs: list[float], ys: list[float], colour: str) -> None:
        """A polyline with small markers."""
        self.series.append(_Series(name, "line", xs, ys, colour))

    def points(
        self,
        name: str,
        xs: list[float],
        ys: list[float],
        colour: str,
        labels: list[str] | None = None,
        emphasis: list[bool] | None = None,
    ) -> None:
        """Markers, optionally labelled; emphasised ones are drawn larger and ringed."""
        self.series.append(
            _Series(name, "points", xs, ys, colour, labels=labels or [], emphasis=emphasis or [])
        )

    def rects(
        self,
        name: str,
        x0: list[float],
        x1: list[float],
        y0: list[float],
        y1: list[float],
        colour: str,
    ) -> None:
        """Filled rectangles (histogram bins, stacked bars)."""
        self.series.append(_Series(name, "rects", x0, y0, colour, x1=x1, y1=y1))

    def _bounds(self, values: list[float], log: bool, from_zero: bool) -> tuple[float, float]:
        usable = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
        if not usable:
            return (1.0, 10.0) if log else (0.0, 1.0)
        lo, hi = min(usable), max(usable)
        if log:
            return (lo / 1.15, hi * 1.15) if lo != hi else (lo / 2, hi * 2)
        if from_zero:
            lo = min(lo, 0.0)
        pad = (hi - lo) * 0.05 or abs(hi) * 0.1 or 1.0
        return (lo if from_zero else lo - pad), hi + pad

    def render(self) -> str:
        """The chart as an SVG element string."""
        xs = [v for s in self.series for v in (*s.xs, *s.x1)]
        ys = [v for s in self.series for v in (*s.ys, *s.y1)]
        x_lo, x_hi = self._bounds(xs, self.x_log, from_zero=False)
        y_lo, y_hi = self._bounds(ys, self.y_log, from_zero=self.y_from_zero)
        left, top = _MARGIN_LEFT, _MARGIN_TOP
        plot_w = self.width - _MARGIN_LEFT - _MARGIN_RIGHT
        plot_h = self.height - _MARGIN_TOP - _MARGIN_BOTTOM

        def scale(v: float, lo: float, hi: float, log: bool) -> float:
            if log:
                v = max(v, lo)
                return (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
            return (v - lo) / (hi - lo)

        def px(v: float) -> float:
            return left + plot_w * scale(v, x_lo, x_hi, self.x_log)

        def py(v: float) -> float:
            return top + plot_h * (1 - scale(v, y_lo, y_hi, self.y_log))

        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
            f'width="{self.width}" height="{self.height}" role="img" '
            f'aria-label="{escape(self.title)}" font-family="sans-serif" font-size="11">',
            f'<text x="{left}" y="18" font-size="13" font-weight="bold">'
            f"{escape(self.title)}</text>",
            f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
            'stroke="#999"/>',
        ]
        for t in _ticks(x_lo, x_hi, self.x_log):
            x = px(t)
            out.append(
                f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#eee"/>'
                f'<text x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="middle">'
                f"{_label(t)}</text>"
            )
        for t in _ticks(y_lo, y_hi, self.y_log):
            y = py(t)
            out.append(
                f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>'
                f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_label(t)}</text>'
            )
        out.append(
            f'<text x="{left + plot_w / 2}" y="{self.height - 8}" text-anchor="middle">'
            f"{escape(self.x_label)}</text>"
            f'<text transform="translate(14 {top + plot_h / 2}) rotate(-90)" '
            f'text-anchor="middle">{escape(self.y_label)}</text>'
        )
        for s in self.series:
            out.extend(self._draw(s, px, py))
        legend = [s for s in self.series if s.legend]
        for i, s in enumerate(legend):
            y = top + 6 + i * 16
            out.append(
                f'<rect x="{left + plot_w + 12}" y="{y}" width="10" height="10" fill="{s.color}"/>'
                f'<text x="{left + plot_w + 27}" y="{y + 9}">{escape(s.name[:22])}</text>'
            )
        out.append("</svg>")
        return "".join(out)

    def _draw(
        self, s: _Series, fx: Callable[[float], float], fy: Callable[[float], float]
    ) -> list[str]:
        parts: list[str] = []
        if s.kind == "rects":
            for x0, x1, y0, y1 in zip(s.xs, s.x1, s.ys, s.y1, strict=True):
                if y1 <= y0:
                    continue
                left, right, top, bottom = fx(x0), fx(x1), fy(y1), fy(y0)
                parts.append(
                    f'<rect x="{left:.1f}" y="{top:.1f}" width="{max(right - left - 1, 1):.1f}" '
                    f'height="{bottom - top:.1f}" fill="{s.color}" fill-opacity="0.75"/>'
                )
            return parts
        pairs = [
            (fx(x), fy(y))
            for x, y in zip(s.xs, s.ys, strict=True)
            if x is not None and y is not None
        ]
        if s.kind == "line" and len(pairs) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pairs)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="2"/>'
            )
        if s.kind == "line" and len(pairs) > 12:
            return parts  # a dense line (a CDF) reads better without markers
        for i, (x, y) in enumerate(pairs):
            big = i < len(s.emphasis) and s.emphasis[i]
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{6 if big else 3.5}" fill="{s.color}"'
                + (' stroke="#000" stroke-width="1.5"' if big else "")
                + "/>"
            )
            if i < len(s.labels):
                parts.append(
                    f'<text x="{x + 8:.1f}" y="{y - 6:.1f}" font-size="10">'
                    f"{escape(s.labels[i])}</text>"
                )
        return parts
