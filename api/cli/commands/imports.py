"""``tokenbench import``: load a file of results into the local DuckDB file (``--db``).

Today that file is a run bundle written by ``tokenbench export`` (docs/results-schema.md,
"Run bundles"), recognised by its manifest; any other file is refused as "not a tokenbench
bundle". The same run imported twice is the same run: rows already stored are skipped.
What was done is said on stderr; ``--format json`` also prints it on stdout. Exit codes:
0 imported (or already there), 1 the database is held, 2 a malformed, tampered or newer
bundle (the message names the member and field; nothing is stored).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import duckdb
import typer

from analytics.store.bundle_manifest import BundleError
from analytics.store.bundles import import_bundle, load_bundle
from analytics.store.db import connect
from api.cli.commands.export import BundleOutput
from api.cli.errors import exit_for
from api.cli.local_db import database_error
from api.cli.streams import stderr
from scenarios.errors import BadInput, NotFound
from scenarios.settings import get_settings


def import_command(
    file: Annotated[Path, typer.Argument(help="A run bundle (tokenbench export).")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file to import into.")] = None,
    fmt: Annotated[
        BundleOutput, typer.Option("--format", help="json: what was imported, on stdout.")
    ] = BundleOutput.text,
) -> None:
    """Import a run bundle written by ``tokenbench export`` into a DuckDB file, exactly
    once (rows already stored are skipped)."""
    if not file.is_file():
        raise exit_for(NotFound(f"no file {file}"))
    path = db or get_settings().duckdb.path
    try:  # checked whole before the database is opened: a bad bundle changes nothing
        loaded = load_bundle(file)
    except BundleError as exc:
        raise exit_for(BadInput(f"{file.name}: {exc}")) from None
    try:
        con = connect(path)
    except duckdb.IOException as exc:
        loaded.scratch.close()
        raise exit_for(database_error(path, exc)) from None
    try:
        result = import_bundle(con, loaded)
    finally:
        con.close()
    verb = "imported" if result.added else "already stored:"
    stderr.print(
        f"{verb} run {result.run_id} (bundle schema v{result.schema_version}): "
        f"{result.added} rows added, {result.skipped} already stored, into {path}",
        highlight=False,
        soft_wrap=True,
    )
    if fmt == BundleOutput.json:
        typer.echo(json.dumps(result.to_json(), indent=2))
