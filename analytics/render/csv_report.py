"""The report's summary table as CSV: the registry's ``csv`` columns, raw values.

One line per stage × provider × region row, one CSV column per raw field of each
registered column (analytics/report/columns.py): its key, then the fields its cell shows
besides (an interval's bounds, the error classes). Values are as the report holds them,
not as text formats round them: numbers in full precision, an empty field for a missing
value, ``true``/``false``, a list joined with ``;``. Headers are the field names, the
same as the JSON report's and the ``stage_summary`` view's.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from analytics.report.build import RunReport
from analytics.report.columns import columns

__all__ = ["render_csv"]


def _value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ";".join(_value(v) for v in value)
    return str(value)


def render_csv(report: RunReport) -> str:
    """The summary rows of ``report`` as CSV text (a header line, then one line per row)."""
    fields = [field for column in columns("csv") for field in column.fields]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(fields)
    for row in report.stages:
        writer.writerow([_value(row.get(field)) for field in fields])
    return out.getvalue()
