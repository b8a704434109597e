"""Terminal output: live stage progress and the report (rich tables; markdown/HTML as text)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any

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
from rich.table import Table
from rich.text import Text

from analytics.datasets.fingerprint import dataset_line
from analytics.render.answers_text import (
    CAPACITY_TITLE,
    TextTable,
    capacity_lines,
    ended_table,
    sweep_tables,
)
from analytics.render.fitted_tables import Column, fit, print_tables
from analytics.render.report_formats import REPORT_FORMATS
from analytics.report.build import RunReport
from analytics.report.columns import ROW_KEYS, ReportColumn, UnknownColumnError, select
from analytics.report.failover import failover_sections
from analytics.report.formatting import (
    CAPTION,
    LOW_SAMPLE_NOTE,
    PERCENTILE_HEADER,
    PERCENTILE_KEYS,
    method_note,
    percentile_rows,
)
from analytics.report.sessions import (
    ENDS_HEADER,
    ENDS_TITLE,
    TURNS_HEADER,
    TURNS_NOTE,
    TURNS_TITLE,
    end_rows,
    turn_rows,
)
from analytics.report.token_truth import token_truth_lines
from analytics.report.top_errors import error_lines
from api.cli.errors import exit_for
from api.schemas import RunPublic, ShardPublic
from scenarios.errors import BadInput
from scenarios.wire import ShardState


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


def report_tables(
    report: RunReport, width: int, shown: Sequence[ReportColumn] | None = None
) -> list[Table | Text]:
    """The per provider × stage × region summary: ``shown`` (default: the compact set),
    in as many tables as ``width`` needs, each starting with the row keys."""
    chosen = select() if shown is None else shown

    def column(c: ReportColumn) -> Column:
        cells = [c.text(row) for row in report.stages]
        return Column(c.stacked, cells, numeric=c.numeric, wraps=c.key not in ROW_KEYS)

    notes = [CAPTION, LOW_SAMPLE_NOTE, method_note(report.percentiles)]
    return fit(
        f"tokenbench run {report.run_id} · {report.name} · {report.state}",
        [column(c) for c in chosen if c.key in ROW_KEYS],
        [column(c) for c in chosen if c.key not in ROW_KEYS],
        width,
        caption="\n".join(note for note in notes if note),
    )


def percentile_tables(report: RunReport, width: int) -> list[Table | Text]:
    """Per latency metric with a sample: its percentiles, mean, standard deviation and
    intervals per row (an interval column that no row has is left out)."""
    by_metric: dict[str, list[list[str]]] = {}
    for line in percentile_rows(report.stages):
        by_metric.setdefault(line[3], []).append(line)
    tables: list[Table | Text] = []
    keys = range(3)
    values = range(PERCENTILE_KEYS, len(PERCENTILE_HEADER))
    for metric, lines in by_metric.items():
        columns = [[line[i] for line in lines] for i in range(len(PERCENTILE_HEADER))]
        shown = [
            i
            for i in values
            if "CI" not in PERCENTILE_HEADER[i] or any(cell != "–" for cell in columns[i])
        ]
        tables += fit(
            f"{metric} latency (ms)",
            [Column(PERCENTILE_HEADER[i], columns[i], numeric=i == 1) for i in keys],
            [Column(_stack(PERCENTILE_HEADER[i]), columns[i]) for i in shown],
            width,
        )
    return tables


def _stack(header: str) -> str:
    # "p50 95% CI" on two lines: "p50\n95% CI".
    head, _, tail = header.partition(" ")
    return f"{head}\n{tail}" if tail else head


def comparison_tables(comparison: dict[str, Any], width: int) -> list[Table | Text]:
    """A comparison's ratios and verdicts."""
    rows = comparison["rows"]
    ci = [
        "–" if row["ci_low"] is None else f"{row['ci_low']:.2f}–{row['ci_high']:.2f}"
        for row in rows
    ]
    return fit(
        f"{comparison['b']} vs {comparison['a']}",
        [
            Column("stage", [str(row["stage"]) for row in rows]),
            Column("region", [str(row["region"]) for row in rows], numeric=False),
            Column("metric", [str(row["metric"]) for row in rows], numeric=False),
        ],
        [
            Column("B/A", [f"{row['ratio']:.2f}×" for row in rows]),
            Column("95% CI", ci),
            Column("verdict", [str(row["verdict"]) for row in rows], numeric=False, wraps=True),
        ],
        width,
    )


