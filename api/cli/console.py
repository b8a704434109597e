"""Terminal output: live stage progress and the report (rich tables; markdown/HTML as text)."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

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

from analytics.formatting import (
    CAPTION,
    LOW_SAMPLE_NOTE,
    PERCENTILE_HEADER,
    TERMINAL_COLUMNS,
    method_note,
    percentile_rows,
)
from analytics.html_report import render_html
from analytics.markdown import render_markdown
from analytics.report import RunReport
from api.schemas import RunPublic
from scenarios.wire import ShardState

# Reports are wide; when output is not a terminal (CI logs, pipes) do not wrap at 80.
stdout = Console(width=None if Console().is_terminal else 200)
stderr = Console(stderr=True, width=None if Console(stderr=True).is_terminal else 200)


class OutputFormat(StrEnum):
    """How results are printed."""

    table = "table"
    json = "json"


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
            ttfts = sorted(s.ttft_p50_ms for s in shards if s.ttft_p50_ms is not None)
            detail = f"errors {errors}"
            if ttfts:
                detail += f" · TTFT p50 ~{ttfts[len(ttfts) // 2]:.0f} ms"
            detail += f" · {stage.state}"
            task = self._tasks.get(stage.index)
            if task is None:
                description = f"stage {stage.index} · {stage.label}"
                task = self.progress.add_task(description, total=total, detail=detail)
                self._tasks[stage.index] = task
            self.progress.update(task, completed=done, total=total, detail=detail)


def report_table(report: RunReport) -> Table:
    """The per provider × stage × region summary table of a report."""
    table = Table(title=f"tokenbench run {report.run_id} · {report.name} · {report.state}")
    for column in TERMINAL_COLUMNS:
        # Names and error classes stay on one line so they can be read (and grepped) whole.
        table.add_column(
            column.title,
            justify="right" if column.numeric else "left",
            no_wrap=not column.numeric,
        )
    for row in report.stages:
        table.add_row(*(column.cell(row) for column in TERMINAL_COLUMNS))
    notes = [CAPTION, LOW_SAMPLE_NOTE, method_note(report.percentiles)]
    table.caption = "\n".join(note for note in notes if note)
    return table


def percentile_table(report: RunReport) -> Table:
    """p50 … p99.9 of every latency metric with a sample."""
    table = Table(title="latency percentiles (ms)")
    for i, title in enumerate(PERCENTILE_HEADER):
        table.add_column(title, justify="left" if i < 4 else "right", no_wrap=True)
    for line in percentile_rows(report.stages):
        table.add_row(*line)
    return table


def comparison_table(comparison: dict[str, Any]) -> Table:
    """A comparison's ratios and verdicts."""
    table = Table(title=f"{comparison['b']} vs {comparison['a']}")
    for title in ("stage", "region", "metric", "B/A", "95% CI", "verdict"):
        table.add_column(title)
    for row in comparison["rows"]:
        ci = "–" if row["ci_low"] is None else f"{row['ci_low']:.2f}–{row['ci_high']:.2f}"
        table.add_row(
            str(row["stage"]), row["region"], row["metric"], f"{row['ratio']:.2f}×", ci,
            row["verdict"],
        )  # fmt: skip
    return table


def roofline_table(report: RunReport) -> Table | None:
    """Self-hosted providers against the roofline at the observed batch (None if none)."""
    rows = [r for r in report.stages if r.get("roofline_per_stream_tok_s") is not None]
    if not rows:
        return None
    table = Table(title="self-hosted vs roofline ceiling (docs/roofline.md)")
    for name in (
        "provider", "stage", "region", "batch", "ceiling tok/s/stream", "measured",
        "efficiency", "ceiling agg tok/s", "measured agg", "bound", "$/1M out",
    ):  # fmt: skip
        table.add_column(
            name, justify="left" if name in ("provider", "region", "bound") else "right"
        )
    for r in rows:
        cost = r.get("cost_per_mtok_output")
        table.add_row(
            r["provider"], str(r["stage"]), r["region"], f"{r['roofline_batch']:.1f}",
            f"{r['roofline_per_stream_tok_s']:.1f}", _number(r.get("decode_tok_s_p50")),
            _percent(r.get("efficiency_pct")), f"{r['roofline_aggregate_tok_s']:,.0f}",
            _number(r.get("output_tok_s"), 0), r["roofline_bound"] or "–",
            "–" if cost is None else f"${cost:,.2f}",
        )  # fmt: skip
    table.caption = (
        "ceiling at efficiency 1 for the observed batch (achieved concurrency, capped by "
        "memory) and mean resident KV; efficiency = measured per-stream decode ÷ ceiling"
    )
    return table


def _number(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f} %"


def print_report(console: Console, report: RunReport, fmt: str) -> None:
    """Print the report as a table, JSON, markdown or HTML."""
    if fmt == "json":
        console.print_json(json.dumps(report.to_dict(), default=str))
        return
    if fmt in {"markdown", "html"}:
        # Raw text: rich must neither wrap nor interpret markup in it.
        console.file.write(render_markdown(report) if fmt == "markdown" else render_html(report))
        return
    console.print(report_table(report))
    console.print(percentile_table(report))
    roofline = roofline_table(report)
    if roofline is not None:
        console.print(roofline)
    if report.comparison:
        console.print(comparison_table(report.comparison))
    realism = [
        f"{r['provider']} s{r['stage']} {r['region']}: {r['prompt_tokens_planned_mean']:.0f} → "
        f"{r['prompt_tokens_reported_mean']:.0f} ({r['prompt_length_error_pct']:+.1f} %)"
        for r in report.stages
        if r.get("prompt_length_error_pct") is not None
    ]
    if realism:
        console.print(
            "prompt tokens, planned → server-reported (mean error): " + "; ".join(realism),
            highlight=False,
        )
    for row in report.stages:
        if row.get("client_bound"):
            health = row["client_health"]
            console.print(
                f"[yellow]client-bound: {row['provider']} stage {row['stage']} "
                f"{row['region']} ({', '.join(health['client_bound_reasons'])}): "
                f"{health['client_bound_note']} (docs/load.md)",
                highlight=False,
            )
    failed = [s for s in report.shards if s["state"] != ShardState.FINISHED]
    for shard in failed:
        console.print(f"[yellow]shard {shard['shard_id']}: {shard['state']}: {shard['message']}")
    retried = [s for s in report.shards if (s["attempts"] or 0) > 1]
    for shard in retried:
        console.print(
            f"[yellow]shard {shard['shard_id']} ran {shard['attempts']} attempts; "
            f"attempt {shard['accepted_attempt']} counted"
        )
