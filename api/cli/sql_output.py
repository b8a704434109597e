"""Where ``tokenbench sql`` writes its answer, and what it says about rows it did not write.

Two kinds of output, two rules:

- the **table** is for reading: at most ``--max-rows`` rows (default
  :data:`TABLE_ROWS`), and its caption says how many rows the answer had and how many were
  cut (``10,000 of 25,000 rows shown; 15,000 cut at --max-rows 10000``);
- an **export** (``--format csv|json|parquet``, to ``-o FILE`` or stdout) is for
  keeping: every row, streamed from DuckDB in Arrow record batches, never held whole. With
  ``--max-rows N``, an answer of more than N rows is an error naming the cap and how to
  lift it, and a file export leaves nothing behind (it is written beside the target and
  renamed over it only when complete). Through ``--server`` an answer holds at most
  :data:`~scenarios.limits.MAX_SQL_ANSWER_ROWS` rows; an export that would need more fails
  the same way, saying what to do instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import duckdb
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from analytics.query.safe_sql import (
    DatabaseBusyError,
    ExportResult,
    QueryResult,
    SqlError,
    SqlLimits,
    SqlTimeout,
    SqlTooManyRows,
    encode,
    export_query,
)
from api.cli.errors import exit_for
from api.cli.local_db import database_error
from scenarios.errors import BadInput, NotFound
from scenarios.limits import MAX_SQL_ANSWER_ROWS

__all__ = [
    "TABLE_ROWS",
    "export_local",
    "export_remote",
    "print_table",
    "remote_row_cap",
    "table_caption",
]

TABLE_ROWS = 10_000
"""Rows the table shows when ``--max-rows`` is not given."""


def table_caption(result: QueryResult, cap: int) -> str:
    """``3 rows · 0.004 s``, or what was cut: how many rows the answer had when counted
    (a local query), else that there were more (the control plane does not count them)."""
    shown = result.table.num_rows
    elapsed = f"{result.elapsed_s:.3f} s"
    if not result.truncated:
        return f"{shown:,} rows · {elapsed}"
    if result.total_rows is None:
        return f"{shown:,} rows shown; more cut at --max-rows {cap} · {elapsed}"
    cut = result.total_rows - shown
    return (
        f"{shown:,} of {result.total_rows:,} rows shown; {cut:,} cut at --max-rows {cap} "
        f"(raise it, or export with --format csv|json|parquet) · {elapsed}"
    )


def print_table(result: QueryResult, cap: int, out_file: Path | None, out: Console) -> None:
    """The rows as a table on ``out`` or in ``out_file``, then :func:`table_caption` on
    a line of its own (a table's caption would be folded to the table's width)."""
    table = Table()
    for name in result.table.column_names:
        table.add_column(name)
    for row in result.table.to_pylist():
        table.add_row(*("NULL" if v is None else escape(str(v)) for v in row.values()))
    caption = table_caption(result, cap)
    if out_file is None:
        out.print(table)
        out.print(caption, markup=False, highlight=False)
        return
    with out_file.open("w", encoding="utf-8") as handle:
        console = Console(file=handle, width=250, no_color=True)
        console.print(table)
        console.print(caption, markup=False, highlight=False)


def _cap_message(max_rows: int, out_file: Path | None) -> str:
    where = "stdout stops short" if out_file is None else f"nothing was written to {out_file}"
    return (
        f"the answer has more than {max_rows:,} rows (--max-rows {max_rows}): {where}; "
        "raise --max-rows, or leave it out to export every row"
    )


def export_local(
    path: Path,
    query: str,
    fmt: str,
    out_file: Path | None,
    limits: SqlLimits,
    max_rows: int | None,
) -> ExportResult:
    """Every row of ``query`` on the file at ``path``, as ``fmt``, to ``out_file`` (made
    whole or not at all) or stdout; a failure is an exit with its message."""
    try:
        if out_file is None:
            result = export_query(path, query, fmt, sys.stdout.buffer, limits, max_rows)
            sys.stdout.buffer.flush()
            return result
        partial = out_file.with_name(f".{out_file.name}.{os.getpid()}.partial")
        try:
            with partial.open("wb") as handle:
                result = export_query(path, query, fmt, handle, limits, max_rows)
            os.replace(partial, out_file)
        finally:
            partial.unlink(missing_ok=True)
        return result
    except SqlTooManyRows as exc:
        raise exit_for(exc, _cap_message(exc.max_rows, out_file)) from None
    except SqlTimeout as exc:
        raise exit_for(exc, f"{exc}: raise --timeout-s to export more") from None
    except FileNotFoundError as exc:
        raise exit_for(NotFound(str(exc))) from None
    except duckdb.IOException as exc:
        raise exit_for(database_error(path, exc)) from None
    except (DatabaseBusyError, SqlError) as exc:
        raise exit_for(exc) from None
    except OSError as exc:
        target = "stdout" if out_file is None else str(out_file)
        raise exit_for(BadInput(f"cannot write {target}: {exc.strerror or exc}")) from None


def remote_row_cap(max_rows: int | None, default: int) -> int:
    """The ``max_rows`` to ask the control plane for: ``--max-rows``, else ``default``;
    more than one answer may hold is bad input, said before anything is asked."""
    if max_rows is not None and max_rows > MAX_SQL_ANSWER_ROWS:
        raise exit_for(
            BadInput(
                f"--max-rows {max_rows} is above the {MAX_SQL_ANSWER_ROWS:,} rows one answer "
                "of a control plane holds: aggregate, page with LIMIT and OFFSET, or export "
                "from the DuckDB file with --db"
            )
        )
    return default if max_rows is None else max_rows


def export_remote(
    result: QueryResult, fmt: str, out_file: Path | None, max_rows: int | None
) -> None:
    """Write a control plane's answer as ``fmt``; an answer cut at its row cap is an exit
    naming the cap (an export never stops silently), and nothing is written."""
    if result.truncated:
        cap = result.table.num_rows
        if max_rows is not None:
            raise exit_for(SqlTooManyRows(cap), _cap_message(cap, out_file))
        raise exit_for(
            SqlTooManyRows(cap),
            f"the answer has more than {cap:,} rows, the most one answer of a control plane "
            "holds (POST /v1/sql): nothing was written; aggregate, page with LIMIT and "
            "OFFSET, or export from the DuckDB file with --db",
        )
    payload = encode(result.table, fmt)
    if out_file is None:
        sys.stdout.buffer.write(payload)
        sys.stdout.buffer.flush()
    else:
        out_file.write_bytes(payload)
