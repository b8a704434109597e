"""``tokenbench report`` and ``tokenbench sql``: a stored run's report, and user SQL.

Registered in ``api.cli.app.COMMANDS``. Both read the local
DuckDB file (``--db``), or a control plane's REST API (``--server``): while ``tokenbench
serve`` holds the file, only the latter works, and the local command says so. Exit codes
follow the CLI's: 0 success, 1 operational error (the database is held or busy, the
control plane unreachable), 2 bad input (unknown run or provider, refused or invalid
SQL, missing ``-o`` for binary output).
"""

from __future__ import annotations

import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import duckdb
import httpx
import pyarrow as pa
import typer
from rich.console import Console

from analytics.query.safe_sql import (
    DatabaseBusyError,
    QueryResult,
    SqlError,
    SqlLimits,
    run_query,
)
from analytics.report.build import (
    RunReport,
    UnknownProviderError,
    UnknownRunError,
    build_report,
    latest_run_id,
)
from analytics.shadow.capture import comparison, is_session
from api.cli.console import ColumnsOption, OutputFormat, WideOption, table_columns
from api.cli.errors import exit_for
from api.cli.local_db import database_error, open_read_only
from api.cli.report_requests import write_report_with_rows
from api.cli.rest_client import (
    ServerOption,
    TokenOption,
    fetch_report,
    get_json,
    one_source,
    raise_for,
    remote,
)
from api.cli.sql_output import TABLE_ROWS, export_local, export_remote, print_table, remote_row_cap
from api.cli.streams import console_width
from scenarios.errors import BadInput, NotFound
from scenarios.limits import MAX_SQL_ANSWER_ROWS
from scenarios.settings import get_settings


class SqlFormat(StrEnum):
    """How query results are written."""

    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def _consoles() -> tuple[Console, Console]:
    # Created per command (not at import): a test's COLUMNS applies.
    out = Console(width=console_width())
    err = Console(stderr=True, width=console_width(stderr=True))
    return out, err


def _build(con: duckdb.DuckDBPyConnection, run_id: str, path: Path) -> RunReport:
    chosen = latest_run_id(con) if run_id == "latest" else run_id
    if chosen is None:
        raise exit_for(NotFound(f"no runs in {path}"))
    try:
        return build_report(con, chosen)
    except UnknownRunError as exc:
        raise exit_for(exc, f"no run {chosen!r} in {path}") from None


def _provider_pair(providers: str) -> tuple[str, str]:
    names = [p.strip() for p in providers.split(",")]
    if len(names) != 2 or not all(names):
        raise exit_for(BadInput("--providers takes two names: A,B"))
    return names[0], names[1]


def _local_report(
    path: Path, run_id: str, compare: str | None, pair: tuple[str, str] | None
) -> tuple[RunReport, list[dict[str, Any]] | None]:
    """The report (and a shadow session's comparison) read from the DuckDB file."""
    con = open_read_only(path)
    shadow_rows = None
    try:
        result = _build(con, run_id, path)
        if is_session(con, result.run_id):
            # A shadow-traffic session: its paired comparison follows the report.
            shadow_rows = comparison(con, result.run_id)
        if pair is not None:
            try:
                result = result.with_provider_comparison(*pair)
            except UnknownProviderError as exc:
                raise exit_for(exc) from None
        if compare is not None:
            result = result.with_run_comparison(_build(con, compare, path))
    finally:
        con.close()
    return result, shadow_rows


def _remote_run_id(client: httpx.Client, run_id: str, server: str) -> str:
    if run_id != "latest":
        return run_id
    newest = get_json(client, "/v1/runs", {"limit": 1})
    if not newest:
        raise NotFound(f"no runs on {server}")
    return str(newest[0]["id"])


def _remote_report(
    server: str, token: str | None, run_id: str, compare: str | None, pair: tuple[str, str] | None
) -> tuple[RunReport, list[dict[str, Any]] | None]:
    """The report (and a shadow session's comparison) through the control plane's REST
    API: the comparisons are computed there, next to the data."""
    with remote(server, token) as client:
        chosen = _remote_run_id(client, run_id, server)
        query = {
            "compare": None if compare is None else _remote_run_id(client, compare, server),
            "providers": None if pair is None else ",".join(pair),
        }
        result = fetch_report(client, chosen, **query)
        answer = client.get(f"/v1/shadow-sessions/{chosen}/comparison")
        shadow_rows = None
        if answer.status_code != 404:  # 404: a run, not a shadow session
            raise_for(answer)
            shadow_rows = answer.json()["comparison"]
    return result, shadow_rows


