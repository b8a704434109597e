"""``tokenbench report`` and ``tokenbench sql``: a stored run's report, and user SQL.

Register with ``app.command()(report)`` and ``app.command()(sql)``. Exit codes follow
the CLI's: 0 success, 1 operational error (the database is busy), 2 bad input (unknown
run or provider, refused or invalid SQL, missing ``-o`` for binary output).
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import duckdb
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from analytics.db import connect
from analytics.report import (
    RunReport,
    UnknownProviderError,
    UnknownRunError,
    build_report,
    latest_run_id,
)
from analytics.safe_sql import (
    DatabaseBusyError,
    QueryResult,
    SqlError,
    SqlLimits,
    encode,
    run_query,
)
from analytics.shadow import comparison, is_session
from api.cli.errors import exit_for
from scenarios.errors import BadInput, NotFound, Unavailable
from scenarios.settings import get_settings


class ReportFormat(StrEnum):
    """How a report is written."""

    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


class SqlFormat(StrEnum):
    """How query results are written."""

    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def _consoles() -> tuple[Console, Console]:
    # Reports are wide; when output is not a terminal (CI logs, pipes) do not wrap at 80.
    out = Console(width=None if Console().is_terminal else 200)
    err = Console(stderr=True, width=None if Console(stderr=True).is_terminal else 200)
    return out, err


def _open(path: Path) -> duckdb.DuckDBPyConnection:
    try:
        return connect(path, read_only=True)
    except FileNotFoundError as exc:
        raise exit_for(NotFound(str(exc))) from None
    except duckdb.IOException as exc:
        # DuckDB allows one writer process: a run in progress holds the file.
        raise exit_for(Unavailable(f"cannot open {path}: {str(exc).splitlines()[0]}")) from None


def _build(con: duckdb.DuckDBPyConnection, run_id: str, path: Path) -> RunReport:
    chosen = latest_run_id(con) if run_id == "latest" else run_id
    if chosen is None:
        raise exit_for(NotFound(f"no runs in {path}"))
    try:
        return build_report(con, chosen)
    except UnknownRunError as exc:
        raise exit_for(exc, f"no run {chosen!r} in {path}") from None


def report(
    run_id: Annotated[str, typer.Argument(help="Run id, or 'latest'.")] = "latest",
    compare: Annotated[
        str | None, typer.Option(help="Baseline run id: ratios of this run to that one.")
    ] = None,
    providers: Annotated[
        str | None, typer.Option(help="A,B: ratios of provider B to provider A.")
    ] = None,
    output: Annotated[ReportFormat, typer.Option("--format", help="Report format.")] = (
        ReportFormat.table
    ),
    out_file: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file instead of stdout.")
    ] = None,
    db: Annotated[Path | None, typer.Option(help="DuckDB file.")] = None,
) -> None:
    """Print a stored run's report, optionally comparing two providers or two runs."""
    from api.cli.console import print_report  # noqa: PLC0415

    out, err = _consoles()
    if compare is not None and providers is not None:
        raise exit_for(BadInput("give --compare or --providers, not both"))
    path = db or get_settings().duckdb.path
    con = _open(path)
    shadow_rows = None
    try:
        result = _build(con, run_id, path)
        if is_session(con, result.run_id):
            # A shadow-traffic session: its paired comparison follows the report.
            shadow_rows = comparison(con, result.run_id)
        if providers is not None:
            names = [p.strip() for p in providers.split(",")]
            if len(names) != 2 or not all(names):
                raise exit_for(BadInput("--providers takes two names: A,B"))
            try:
                result = result.with_provider_comparison(names[0], names[1])
            except UnknownProviderError as exc:
                raise exit_for(exc) from None
        if compare is not None:
            result = result.with_run_comparison(_build(con, compare, path))
    finally:
        con.close()
    from analytics.shadow_report import print_comparison  # noqa: PLC0415

    if out_file is None:
        print_report(out, result, output.value)
        if shadow_rows is not None and output.value == "table":
            print_comparison(out, result.run_id, shadow_rows)
        return
    with out_file.open("w", encoding="utf-8") as handle:
        print_report(Console(file=handle, width=250, no_color=True), result, output.value)
    err.print(f"report written to {out_file}", highlight=False)


def sql(
    query: Annotated[str, typer.Argument(help="One SELECT statement.")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file.")] = None,
    output: Annotated[SqlFormat, typer.Option("--format", help="Output format.")] = (
        SqlFormat.table
    ),
    out_file: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file (needed for parquet).")
    ] = None,
    max_rows: Annotated[int, typer.Option(min=1, help="Row cap of the answer.")] = 10_000,
    timeout_s: Annotated[float, typer.Option(min=0.1, help="Statement timeout.")] = 30.0,
) -> None:
    """Run a read-only SQL query on the results (sandboxed: no files, network or extensions)."""
    out, err = _consoles()
    if output is SqlFormat.parquet and out_file is None:
        raise exit_for(BadInput("--format parquet needs -o FILE"))
    path = db or get_settings().duckdb.path
    try:
        result = run_query(path, query, SqlLimits(max_rows=max_rows, timeout_s=timeout_s))
    except FileNotFoundError as exc:
        raise exit_for(NotFound(str(exc))) from None
    except duckdb.IOException as exc:
        raise exit_for(Unavailable(f"cannot open {path}: {str(exc).splitlines()[0]}")) from None
    except (DatabaseBusyError, SqlError) as exc:
        raise exit_for(exc) from None
    if result.truncated:
        err.print(f"[yellow]result cut at {max_rows} rows (--max-rows)", highlight=False)
    _write_result(result, output, out_file, out)


def _write_result(
    result: QueryResult, output: SqlFormat, out_file: Path | None, out: Console
) -> None:
    if output is SqlFormat.table:
        table = Table(caption=f"{result.table.num_rows} rows · {result.elapsed_s:.3f} s")
        for name in result.table.column_names:
            table.add_column(name)
        for row in result.table.to_pylist():
            table.add_row(*("NULL" if v is None else escape(str(v)) for v in row.values()))
        if out_file is None:
            out.print(table)
        else:
            with out_file.open("w", encoding="utf-8") as handle:
                Console(file=handle, width=250, no_color=True).print(table)
        return
    payload = encode(result.table, output.value)
    if out_file is None:
        sys.stdout.buffer.write(payload)
        sys.stdout.buffer.flush()
    else:
        out_file.write_bytes(payload)
