"""Terminal output: live stage progress, and printing the report (its tables are laid out
by analytics/render/terminal_report.py; markdown/HTML as text)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from analytics.render.fitted_tables import print_tables
from analytics.render.report_formats import REPORT_FORMATS
from analytics.render.terminal_report import terminal_report
from analytics.report.build import RunReport
from analytics.report.columns import ReportColumn, UnknownColumnError, select
from api.cli.errors import exit_for
from api.schemas import RunPublic, ShardPublic
from scenarios.errors import BadInput
from scenarios.wire.contract import ShardState


class OutputFormat(StrEnum):
    """How a report is printed: the terminal table, or a document format."""

    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"
    csv = "csv"


ColumnsOption = Annotated[
    str | None,
    typer.Option(
        "--columns",
        help="Table columns by key, comma-separated (e.g. ttft_p50_ms,itl_p99_ms,e2e_mean_ms); "
        "provider, stage and region always come first. An unknown key lists them all.",
    ),
]
WideOption = Annotated[
    bool, typer.Option("--wide", help="Every column in the table (it splits to fit the width).")
]


def table_columns(
    fmt: OutputFormat, keys: str | None, wide: bool
) -> tuple[ReportColumn, ...] | None:
    """The terminal table's columns that ``--columns``/``--wide`` ask for (None: the
    compact default), or exit 2 naming what is wrong."""
    if keys is None and not wide:
        return None
    if keys is not None and wide:
        raise exit_for(BadInput("give --columns or --wide, not both"))
    if fmt is not OutputFormat.table:
        raise exit_for(
            BadInput(f"--columns and --wide shape the table; --format {fmt.value} has every column")
        )
    try:
        return select(keys, wide)
    except UnknownColumnError as exc:
        raise exit_for(exc) from None


class StageProgress:
    """One progress bar per stage, drawn from a run's public view (:class:`RunPublic`):
    the same model ``GET /v1/runs/{id}`` answers, so ``tokenbench run`` (from the local
    coordinator) and ``submit --wait`` (polling the server) show the same bars."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._tasks: dict[int, TaskID] = {}

    def __enter__(self) -> StageProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    # TTFT figures shown per stage at most; a larger stage says how many more it has.
    MAX_FIGURES = 4

    @classmethod
    def ttft_figures(cls, shards: Sequence[ShardPublic]) -> str:
        """The stage's TTFT p50 as its report rows give it, one per provider and region
        (``101.6 ms`` for one; ``fast 101.6, slow 203.0 ms`` for several, the region
        named when the stage runs in several); "" before the first. Each is a shard's
        median over its successful requests so far; a level split into parts takes the
        median of its parts' figures, weighted by their successful requests."""
        parts: dict[tuple[str, str], list[tuple[float, int]]] = {}
        for shard in shards:
            ok = shard.requests_done - shard.errors
            if shard.ttft_p50_ms is not None and ok > 0:
                parts.setdefault((shard.provider, shard.region), []).append((shard.ttft_p50_ms, ok))
        if not parts:
            return ""
        figures = {key: cls.weighted_median(values) for key, values in parts.items()}
        if len(figures) == 1 and len({(s.provider, s.region) for s in shards}) == 1:
            return f"{next(iter(figures.values())):.1f} ms"
        several_regions = len({s.region for s in shards}) > 1
        shown = [
            f"{provider}/{region} {value:.1f}" if several_regions else f"{provider} {value:.1f}"
            for (provider, region), value in list(figures.items())[: cls.MAX_FIGURES]
        ]
        more = len(figures) - cls.MAX_FIGURES
        return ", ".join(shown) + " ms" + (f" (+{more} more)" if more > 0 else "")

    @staticmethod
    def weighted_median(values: list[tuple[float, int]]) -> float:
        """Of (value, weight) pairs, the smallest value whose cumulative weight reaches
        half of the total."""
        ordered = sorted(values)
        half = sum(weight for _, weight in ordered) / 2
        seen = 0
        for value, weight in ordered:
            seen += weight
            if seen >= half:
                return value
        return ordered[-1][0]

    def update(self, view: RunPublic) -> None:
        """Redraw the stages that started."""
        for stage in view.stages:
            if stage.state == ShardState.PLANNED:
                continue
            shards = stage.shards
            planned = [s.requests_planned for s in shards]
            total = sum(p for p in planned if p is not None) if None not in planned else None
            done = sum(s.requests_done for s in shards)
            if stage.state != ShardState.RUNNING:
                # A stage bounded by duration (or cancelled) ends below its request cap:
                # show it complete at what it actually sent, not stalled short of the cap.
                total = done
            errors = sum(s.errors for s in shards)
            detail = f"errors {errors}"
            ttft = self.ttft_figures(shards)
            if ttft:
                detail += f" · TTFT p50 {ttft}"
            detail += f" · {stage.state}"
            for end in stage.ended:
                words = end.outcome.replace("_", " ") if end.acted else f"{end.outcome} (marked)"
                detail += f" · {end.provider} {words}"
            task = self._tasks.get(stage.index)
            if task is None:
                description = f"stage {stage.index} · {stage.label}"
                task = self.progress.add_task(description, total=total, detail=detail)
                self._tasks[stage.index] = task
            self.progress.update(task, completed=done, total=total, detail=detail)


def print_report(
    console: Console, report: RunReport, fmt: str, shown: Sequence[ReportColumn] | None = None
) -> None:
    """Print the report as the terminal tables (analytics/render/terminal_report.py: the
    summary's ``shown`` columns, default the compact set, fitted to the console's width)
    or as a document format (json, markdown, html, csv: ``analytics.render.report_formats``, the
    same bytes the REST API serves)."""
    document = REPORT_FORMATS.get(fmt)
    if document is not None:
        # Raw text: rich must neither wrap nor interpret markup in it.
        console.file.write(document.render(report).rstrip("\n") + "\n")
        return
    print_tables(console, terminal_report(report, console.width, shown))
