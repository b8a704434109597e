"""A run's JSON report with its per-request rows (``tokenbench report --format json
--requests``, ``GET /v1/runs/{id}/report?requests=true``).

The document is the JSON report (``RunReport.to_dict``) plus ``requests`` (one object per
row of the ``requests`` view of the run: the record's columns and the derived
milliseconds, ``run_id`` left out; instants as ISO 8601), ``requests_total`` (the run's
requests: the sum of its rows' ``requests``) and ``requests_truncated``. It is written as
it is read, a batch of rows at a time, so a run of any size is written without being held
whole. Caps (``max_rows``, ``max_bytes``) are for answers held in memory, the REST
route's: rows past them are left out, ``requests_truncated`` is true and
``requests_note`` says how to get them all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from analytics.render.report_formats import json_default, render_json
from analytics.report.build import RunReport

__all__ = ["RowsWritten", "request_batches", "write_report_with_requests"]

# Rows per Arrow batch read from DuckDB.
BATCH_ROWS = 2048
_SQL = (
    "SELECT * EXCLUDE (run_id) FROM requests WHERE run_id = ? "
    "ORDER BY stage, shard_id, attempt, seq"
)


@dataclass(frozen=True, slots=True)
class RowsWritten:
    """How many per-request rows a document holds, and whether some were left out."""

    rows: int
    truncated: bool


def request_batches(con: duckdb.DuckDBPyConnection, run_id: str) -> Iterator[pa.RecordBatch]:
    """The run's rows of the ``requests`` view (accepted attempts), in record order.
    They stream from a cursor of their own: a result another caller left unfinished on
    ``con`` (a ``fetchone``) must not block the stream, nor the stream ``con``."""
    cursor = con.cursor()
    try:
        yield from cursor.sql(_SQL, params=[run_id]).to_arrow_reader(BATCH_ROWS)
    finally:
        cursor.close()


def _encoded(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, default=json_default, ensure_ascii=False)[1:-1]


def write_report_with_requests(
    report: RunReport,
    batches: Iterable[pa.RecordBatch],
    write: Callable[[str], object],
    *,
    max_rows: int | None = None,
    max_bytes: int | None = None,
    cut_note: str = "",
) -> RowsWritten:
    """Write the document through ``write``, piece by piece; with caps, stop at the
    first row past ``max_rows`` rows or ``max_bytes`` characters of rows, and say so
    (``cut_note``: how to get every row)."""
    write(render_json(report)[:-1] + ', "requests": [')
    written = size = 0
    truncated = False
    for batch in batches:
        columns = [name for name in batch.schema.names if name != "run_id"]
        rows = batch.select(columns).to_pylist()
        if max_rows is None and max_bytes is None:
            text = _encoded(rows) if rows else ""
            if text:
                write(text if written == 0 else ", " + text)
            written += len(rows)
            continue
        # Capped: row by row, so that one batch of long rows cannot overshoot the cap.
        for row in rows:
            text = _encoded([row])
            over_rows = max_rows is not None and written >= max_rows
            encoded = len(text.encode())
            if over_rows or (max_bytes is not None and size + encoded > max_bytes):
                truncated = True
                break
            write(text if written == 0 else ", " + text)
            written += 1
            size += encoded + 2
        if truncated:
            break
    total = sum(int(row.get("requests") or 0) for row in report.stages)
    tail: dict[str, Any] = {"requests_total": total, "requests_truncated": truncated}
    if truncated:
        tail["requests_note"] = f"the first {written:,} of {total:,} requests. {cut_note}".strip()
    write("], " + json.dumps(tail)[1:])
    return RowsWritten(written, truncated)
