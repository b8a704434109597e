"""The SVG chart writer: well-formed SVG with one mark per data point, placed on its axes."""

from __future__ import annotations

import itertools
import math
import xml.etree.ElementTree as ET

import pytest

from analytics.svg import PALETTE, Chart, color

NS = "{http://www.w3.org/2000/svg}"
LEFT, TOP, WIDTH, HEIGHT, RIGHT, BOTTOM = 64, 34, 620, 330, 150, 46


def parse(chart: Chart) -> ET.Element:
    root = ET.fromstring(chart.render())
    assert root.tag == f"{NS}svg"
    assert root.get("viewBox") == f"0 0 {chart.width} {chart.height}"
    return root


def marks(root: ET.Element, tag: str, fill: str) -> list[ET.Element]:
    """The elements of one series (its colour), legend swatches excluded."""
    found = [e for e in root.iter(f"{NS}{tag}") if fill in (e.get("fill"), e.get("stroke"))]
    return [e for e in found if e.get("width") != "10"]


def texts(root: ET.Element) -> list[str]:
    return [e.text or "" for e in root.iter(f"{NS}text")]


def test_line_points_and_rects_each_draw_their_data() -> None:
    chart = Chart("Latency <vs> load & cost", "concurrency", "ms")
    chart.line("api p50", [1, 2, 4, 8], [100, 120, 150, 300], color(0))
    chart.points("gpu", [1, 8], [90, 400], color(1), labels=["c=1", "c=8"], emphasis=[False, True])
    chart.rects("bins", [0, 2, 4], [2, 4, 6], [0, 0, 0], [50, 0, 25], color(2))
    root = parse(chart)

    (polyline,) = marks(root, "polyline", color(0))
    points = [tuple(map(float, p.split(","))) for p in (polyline.get("points") or "").split()]
    assert len(points) == 4
    xs, ys = zip(*points, strict=True)
    assert list(xs) == sorted(xs) and list(ys) == sorted(ys, reverse=True)  # y grows upwards
    assert len(marks(root, "circle", color(0))) == 4  # a short line keeps its markers

    circles = marks(root, "circle", color(1))
    assert [c.get("r") for c in circles] == ["3.5", "6"]  # the emphasised one is larger
    assert circles[1].get("stroke") == "#000" and circles[0].get("stroke") is None
    assert {"c=1", "c=8"} <= set(texts(root))

    # An empty bin (y1 <= y0) draws nothing.
    assert len(marks(root, "rect", color(2))) == 2
    # Title and legend are escaped text, not markup.
    assert "Latency <vs> load & cost" in texts(root)
    assert {"api p50", "gpu", "bins"} <= set(texts(root))


def test_every_mark_lies_inside_the_plot_area() -> None:
    chart = Chart("t", "x", "y", y_from_zero=False)
    chart.points("s", [-5, 0, 3.5, 1e3], [7, -2, 0.5, 12], PALETTE[0])
    root = parse(chart)
    for circle in marks(root, "circle", PALETTE[0]):
        x, y = float(circle.get("cx") or 0), float(circle.get("cy") or 0)
        assert LEFT <= x <= WIDTH - RIGHT
        assert TOP <= y <= HEIGHT - BOTTOM


def test_log_axis_places_decades_evenly_and_ticks_in_range() -> None:
    chart = Chart("cdf", "TTFT (ms, log)", "fraction", x_log=True)
    chart.points("s", [1, 10, 100, 1000], [0.1, 0.4, 0.7, 1.0], PALETTE[3])
    root = parse(chart)
    xs = [float(c.get("cx") or 0) for c in marks(root, "circle", PALETTE[3])]
    steps = [b - a for a, b in itertools.pairwise(xs)]
    assert steps == pytest.approx([steps[0]] * 3, abs=0.2)  # one decade, one step
    labels = [t for t in texts(root) if t.replace(",", "").isdigit()]
    assert {"1", "10", "100", "1,000"} <= set(labels)


def test_dense_line_drops_markers_and_zero_on_a_log_axis_stays_on_the_chart() -> None:
    xs = [i / 100 for i in range(101)]
    chart = Chart("cdf", "ms", "fraction", x_log=True)
    chart.line("dense", [x + 1 for x in xs], xs, PALETTE[4])
    # A zero gap has no logarithm: it is drawn at the axis' lower end, not at -inf.
    chart.points("zero", [0.0], [0.5], PALETTE[5])
    root = parse(chart)
    assert len(marks(root, "polyline", PALETTE[4])) == 1
    assert marks(root, "circle", PALETTE[4]) == []
    (zero,) = marks(root, "circle", PALETTE[5])
    assert float(zero.get("cx") or 0) == pytest.approx(LEFT, abs=0.1)
    for element in root.iter():
        for name in ("x", "y", "cx", "cy"):
            value = element.get(name)
            if value is not None:
                assert math.isfinite(float(value)), (element.tag, name, value)


def test_palette_cycles() -> None:
    assert [color(i) for i in range(len(PALETTE) + 2)] == [*PALETTE, PALETTE[0], PALETTE[1]]
