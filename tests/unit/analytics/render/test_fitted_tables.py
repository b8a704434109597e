"""analytics/render/fitted_tables.py: tables split to fit a width, never cutting a figure."""

from __future__ import annotations

import io
import itertools

from rich.console import Console

from analytics.render.fitted_tables import (
    GAP,
    TEXT_CAP,
    Column,
    fit,
    print_tables,
    split,
    table_width,
)

KEYS = [Column("provider", ["alpha", "beta-long-name"], numeric=False), Column("stage", ["0", "1"])]
VALUES = [Column(f"v{i}\nms", [f"{1000 * i:,.1f}", f"{i}.25*"]) for i in range(1, 9)]


def render(tables: list, width: int) -> list[str]:  # type: ignore[type-arg]
    console = Console(file=io.StringIO(), width=width, color_system=None)
    print_tables(console, tables)
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def test_a_column_is_as_wide_as_its_widest_line_and_text_values_wrap_at_the_cap() -> None:
    assert Column("TTFT\np50", ["1,234.5*", "9"]).width == 8
    assert Column("errors", ["3 (" + "x" * 40 + ")"], numeric=False, wraps=True).width == TEXT_CAP
    assert table_width(KEYS) == 14 + GAP + 5


def test_values_split_into_the_fewest_even_groups() -> None:
    for width in (40, 60, 80, 200):
        groups = split(KEYS, VALUES, width)
        assert [c for g in groups for c in g] == VALUES  # every column once, in order
        assert all(table_width([*KEYS, *g]) <= width for g in groups)
        # Fewest: no two neighbours would fit together.
        for a, b in itertools.pairwise(groups):
            assert table_width([*KEYS, *a, *b]) > width
    assert len(split(KEYS, VALUES, 200)) == 1
    # Even: at 60 the first-fit split would leave one column alone at the end.
    widths = [table_width([*KEYS, *g]) for g in split(KEYS, VALUES, 60)]
    assert max(widths) - min(widths) <= max(c.width for c in VALUES) + GAP


def test_every_figure_is_printed_whole_within_the_width() -> None:
    for width in (40, 60, 80, 120):
        lines = render(fit("title", KEYS, VALUES, width, caption="a caption"), width)
        assert max(len(line) for line in lines) <= width
        text = "\n".join(lines)
        for column in VALUES:
            for cell in column.cells:
                assert f" {cell}\n" in text or f" {cell} " in text, (width, cell)
        assert text.count("beta-long-name") == len(split(KEYS, VALUES, width))
        assert "…" not in text


def test_a_width_below_the_figures_draws_them_whole_on_longer_lines() -> None:
    lines = render(fit("t", KEYS, VALUES, 12), 12)
    text = "\n".join(lines)
    for column in VALUES:
        for cell in column.cells:
            assert cell in text
    assert "…" not in text


def test_a_long_text_value_wraps_inside_its_column() -> None:
    errors = Column(
        "errors", ["12 (connect=10, http_5xx=1, timeout=1)", "0"], numeric=False, wraps=True
    )
    lines = render(fit("t", KEYS, [errors, *VALUES[:2]], 50), 50)
    assert max(len(line) for line in lines) <= 50
    # On two lines of its row, at word boundaries.
    at = next(i for i, line in enumerate(lines) if line.startswith("alpha"))
    words = lines[at].split()[2:] + lines[at + 1].split()
    assert words == ["12", "(connect=10,", "http_5xx=1,", "timeout=1)"]


def test_cells_are_text_not_markup() -> None:
    keys = [Column("provider", ["[bold]x[/bold]"], numeric=False)]
    text = "\n".join(render(fit("t", keys, [Column("n", ["[1]"])], 80), 80))
    assert "[bold]x[/bold]" in text and "[1]" in text
