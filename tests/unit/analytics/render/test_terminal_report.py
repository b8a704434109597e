"""The terminal renderer: a loop over the sections, each table fitted to the width."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from analytics.render.terminal_report import section_tables, terminal_report
from analytics.sections.model import Column, Section
from tests.support.sample_report import report

COLUMNS = (
    Column("provider", key=True),
    Column("metric", key=True),
    Column("p50", "ms", "ms"),
    Column("CI", "ms", optional=True),
    Column("why"),
)
SECTION = Section(
    "s", "Title", COLUMNS,
    (("api", "TTFT", 81.04, None, "a reason"), ("api", "ITL", 9.5, None, "another")),
    note="what it means",
)  # fmt: skip


def _text(parts: list[Table | Text], width: int = 80) -> str:
    page = Console(width=width, record=True, color_system=None)
    page.print(*parts)
    return page.export_text()


def test_a_table_its_cells_by_kind_and_its_note() -> None:
    parts = section_tables(SECTION, 80)
    (table,) = [p for p in parts if isinstance(p, Table)]
    assert table.title == "Title" and [str(c.header) for c in table.columns] == [
        "provider", "metric", "p50", "why",
    ]  # fmt: skip
    assert [c.justify for c in table.columns] == ["left", "left", "right", "left"]
    text = _text(parts)
    assert "81.0" in text and "what it means" in text.splitlines()[-1]


def test_a_section_split_by_a_column_draws_one_table_per_value() -> None:
    split = Section("s", "T", COLUMNS, SECTION.rows, split_by="metric", split_title="{} (ms)")
    tables = [p for p in section_tables(split, 80) if isinstance(p, Table)]
    assert [t.title for t in tables] == ["TTFT (ms)", "ITL (ms)"]
    assert all("metric" not in [str(c.header) for c in t.columns] for t in tables)


def test_a_narrow_width_splits_the_values_and_repeats_the_keys() -> None:
    wide = Section(
        "w", "Wide", (Column("provider", key=True), *(Column(f"value {i}", "int") for i in range(9))),
        (("api", *range(1_000_000, 1_000_009)),),
    )  # fmt: skip
    tables = [p for p in section_tables(wide, 40) if isinstance(p, Table)]
    assert len(tables) > 1 and all(str(t.columns[0].header) == "provider" for t in tables)
    assert tables[0].title == f"Wide (1/{len(tables)})"


def test_lines_a_title_and_a_warning() -> None:
    titled = section_tables(Section("c", "Capacity", lines=("one",)), 80)
    assert [str(p) for p in titled] == ["Capacity", "  one"]
    (warning,) = section_tables(Section("w", "", lines=("careful",), warning=True), 80)
    assert isinstance(warning, Text) and warning.style == "yellow" and str(warning) == "careful"


def test_the_report_is_titled_by_its_run_and_fits_80_columns() -> None:
    text = _text(terminal_report(report(), 80))
    assert text.lstrip().startswith("tokenbench run run-1 · sections · finished")
    assert "TTFT latency (ms)" in text
    assert max(len(line) for line in text.splitlines()) <= 80
