"""``tokenbench trend``: a schedule's or a scenario's figures across runs, regressions flagged.

Reads the local DuckDB file (``--db``) or a control plane (``--server``), like ``report``.
The table shows, per provider × region (× stage when the runs have several) and figure,
the last runs as a sparkline, the latest value, the trailing window's mean and 95 %
band, the change and the verdict; the regressions follow in full sentences. ``--format``
json, markdown, csv and html are the documents ``GET /v1/trends`` serves.
``--fail-on-regression`` exits 1 when the latest run regressed (for a CI job).
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from analytics.render.fitted_tables import Column, fit, print_tables
from analytics.trends.build import (
    DEFAULT_TREND_RUNS,
    METRICS,
    TrendOptions,
    TrendReport,
    TrendSelection,
    build_trend,
)
from analytics.trends.formats import TREND_FORMATS, history_rows
from analytics.trends.regression import DEFAULT_MIN_CHANGE, DEFAULT_WINDOW
from analytics.trends.text import JUDGEMENT_HEADER, judgement_cells, span_note
from api.cli.errors import exit_for
from api.cli.local_db import open_read_only
from api.cli.rest_client import (
    ServerOption,
    TokenOption,
    get_json,
    one_source,
    raise_for,
    remote,
)
from api.cli.streams import console_width
from api.schedules.store import ScheduleStore
from scenarios.errors import BadInput, TokenbenchError
from scenarios.limits import MAX_MIN_CHANGE, MAX_TREND_RUNS, MAX_TREND_WINDOW
from scenarios.settings import get_settings


class TrendFormat(StrEnum):
    """How a trend is printed: the terminal table, or a document format."""

    table = "table"
    json = "json"
    markdown = "markdown"
    csv = "csv"
    html = "html"


def trend_tables(report: TrendReport, width: int) -> list[Table | Text]:
    """The latest run against its window, fitted to ``width`` (the stage column only
    when the runs have several stages)."""
    cells = [judgement_cells(report, row) for row in report.rows]
    columns = [[line[i] for line in cells] for i in range(len(JUDGEMENT_HEADER))]
    several_stages = len({row["stage"] for row in report.rows}) > 1
    keys = [
        Column("provider", columns[0], numeric=False),
        Column("region", columns[1], numeric=False),
        *([Column("stage", columns[2])] if several_stages else []),
        Column("metric", columns[3], numeric=False),
    ]
    values = [
        Column("last\nruns", columns[4], numeric=False),
        Column("latest", columns[5]),
        Column("window\n95 % band", columns[6]),
        Column("change", columns[7]),
        Column("verdict", columns[8], numeric=False),
    ]
    return fit(report.title, keys, values, width, caption=span_note(report))


def history_tables(report: TrendReport, width: int) -> list[Table | Text]:
    """Every run's figures, one line per run × provider × region × stage."""
    lines = history_rows(report)
    columns = [[line[i] for line in lines] for i in range(5 + len(METRICS))]
    headers = [m.title.replace(" ", "\n", 1) for m in METRICS]
    return fit(
        "history",
        [
            Column("created (UTC)", columns[0], numeric=False),
            Column("run", columns[1], numeric=False),
            Column("provider", columns[2], numeric=False),
            Column("region", columns[3], numeric=False),
            Column("stage", columns[4]),
        ],
        [Column(h, columns[5 + i]) for i, h in enumerate(headers)],
        width,
    )


def print_trend(console: Console, report: TrendReport, show_history: bool) -> None:
    """The trend's terminal tables, then each regression in a sentence."""
    if not report.runs:
        console.print(f"{report.title}: no ended run yet", highlight=False)
        return
    print_tables(console, trend_tables(report, console.width))
    if show_history:
        print_tables(console, history_tables(report, console.width))
    for row in report.regressions:
        console.print(
            Text(f"{row['provider']} · {row['region']} · stage {row['stage']}: {row['verdict']}"),
            style="red",
            highlight=False,
        )


def _selection(
    schedule: str | None,
    scenario: str | None,
    name: str | None,
    provider: str | None = None,
    model: str | None = None,
) -> TrendSelection:
    try:
        return TrendSelection(
            schedule_id=schedule, scenario_id=scenario, name=name, provider=provider, model=model
        )
    except BadInput as exc:
        if model is not None and provider is None:
            raise exit_for(BadInput("--model narrows --provider: give --provider too")) from None
        raise exit_for(
            BadInput("give one of --schedule, --scenario, --name and --provider")
        ) from exc