def answer_tables(report: RunReport, width: int) -> list[Table | Text]:
    """The sweep's curve per provider and region (knee marked) and the stages ended
    early, fitted to ``width`` (analytics/render/answers_text.py)."""
    tables: list[TextTable] = list(sweep_tables(report.answers))
    ended = ended_table(report.answers)
    if ended is not None:
        tables.append(ended)
    out: list[Table | Text] = []
    for table in tables:
        cells = [[row[i] for row in table.rows] for i in range(len(table.header))]
        columns = [
            Column(header, cells[i], numeric=table.numeric[i], wraps=not table.numeric[i] and i > 1)
            for i, header in enumerate(table.header)
        ]
        out += fit(table.caption, columns[:1], columns[1:], width)
    if note := report.answers.get("notes"):
        out.append(Text(str(note)))
    return out


def roofline_tables(report: RunReport, width: int) -> list[Table | Text]:
    """Self-hosted providers against the roofline at the observed batch (none if none)."""
    rows = [r for r in report.stages if r.get("roofline_per_stream_tok_s") is not None]
    if not rows:
        return []
    cost = [r.get("cost_per_mtok_output") for r in rows]
    values = {
        "batch": [f"{r['roofline_batch']:.1f}" for r in rows],
        "ceiling\ntok/s/stream": [f"{r['roofline_per_stream_tok_s']:.1f}" for r in rows],
        "measured": [_number(r.get("decode_tok_s_p50")) for r in rows],
        "efficiency": [_percent(r.get("efficiency_pct")) for r in rows],
        "ceiling\nagg tok/s": [f"{r['roofline_aggregate_tok_s']:,.0f}" for r in rows],
        "measured\nagg": [_number(r.get("output_tok_s"), 0) for r in rows],
        "bound": [r["roofline_bound"] or "–" for r in rows],
        "$/1M\nout": ["–" if c is None else f"${c:,.2f}" for c in cost],
    }
    return fit(
        "self-hosted vs roofline ceiling (docs/roofline.md)",
        [
            Column("provider", [r["provider"] for r in rows], numeric=False),
            Column("stage", [str(r["stage"]) for r in rows]),
            Column("region", [r["region"] for r in rows], numeric=False),
        ],
        [Column(h, cells, numeric=h != "bound") for h, cells in values.items()],
        width,
        caption="ceiling at efficiency 1 for the observed batch (achieved concurrency, capped "
        "by memory) and mean resident KV; efficiency = measured per-stream decode ÷ ceiling",
    )


def session_tables(report: RunReport, width: int) -> list[Table | Text]:
    """Multi-turn sessions: figures by turn index, and how sessions ended (none if the
    run had no sessions)."""
    tables: list[Table | Text] = []
    for title, header, rows, caption in (
        (TURNS_TITLE, TURNS_HEADER, turn_rows(report.session_turns), TURNS_NOTE),
        (ENDS_TITLE, ENDS_HEADER, end_rows(report.sessions), ""),
    ):
        if not rows:
            continue
        cells = [[row[i] for row in rows] for i in range(len(header))]
        keys = [
            Column(header[i], cells[i], numeric=header[i] in ("stage", "turn")) for i in range(3)
        ]
        if header is TURNS_HEADER:
            keys.append(Column(header[3], cells[3]))
        first = len(keys)
        values = [Column(header[i], cells[i]) for i in range(first, len(header))]
        tables += fit(title, keys, values, width, caption=caption)
    return tables


def failover_tables(report: RunReport, width: int) -> list[Table | Text]:
    """Failover through a gateway: per stage, per upstream, and the upstreams' logs
    (none if the run had no upstreams)."""
    tables: list[Table | Text] = []
    for section in failover_sections(report.failover, report.upstreams, report.upstream_logs):
        header, keys = section.header, section.keys
        cells = [[row[i] for row in section.rows] for i in range(len(header))]
        key_columns = [Column(header[i], cells[i], numeric=section.numeric[i]) for i in range(keys)]
        values = [Column(header[i], cells[i]) for i in range(keys, len(header))]
        tables += fit(section.title, key_columns, values, width, caption=section.note)
    return tables


def _number(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f} %"


def realism_note(row: Mapping[str, Any]) -> str:
    """One stage's planned → reported prompt tokens, with how lengths were made and the
    calibration warm-up's own error when there was one."""
    note = (
        f"{row['provider']} s{row['stage']} {row['region']}: "
        f"{row['prompt_tokens_planned_mean']:.0f} → {row['prompt_tokens_reported_mean']:.0f} "
        f"({row['prompt_length_error_pct']:+.1f} %"
    )
    source = row.get("prompt_length_source")
    if source == "calibrated" and row.get("prompt_tokens_per_word") is not None:
        note += f", calibrated at {row['prompt_tokens_per_word']:.2f} tok/word"
    elif source:
        note += f", {source}"
    if row.get("prompt_length_warmup_error_pct") is not None:
        note += (
            f"; warm-up {row['prompt_length_warmup_error_pct']:+.1f} % "
            f"over {row['prompt_warmup_requests']}"
        )
    return note + ")"


