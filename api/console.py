"""Terminal output: live stage progress and the report table (rich)."""

from __future__ import annotations

import json
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

from analytics.report import RunReport
from api.coordinator import RunCoordinator


class StageProgress:
    """One progress bar per stage, fed by the coordinator's progress callback."""

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

    def update(self, coordinator: RunCoordinator) -> None:
        """Redraw from the coordinator's view of its shards."""
        for stage in coordinator.stages:
            shards = [coordinator.shards[s.shard_id] for s in stage.shards]
            if (
                all(s.state == "planned" for s in shards)
                and stage.index != coordinator.current_stage
            ):
                continue
            planned = [s.planned for s in shards]
            total = sum(p for p in planned if p is not None) if None not in planned else None
            done = sum(s.done for s in shards)
            errors = sum(s.errors for s in shards)
            ttfts = [s.ttft_p50_ms for s in shards if s.ttft_p50_ms is not None]
            detail = f"errors {errors}"
            if ttfts:
                detail += f" · TTFT p50 ~{sorted(ttfts)[len(ttfts) // 2]:.0f} ms"
            description = f"stage {stage.index} · concurrency {stage.concurrency}"
            task = self._tasks.get(stage.index)
            if task is None:
                task = self.progress.add_task(description, total=total, detail=detail)
                self._tasks[stage.index] = task
            self.progress.update(task, completed=done, total=total, detail=detail)


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def report_table(report: RunReport) -> Table:
    """The per provider × stage table of a report."""
    table = Table(title=f"tokenbench run {report.run_id} · {report.name} · {report.state}")
    columns = [
        ("provider", "left"), ("stage", "right"), ("region", "left"), ("conc", "right"),
        ("requests", "right"), ("errors", "left"),
        ("TTFT p50", "right"), ("TTFT p95", "right"), ("TTFT p99", "right"),
        ("ITL p50", "right"), ("ITL p99", "right"), ("TPOT p50", "right"), ("E2E p99", "right"),
        ("tok/s/stream", "right"), ("agg out tok/s", "right"),
    ]  # fmt: skip
    for name, justify in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in report.stages:
        errors = str(row["errors"]) + (f" ({row['errors_by_class']})" if row["errors"] else "")
        table.add_row(
            row["provider"], str(row["stage"]), row["region"], str(row["concurrency"]),
            str(row["requests"]), errors,
            _fmt(row["ttft_p50_ms"]), _fmt(row["ttft_p95_ms"]), _fmt(row["ttft_p99_ms"]),
            _fmt(row["itl_p50_ms"], 2), _fmt(row["itl_p99_ms"], 2), _fmt(row["tpot_p50_ms"], 2),
            _fmt(row["e2e_p99_ms"]), _fmt(row["decode_tok_s_p50"]), _fmt(row["output_tok_s"]),
        )  # fmt: skip
    table.caption = "latencies in ms, send-based; percentiles over successful requests"
    return table


def print_report(console: Console, report: RunReport, fmt: str) -> None:
    """Print the report as a table or as JSON."""
    if fmt == "json":
        console.print_json(json.dumps(report.to_dict(), default=str))
        return
    console.print(report_table(report))
    failed = [s for s in report.shards if s["state"] != "finished"]
    for shard in failed:
        console.print(f"[yellow]shard {shard['shard_id']}: {shard['state']}: {shard['message']}")
    retried = [s for s in report.shards if (s["attempts"] or 0) > 1]
    for shard in retried:
        console.print(
            f"[yellow]shard {shard['shard_id']} ran {shard['attempts']} attempts; "
            f"attempt {shard['accepted_attempt']} counted"
        )
