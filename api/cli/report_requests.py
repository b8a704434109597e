"""``tokenbench report --format json --requests``: the JSON report with every request's row.

Rows are streamed into the document as they are read (analytics/render/request_rows.py): from
the DuckDB file, or, with ``--server``, from the control plane's records route
(``GET /v1/runs/{id}/records``, Arrow), which has every row; the report route's own
``?requests=true`` is capped for answers held in memory, so the command does not use it.
A file (``-o``) is written whole or not at all.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from analytics.render.request_rows import RowsWritten, request_batches, write_report_with_requests
from analytics.report.build import RunReport
from api.cli.errors import exit_for
from api.cli.local_db import open_read_only
from api.cli.rest_client import raise_for, remote
from scenarios.errors import BadInput

__all__ = ["write_report_with_rows"]

# Reading every record of a large run through the control plane takes a while.
_RECORDS_TIMEOUT_S = 600.0


def _write(report: RunReport, batches: Iterable[pa.RecordBatch], out_file: Path | None) -> int:
    if out_file is None:
        written = write_report_with_requests(report, batches, sys.stdout.write)
        sys.stdout.write("\n")
        sys.stdout.flush()
        return written.rows
    partial = out_file.with_name(f".{out_file.name}.{os.getpid()}.partial")
    try:
        with partial.open("w", encoding="utf-8") as handle:
            result: RowsWritten = write_report_with_requests(report, batches, handle.write)
            handle.write("\n")
        os.replace(partial, out_file)
    except OSError as exc:
        raise exit_for(BadInput(f"cannot write {out_file}: {exc.strerror or exc}")) from None
    finally:
        partial.unlink(missing_ok=True)
    return result.rows


def write_report_with_rows(
    report: RunReport,
    out_file: Path | None,
    *,
    db: Path | None = None,
    server: str | None = None,
    token: str | None = None,
) -> int:
    """Write ``report`` as JSON with every request's row, read from ``db`` or through
    ``server``; return how many rows it holds."""
    if server is not None:
        with remote(server, token, timeout_s=_RECORDS_TIMEOUT_S) as client:
            answer = client.get(f"/v1/runs/{report.run_id}/records", params={"format": "arrow"})
            raise_for(answer)
        return _write(report, pa.ipc.open_stream(answer.content), out_file)
    if db is None:
        raise ValueError("give db or server")
    con = open_read_only(db)
    try:
        return _write(report, request_batches(con, report.run_id), out_file)
    finally:
        con.close()
