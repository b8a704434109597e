"""``tokenbench export``: one stored run as a portable bundle (docs/results-schema.md,
"Run bundles"), read from the local DuckDB file (``--db``); ``tokenbench import`` loads it
into another file. Exit codes: 0 written, 1 the file is held or unreadable, 2 an unknown
run or a run a bundle may not carry (a credential in a stored URL)."""

from __future__ import annotations

import datetime as dt
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from analytics.store.bundle_manifest import BundleError
from analytics.store.bundles import UnknownRunError, export_run
from api.cli.errors import exit_for
from api.cli.local_db import open_read_only
from api.cli.streams import stderr
from scenarios.errors import BadInput, NotFound
from scenarios.settings import get_settings


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
) -> None:
    """Write a stored run as a portable bundle (its tables as Parquet and a manifest), for
    ``tokenbench import`` into another database."""
    path = db or get_settings().duckdb.path
    con = open_read_only(path)
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
