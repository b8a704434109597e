"""``tokenbench import``: load results into a DuckDB file (``--db``) or a control plane
(``--server``).

Two kinds of input (docs/import.md):

- a run bundle written by ``tokenbench export`` (docs/results-schema.md, "Run bundles"),
  recognised by its manifest: the same run, rows already stored skipped;
- other tools' result files (AIPerf, GuideLLM, vLLM bench, inference-perf, llm-d), a file
  or a directory: each folder's files are read by the tool that wrote them (``--tool``,
  recognised by default) in a child process of bounded memory and time, and each run
  found becomes a run of kind ``imported``; the same files imported again are the same
  run. A folder with no result in it is skipped (said on stderr).

What was done is said on stderr; ``--format json`` also prints it on stdout. Exit codes:
0 imported (or already there), 1 the database is held or the control plane unreachable,
2 a malformed, tampered or unknown file (the message names the file and the line or
field; nothing is stored).
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Annotated, Any

import duckdb
import typer

from analytics.imports.child import Parsed, parse_in_child
from analytics.imports.errors import ImportFormatError
from analytics.imports.tools import ToolChoice
from analytics.store.bundle_manifest import BundleError
from analytics.store.bundles import import_bundle, load_bundle
from analytics.store.db import connect
from analytics.store.imported_runs import StoredImport, store_imported
from api.cli.commands.export import BundleOutput
from api.cli.errors import exit_for
from api.cli.local_db import database_error
from api.cli.rest_client import TokenOption, one_source, raise_for, remote
from api.cli.streams import stderr
from scenarios.errors import BadInput, NotFound
from scenarios.limits import MAX_ID_CHARS, MAX_IMPORT_BYTES, MAX_IMPORT_FILES
from scenarios.settings import get_settings


def _is_bundle(path: Path) -> bool:
    """Whether ``path`` is to be read as a run bundle: any tar archive is (a bundle is a
    tar; other tools write JSON, JSONL, CSV and YAML), so a damaged bundle is refused as
    a bundle, with its member named."""
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


def entries_of(path: Path) -> list[tuple[str, bytes]]:
    """The files to import: ``path`` itself, or every file under the directory (hidden
    ones skipped), by path relative to it; bounded before anything is read."""
    if path.is_file():
        files = [(path.name, path)]
    else:
        files = sorted(
            (p.relative_to(path).as_posix(), p)
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
    if len(files) > MAX_IMPORT_FILES:
        raise BadInput(f"{path}: {len(files)} files, at most {MAX_IMPORT_FILES} in one import")
    size = sum(p.stat().st_size for _, p in files)
    if size > MAX_IMPORT_BYTES:
        raise BadInput(f"{path}: {size} bytes, at most {MAX_IMPORT_BYTES} in one import")
    return [(name, p.read_bytes()) for name, p in files]


def upload_body(entries: list[tuple[str, bytes]]) -> bytes:
    """One file as it is, several as a plain tar archive (the REST body)."""
    if len(entries) == 1:
        return entries[0][1]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _say(stored: StoredImport, target: str) -> None:
    verb = "imported" if stored.added else "already stored:"
    rows = f"{stored.requests} requests" if stored.per_request else "summaries only"
    stderr.print(
        f"{verb} run {stored.run_id} ({stored.tool}, {stored.stages} stage(s), {rows}) "
        f"into {target}",
        highlight=False,
        soft_wrap=True,
    )


def _import_bundle(file: Path, path: Path, fmt: BundleOutput) -> None:
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


def _import_local(parsed: Parsed, provider: str | None, path: Path) -> list[StoredImport]:
    try:
        con = connect(path)
    except duckdb.IOException as exc:
        raise exit_for(database_error(path, exc)) from None
    try:
        return [store_imported(con, run, provider or run.tool, "local") for run in parsed.runs]
    finally:
        con.close()


def _import_remote(
    entries: list[tuple[str, bytes]],
    tool: str,
    provider: str | None,
    server: str,
    token: str | None,
) -> dict[str, Any]:
    params = {"tool": tool, "name": entries[0][0][:MAX_ID_CHARS]}
    if provider is not None:
        params["provider"] = provider
    with remote(server, token, timeout_s=600) as client:
        response = client.post(
            "/v1/imports",
            content=upload_body(entries),
            params=params,
            headers={"content-type": "application/octet-stream"},
        )
        raise_for(response)
        answer: dict[str, Any] = response.json()
    return answer


def import_command(
    file: Annotated[
        Path,
        typer.Argument(help="A run bundle, or another tool's result file or directory."),
    ],
    tool: Annotated[
        ToolChoice, typer.Option(help="Which tool wrote the files (auto: recognised).")
    ] = ToolChoice.auto,
    provider: Annotated[
        str | None,
        typer.Option(help="Provider name of the imported runs (default: the tool's name)."),
    ] = None,
    db: Annotated[Path | None, typer.Option(help="DuckDB file to import into.")] = None,
    server: Annotated[
        str | None, typer.Option(envvar="TOKENBENCH_SERVER", help="Import into this control plane.")
    ] = None,
    token: TokenOption = None,
    fmt: Annotated[
        BundleOutput, typer.Option("--format", help="json: what was imported, on stdout.")
    ] = BundleOutput.text,
) -> None:
    """Import a run bundle, or other tools' result files (AIPerf, GuideLLM, vLLM bench,
    inference-perf, llm-d), exactly once: the same files give the same run."""
    one_source(server, db)
    if not file.exists():
        raise exit_for(NotFound(f"no file or directory {file}"))
    path = db or get_settings().duckdb.path
    if file.is_file() and tool.value == "auto" and server is None and _is_bundle(file):
        _import_bundle(file, path, fmt)
        return
    try:
        entries = entries_of(file)
    except BadInput as exc:
        raise exit_for(exc) from None
    if server is not None:
        answer = _import_remote(entries, tool.value, provider, server, token)
        for run in answer["runs"]:
            _say(StoredImport(**run), server)
        result: dict[str, Any] = answer
    else:
        try:
            parsed = parse_in_child(entries, tool.value)
        except ImportFormatError as exc:
            raise exit_for(BadInput(f"{file.name}: {exc}")) from None
        stored = _import_local(parsed, provider, path)
        for one in stored:
            _say(one, str(path))
        result = {"runs": [s.to_json() for s in stored], "skipped": parsed.skipped}
    for folder in result["skipped"]:
        stderr.print(
            f"skipped {folder}: no result file in it", highlight=False, markup=False, soft_wrap=True
        )
    if fmt == BundleOutput.json:
        typer.echo(json.dumps(result, indent=2))
