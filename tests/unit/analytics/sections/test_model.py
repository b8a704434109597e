from __future__ import annotations

import pytest

from analytics.sections.model import MISSING, Column, Section


@pytest.mark.parametrize(
    ("column", "value", "text"),
    [
        (Column("n", "int"), 12345, "12,345"),
        (Column("x", "float", digits=2), 1234.5, "1,234.50"),
        (Column("t", "ms"), 101.04, "101.0"),
        (Column("tok", "tokens", digits=0), 535.6, "536"),
        (Column("p", "percent", digits=0), 66.6, "67 %"),
        (Column("e", "change"), 4.0, "+4.0 %"),
        (Column("e", "change"), -0.25, "-0.2 %"),
        (Column("$", "usd"), 1.2, "$1.20"),
        (Column("$", "usd"), 0.2, "$0.2000"),
        (Column("r", "ratio"), 1.25, "1.25×"),
        (Column("name"), "gpu", "gpu"),
        (Column("n", "int"), "24 of 30", "24 of 30"),  # text already written: as it is
        (Column("n", "int"), None, MISSING),
    ],
)
def test_a_cell_is_written_by_its_column_kind(column: Column, value: object, text: str) -> None:
    assert column.format(value) == text  # type: ignore[arg-type]


def test_figures_are_right_aligned_and_the_terminal_header_may_stack() -> None:
    assert not Column("provider").numeric and Column("n", "int").numeric
    assert Column("TTFT p50", "ms", label="TTFT\np50").header == "TTFT\np50"
    assert Column("stage").header == "stage"


def test_an_optional_column_no_row_fills_is_left_out() -> None:
    columns = (Column("a", key=True), Column("b", "ms", optional=True), Column("c", "ms"))
    empty = Section("s", "S", columns, (("x", None, 1.0), ("y", MISSING, None)))
    assert empty.shown() == [0, 2]
    assert empty.text_rows(empty.shown()) == [["x", "1.0"], ["y", "–"]]
    filled = Section("s", "S", columns, (("x", 2.0, 1.0),))
    assert filled.shown() == [0, 1, 2]


def test_a_row_must_have_a_cell_per_column() -> None:
    with pytest.raises(ValueError, match="a row of 1 cells, not 2"):
        Section("s", "S", (Column("a"), Column("b")), (("x",),))


def test_a_section_as_data_keeps_its_values() -> None:
    table = Section("t", "T", (Column("n", "int", "req"),), ((3,),), note="why", lead="what")
    assert table.to_dict() == {
        "key": "t",
        "title": "T",
        "columns": [{"name": "n", "kind": "int", "unit": "req"}],
        "rows": [[3]],
        "lead": "what",
        "note": "why",
    }
    lines = Section("l", "L", lines=("one", "two"))
    assert not lines.is_table and lines.to_dict() == {
        "key": "l",
        "title": "L",
        "lines": ["one", "two"],
    }