def images_note(row: Mapping[str, Any]) -> str:
    """One stage's image share, images and bytes per image request, and the image and
    text prompt tokens where the server reported them apart."""
    tokens = row.get("image_tokens_mean")
    text = row.get("text_prompt_tokens_mean")
    return (
        f"{row['provider']} s{row['stage']} {row['region']}: "
        f"{row['image_share_pct']:.0f} % of requests, "
        f"{_number(row.get('images_per_request_mean'))} images of "
        f"{_number((row.get('image_bytes_mean') or 0) / 1024)} KiB a request; "
        f"image tokens {'not reported' if tokens is None else f'{tokens:,.0f}'}, "
        f"text tokens {'unknown' if text is None else f'{text:,.0f}'}"
    )


def _print_titled(console: Console, title: str, notes: list[str]) -> None:
    if notes:
        console.print(title, highlight=False)
        for note in notes:
            console.print(f"  {note}", highlight=False)


def print_capacity(console: Console, report: RunReport) -> None:
    """A capacity search's answers, one line per provider and region (none if none)."""
    lines = capacity_lines(report.answers)
    if lines:
        console.print(f"[bold]{CAPACITY_TITLE}[/bold]", highlight=False)
        for line in lines:
            console.print(f"  {line}", markup=False, highlight=False)


def print_report(
    console: Console, report: RunReport, fmt: str, shown: Sequence[ReportColumn] | None = None
) -> None:
    """Print the report as the terminal tables (the summary's ``shown`` columns, default
    the compact set, fitted to the console's width) or as a document format (json,
    markdown, html, csv: ``analytics.render.report_formats``, the same bytes the REST API
    serves)."""
    document = REPORT_FORMATS.get(fmt)
    if document is not None:
        # Raw text: rich must neither wrap nor interpret markup in it.
        console.file.write(document.render(report).rstrip("\n") + "\n")
        return
    width = console.width
    print_capacity(console, report)  # the answer heads the report
    print_tables(console, report_tables(report, width, shown))
    print_tables(console, answer_tables(report, width))
    print_tables(console, percentile_tables(report, width))
    print_tables(console, roofline_tables(report, width))
    print_tables(console, session_tables(report, width))
    print_tables(console, failover_tables(report, width))
    if report.comparison:
        print_tables(console, comparison_tables(report.comparison, width))
    print_notes(console, report)


def print_notes(console: Console, report: RunReport) -> None:
    """The lines after the report's tables: why requests failed, the dataset, prompt
    lengths, token counts, pre-warmed connections, client-bound stages, shards that
    failed or ran more than once."""
    _print_measurement_notes(console, report)
    _print_shard_notes(console, report)


def _print_measurement_notes(console: Console, report: RunReport) -> None:
    # Why requests failed, after the tables; messages are text a server wrote: no markup.
    for line in error_lines(report.errors, report.stages):
        console.print(line, markup=False, highlight=False)
    if report.dataset is not None:
        console.print(dataset_line(report.dataset), markup=False, highlight=False)
    _print_titled(
        console,
        "prompt tokens, planned → server-reported (mean error after warm-up; docs/lengths.md)",
        [realism_note(r) for r in report.stages if r.get("prompt_length_error_pct") is not None],
    )
    _print_titled(
        console,
        "images (means; tokens as the server reported them, docs/workloads.md)",
        [images_note(r) for r in report.stages if r.get("image_requests")],
    )
    for line in token_truth_lines(report.stages):
        console.print(line, markup=False, highlight=False)
    warmed = [
        f"{r['provider']} s{r['stage']} {r['region']}: {h['prewarmed_connections']} in "
        f"{h.get('prewarm_ms', 0):.0f} ms"
        for r in report.stages
        if (h := r.get("client_health")) and h.get("prewarmed_connections")
    ]
    if warmed:
        console.print(
            "connections opened before the stage clock (pre-warm, docs/load.md)",
            highlight=False,
        )
        for line in warmed:
            console.print(f"  {line}", highlight=False)
    for row in report.stages:
        if row.get("client_bound"):
            health = row["client_health"]
            console.print(
                f"[yellow]client-bound: {row['provider']} stage {row['stage']} "
                f"{row['region']} ({', '.join(health['client_bound_reasons'])}): "
                f"{health['client_bound_note']} (docs/load.md)",
                highlight=False,
            )


def _print_shard_notes(console: Console, report: RunReport) -> None:
    failed = [s for s in report.shards if s["state"] != ShardState.FINISHED]
    for shard in failed:
        console.print(f"[yellow]shard {shard['shard_id']}: {shard['state']}: {shard['message']}")
    retried = [s for s in report.shards if (s["attempts"] or 0) > 1]
    for shard in retried:
        console.print(
            f"[yellow]shard {shard['shard_id']} ran {shard['attempts']} attempts; "
            f"attempt {shard['accepted_attempt']} counted"
        )