def _local(
    path: Path,
    selection: TrendSelection,
    runs: int,
    window: int | None,
    change: float | None,
    as_of: str | None,
) -> TrendReport:
    con = open_read_only(path)
    try:
        default_window, default_change = DEFAULT_WINDOW, DEFAULT_MIN_CHANGE
        if selection.schedule_id is not None:
            stored = ScheduleStore(con).get(selection.schedule_id, deleted=True)
            default_window, default_change = stored.trend_window, stored.min_change
        options = TrendOptions(
            runs=runs,
            window=default_window if window is None else window,
            min_change=default_change if change is None else change,
            as_of=as_of,
        )
        return build_trend(con, selection, options)
    finally:
        con.close()


def _query(
    selection: TrendSelection,
    runs: int,
    window: int | None,
    change: float | None,
    as_of: str | None,
) -> dict[str, Any]:
    return {
        "as_of": as_of,
        "schedule_id": selection.schedule_id,
        "scenario_id": selection.scenario_id,
        "name": selection.name,
        "provider": selection.provider,
        "model": selection.model,
        "runs": runs,
        "window": window,
        "min_change": change,
        "format": "json",
    }


def _defined(query: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in query.items() if value is not None}


def _from_json(data: dict[str, Any]) -> TrendReport:
    names = {f.name for f in dataclasses.fields(TrendReport)}
    return TrendReport(**{key: value for key, value in data.items() if key in names})


def trend(
    schedule: Annotated[str | None, typer.Option(help="Schedule id: the runs it fired.")] = None,
    scenario: Annotated[
        str | None, typer.Option(help="Stored scenario id: its runs over REST.")
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="Scenario name: its runs (local `tokenbench run`s too).")
    ] = None,
    provider: Annotated[
        str | None,
        typer.Option(help="Provider name: every run that measured it, imported ones too."),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="With --provider: only runs of this model.")
    ] = None,
    runs: Annotated[
        int, typer.Option(min=1, max=MAX_TREND_RUNS, help="The newest runs read.")
    ] = DEFAULT_TREND_RUNS,
    window: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_TREND_WINDOW,
            help=f"Earlier runs the latest is judged against (the schedule's, else "
            f"{DEFAULT_WINDOW}).",
        ),
    ] = None,
    min_change: Annotated[
        float | None,
        typer.Option(
            min=0,
            max=MAX_MIN_CHANGE,
            help=f"Smallest relative change that counts (the schedule's, else "
            f"{DEFAULT_MIN_CHANGE:g}).",
        ),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option(help="Judge this run as the latest (later runs left out)."),
    ] = None,
    output: Annotated[TrendFormat, typer.Option("--format", help="Output format.")] = (
        TrendFormat.table
    ),
    out_file: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file instead of stdout.")
    ] = None,
    show_history: Annotated[
        bool, typer.Option("--history", help="The table: every run's figures too.")
    ] = False,
    fail_on_regression: Annotated[
        bool, typer.Option(help="Exit 1 when the latest run regressed.")
    ] = False,
    db: Annotated[Path | None, typer.Option(help="DuckDB file.")] = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Follow a schedule's (or a scenario's) TTFT p50/p99, output tok/s, error rate and
    $/1M output across its runs, and flag the latest run when it regressed."""
    selection = _selection(schedule, scenario, name, provider, model)
    one_source(server, db)
    text: str | None = None
    if server is not None:
        query = _query(selection, runs, window, min_change, as_of)
        with remote(server, token) as client:
            report = _from_json(get_json(client, "/v1/trends", query))
            if output is not TrendFormat.table:
                # The document exactly as the control plane serves it.
                response = client.get(
                    "/v1/trends", params=_defined({**query, "format": output.value})
                )
                raise_for(response)
                text = response.text
    else:
        path = db or get_settings().duckdb.path
        try:
            report = _local(path, selection, runs, window, min_change, as_of)
        except TokenbenchError as exc:
            raise exit_for(exc) from None
    if text is None and output is not TrendFormat.table:
        text = TREND_FORMATS[output.value].render(report)
    _write(report, text, out_file, show_history)
    if fail_on_regression and report.regressions:
        raise typer.Exit(1)


def _write(report: TrendReport, text: str | None, out_file: Path | None, history: bool) -> None:
    if out_file is None:
        if text is not None:
            Console(width=console_width()).file.write(text.rstrip("\n") + "\n")
        else:
            print_trend(Console(width=console_width()), report, history)
        return
    try:
        with out_file.open("w", encoding="utf-8") as handle:
            if text is not None:
                handle.write(text)
            else:
                print_trend(Console(file=handle, width=250, no_color=True), report, history)
    except OSError as exc:
        raise exit_for(BadInput(f"cannot write {out_file}: {exc.strerror}")) from None
    Console(stderr=True).print(f"trend written to {out_file}", highlight=False, soft_wrap=True)
