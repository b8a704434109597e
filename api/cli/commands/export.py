"""``tokenbench export``: one stored run as a portable bundle (docs/results-schema.md,
"Run bundles"), read from the local DuckDB file (``--db``); ``tokenbench import`` loads it
into another file. ``--to llmd``: the run's summaries as llm-d benchmark reports instead
(docs/import.md, "llm-d"), one YAML document per stage, provider and region. Exit codes:
0 written, 1 the file is held or unreadable, 2 an unknown run or a run a bundle may not
carry (a credential in a stored URL)."""

from __future__ import annotations

import datetime as dt
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import duckdb
import typer
import yaml

from analytics.report.build import UnknownRunError as UnknownReportRunError
from analytics.report.llmd_export import llmd_report
from analytics.store.bundle_manifest import BundleError
from analytics.store.bundles import UnknownRunError, export_run
from api.cli.errors import exit_for
from api.cli.local_db import open_read_only
from api.cli.streams import stderr
from scenarios.errors import BadInput, NotFound
from scenarios.settings import get_settings


class ExportKind(StrEnum):
    """What ``export`` writes: a run bundle, or llm-d benchmark reports."""

    bundle = "bundle"
    llmd = "llmd"


class BundleOutput(StrEnum):
    """What ``export`` and ``import`` print: a line on stderr, or JSON on stdout too."""

    text = "text"
    json = "json"


def export(
    run_id: Annotated[str, typer.Argument(help="The run to export.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Bundle file to write.")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file to read.")] = None,
    fmt: Annotated[
        BundleOutput, typer.Option("--format", help="json: the manifest on stdout too.")
    ] = BundleOutput.text,
    to: Annotated[
        ExportKind,
        typer.Option(help="bundle: for tokenbench import; llmd: llm-d benchmark reports (YAML)."),
    ] = ExportKind.bundle,
) -> None:
    """Write a stored run as a portable bundle (its tables as Parquet and a manifest), for
    ``tokenbench import`` into another database; or as llm-d benchmark reports."""
    path = db or get_settings().duckdb.path
    con = open_read_only(path)
    if to == ExportKind.llmd:
        _export_llmd(con, run_id, output, path)
        return
    try:
        manifest = export_run(con, run_id, output, dt.datetime.now(dt.UTC))
    except UnknownRunError:
        raise exit_for(NotFound(f"no run {run_id!r} in {path}")) from None
    except BundleError as exc:
        raise exit_for(BadInput(str(exc))) from None
    finally:
        con.close()
    rows = sum(m.rows for m in manifest.members)
    stderr.print(
        f"exported run {run_id}: {rows} rows in {len(manifest.members)} tables to {output}",
        highlight=False,
        soft_wrap=True,
    )
    if fmt == BundleOutput.json:
        typer.echo(json.dumps(manifest.model_dump(mode="json"), indent=2))


def _export_llmd(con: duckdb.DuckDBPyConnection, run_id: str, output: Path, path: Path) -> None:
    """The run's llm-d benchmark reports, one YAML document each, into ``output``."""
    try:
        reports = llmd_report(con, run_id)
    except UnknownReportRunError:
        raise exit_for(NotFound(f"no run {run_id!r} in {path}")) from None
    finally:
        con.close()
    try:
        output.write_text(yaml.safe_dump_all(reports, sort_keys=False), encoding="utf-8")
    except OSError as exc:
        raise exit_for(BadInput(f"cannot write {output}: {exc.strerror}")) from None
    stderr.print(
        f"exported run {run_id}: {len(reports)} llm-d benchmark report(s) to {output}",
        highlight=False,
        soft_wrap=True,
    )