def report(
    run_id: Annotated[str, typer.Argument(help="Run id, or 'latest'.")] = "latest",
    compare: Annotated[
        str | None, typer.Option(help="Baseline run id: ratios of this run to that one.")
    ] = None,
    providers: Annotated[
        str | None, typer.Option(help="A,B: ratios of provider B to provider A.")
    ] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="Report format.")] = (
        OutputFormat.table
    ),
    out_file: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file instead of stdout.")
    ] = None,
    db: Annotated[Path | None, typer.Option(help="DuckDB file.")] = None,
    server: ServerOption = None,
    token: TokenOption = None,
    columns: ColumnsOption = None,
    wide: WideOption = False,
    requests: Annotated[
        bool,
        typer.Option(
            "--requests",
            help="With --format json: every request's row too (the requests view), streamed.",
        ),
    ] = False,
) -> None:
    """Print a stored run's report, optionally comparing two providers or two runs. With
    --server, read it from a control plane (while it serves, its DuckDB file is locked).
    The table shows a compact set of columns that reads at 80 columns; --wide shows every
    column, --columns the ones named (tables split to fit the width, never cut a figure)."""
    from api.cli.console import print_report  # noqa: PLC0415

    out, err = _consoles()
    shown = table_columns(output, columns, wide)
    if compare is not None and providers is not None:
        raise exit_for(BadInput("give --compare or --providers, not both"))
    if requests and output is not OutputFormat.json:
        raise exit_for(BadInput("--requests needs --format json"))
    pair = None if providers is None else _provider_pair(providers)
    one_source(server, db)
    path = db or get_settings().duckdb.path
    if server is not None:
        result, shadow_rows = _remote_report(server, token, run_id, compare, pair)
    else:
        result, shadow_rows = _local_report(path, run_id, compare, pair)
    if requests:
        rows = write_report_with_rows(
            result, out_file, db=None if server else path, server=server, token=token
        )
        if out_file is not None:
            err.print(
                f"report with {rows:,} requests written to {out_file}",
                highlight=False,
                soft_wrap=True,
            )
        return
    from analytics.shadow.report import print_comparison  # noqa: PLC0415

    if out_file is None:
        print_report(out, result, output.value, shown)
        if shadow_rows is not None and output.value == "table":
            print_comparison(out, result.run_id, shadow_rows)
        return
    with out_file.open("w", encoding="utf-8") as handle:
        print_report(Console(file=handle, width=250, no_color=True), result, output.value, shown)
    err.print(f"report written to {out_file}", highlight=False, soft_wrap=True)


def sql(
    query: Annotated[str, typer.Argument(help="One SELECT statement.")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file.")] = None,
    output: Annotated[SqlFormat, typer.Option("--format", help="Output format.")] = (
        SqlFormat.table
    ),
    out_file: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file (needed for parquet).")
    ] = None,
    max_rows: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=f"Row cap. The table shows at most this many rows (default {TABLE_ROWS:,}) "
            "and says how many it cut; csv, json and parquet write every row, or fail when "
            "the answer has more than this many.",
        ),
    ] = None,
    timeout_s: Annotated[float, typer.Option(min=0.1, help="Statement timeout.")] = 30.0,
    server: ServerOption = None,
    token: TokenOption = None,
    max_staleness_s: Annotated[
        float,
        typer.Option(
            min=0, help="With --server: oldest acceptable copy of the results, in seconds."
        ),
    ] = 30.0,
) -> None:
    """Run a read-only SQL query on the results (sandboxed: no files, network or extensions).
    With --server, on the control plane's copy of its results (POST /v1/sql)."""
    out, err = _consoles()
    if output is SqlFormat.parquet and out_file is None:
        raise exit_for(BadInput("--format parquet needs -o FILE"))
    one_source(server, db)
    table_cap = max_rows or TABLE_ROWS
    if server is None:
        path = db or get_settings().duckdb.path
        if output is SqlFormat.table:
            limits = SqlLimits(max_rows=table_cap, timeout_s=timeout_s)
            print_table(_local_query(path, query, limits), table_cap, out_file, out)
        else:
            limits = SqlLimits(timeout_s=timeout_s)
            export_local(path, query, output.value, out_file, limits, max_rows)
        return
    default = table_cap if output is SqlFormat.table else MAX_SQL_ANSWER_ROWS
    limits = SqlLimits(max_rows=remote_row_cap(max_rows, default), timeout_s=timeout_s)
    result, age_s = _remote_query(server, token, query, limits, max_staleness_s)
    if age_s >= 1:
        err.print(
            f"[dim]answered from the control plane's copy of the results, {age_s:.0f} s old "
            "(--max-staleness-s 0 for fresh data)",
            highlight=False,
        )
    if output is SqlFormat.table:
        print_table(result, limits.max_rows, out_file, out)
    else:
        export_remote(result, output.value, out_file, max_rows)


def _local_query(path: Path, query: str, limits: SqlLimits) -> QueryResult:
    try:
        return run_query(path, query, limits, count_all=True)
    except FileNotFoundError as exc:
        raise exit_for(NotFound(str(exc))) from None
    except duckdb.IOException as exc:
        raise exit_for(database_error(path, exc)) from None
    except (DatabaseBusyError, SqlError) as exc:
        raise exit_for(exc) from None


def _remote_query(
    server: str, token: str | None, query: str, limits: SqlLimits, max_staleness_s: float
) -> tuple[QueryResult, float]:
    """The rows through ``POST /v1/sql`` (as Arrow: every output format is then written
    as the local command writes it), and how old the control plane's copy was."""
    body = {
        "query": query,
        "format": "arrow",
        "max_rows": limits.max_rows,
        "timeout_s": limits.timeout_s,
        "max_staleness_s": max_staleness_s,
    }
    # The statement may run for its whole timeout, after a refresh of the copy.
    with remote(server, token, timeout_s=limits.timeout_s + 60) as client:
        started = time.perf_counter()
        answer = client.post("/v1/sql", json=body)
        raise_for(answer)
        table = pa.ipc.open_stream(answer.content).read_all()
    headers = answer.headers
    result = QueryResult(
        table=table,
        truncated=headers.get("x-tokenbench-truncated") == "true",
        elapsed_s=time.perf_counter() - started,
    )
    return result, float(headers.get("x-tokenbench-snapshot-age-s", "0"))
