"""Where a command's report goes, and what its exit code says about the run.

Machine formats (json, markdown, html) and the table go to stdout, or to ``-o FILE``;
banners, progress and notes go to stderr, so ``run ... --format json > out.json`` is
JSON. The exit code: 0 when the run finished and every stage measured something, 1 when
it did not (a stage's error rate above ``--max-error-rate``, by default a stage in which
every request failed), each failing stage named on stderr.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer
from rich.console import Console

from analytics.decide.verdict import failed_stages
from analytics.report.build import RunReport
from analytics.report.columns import ReportColumn
from api.cli.console import OutputFormat, print_report
from api.cli.errors import exit_for
from api.cli.streams import stderr, stdout
from scenarios.errors import BadInput
from scenarios.wire.contract import RunState


def write_report(
    report: RunReport,
    fmt: OutputFormat,
    out_file: Path | None,
    shown: Sequence[ReportColumn] | None = None,
) -> None:
    """The report on stdout, or in ``out_file`` (a note on stderr says where); the
    table's columns are ``shown`` (default: the compact set)."""
    if out_file is None:
        print_report(stdout, report, fmt.value, shown)
        return
    try:
        with out_file.open("w", encoding="utf-8") as handle:
            file = Console(file=handle, width=250, no_color=True)
            print_report(file, report, fmt.value, shown)
    except OSError as exc:
        raise exit_for(BadInput(f"cannot write {out_file}: {exc.strerror}")) from None
    stderr.print(f"report written to {out_file}", highlight=False, soft_wrap=True)


def exit_on_verdict(state: str, report: RunReport, max_error_rate: float) -> None:
    """Exit 1, saying why on stderr, unless the run finished and no stage's error rate
    is above ``max_error_rate``."""
    if state != RunState.FINISHED:
        stderr.print(f"[red]run {report.run_id} ended {state}", highlight=False)
        raise typer.Exit(1)
    failed = failed_stages(report.stages, max_error_rate)
    if failed:
        limit = (
            "every request failed"
            if max_error_rate >= 1
            else (f"error rate above {100 * max_error_rate:g} %")
        )
        stderr.print(
            f"[red]run {report.run_id}: {len(failed)} stage(s) with {limit}:", highlight=False
        )
        for stage in failed:
            stderr.print(f"  {stage.describe()}", highlight=False)
        raise typer.Exit(1)
