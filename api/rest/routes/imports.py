"""``POST /v1/imports``: other tools' result files, and tokenbench run bundles,
imported as runs (docs/import.md, docs/results-schema.md).

The body is one result file, or a tar archive (plain or gzip) of a result folder, sent
as ``application/octet-stream``; capped in bytes like a dataset upload
(``TOKENBENCH__API__MAX_DATASET_BYTES``). The files are untrusted: they are read in a
child process of bounded memory and time (``analytics.imports.child``), no name in them
is used as a path, and a malformed file gets a 422 naming the file and the line or field
with nothing stored. Each run found is stored in one transaction with its owner (the
caller's team and token) and is then a run like any other: listed, reported, compared
and queried under the same visibility rules (docs/teams.md). The same files imported by
the same team give the same run (200 instead of 201).

A run bundle (``tokenbench export``) is recognised by its first member,
``manifest.json``; it is checked and migrated in a child process of its own
(``analytics.store.bundle_child``) and its rows inserted exactly once under its own run
id, owned by the caller's team. A bundle of a run already stored here is added to only
by the team that owns it (404/403 otherwise, as for any change of a run).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import duckdb
from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field

from analytics.imports.child import Parsed, parse_in_child
from analytics.imports.errors import ImportFormatError
from analytics.imports.sets import is_tar, tar_entries
from analytics.imports.tools import ToolChoice
from analytics.store.bundle_child import CheckedBundle, check_in_child, is_bundle
from analytics.store.bundle_manifest import BundleError
from analytics.store.bundles import insert_bundle
from analytics.store.imported_runs import StoredImport, store_imported
from api.access.audit import audit
from api.access.caller import Caller
from api.access.ownership import Kind, Visibility, check_change, record_owner
from api.rest.deps import Authenticated, HeavyDep, SettingsDep, SubmitterDep, WriterDep
from api.rest.errors import BodyProblems, UnsupportedMediaType
from scenarios.datasets.spec import COLUMN_NAME_PATTERN
from scenarios.errors import Timeout
from scenarios.limits import DATASET_DECODED_FACTOR, MAX_ID_CHARS

router = APIRouter(prefix="/v1/imports", tags=["imports"], dependencies=[Authenticated])

MEDIA_TYPES = (
    "application/octet-stream",
    "application/json",
    "application/x-ndjson",
    "application/x-tar",
    "application/gzip",
)
# Imports read at once (each holds its body and a child process); further ones wait.
CONCURRENT_IMPORTS = 2
# A body that has not arrived by then gives its slot up.
BODY_TIMEOUT_S = 180.0
# A provider name: the same characters as a scenario's provider names.
PROVIDER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class ImportedRunPublic(BaseModel):
    """One run an import stored (or found stored)."""

    run_id: str
    tool: str
    added: bool = Field(description="False: the same files were imported before.")
    stages: int
    requests: int = Field(description="Requests stored (0 for a summary-only file).")
    per_request: bool


class ImportPublic(BaseModel):
    """What an import did."""

    runs: list[ImportedRunPublic]
    skipped: list[str] = Field(description="Folders of the archive with no result file in them.")


def _slots(request: Request) -> asyncio.Semaphore:
    state = request.app.state
    if getattr(state, "import_slots", None) is None:
        state.import_slots = asyncio.Semaphore(CONCURRENT_IMPORTS)
    semaphore: asyncio.Semaphore = state.import_slots
    return semaphore


def _entries(body: bytes, name: str) -> list[tuple[str, bytes]]:
    return tar_entries(body) if is_tar(body) else [(name, body)]


def _store(
    cursor: duckdb.DuckDBPyConnection,
    parsed: Parsed,
    provider: str | None,
    caller: Caller,
    visibility: Visibility | None,
) -> list[StoredImport]:
    def owner(con: duckdb.DuckDBPyConnection, run_id: str) -> None:
        record_owner(con, Kind.RUN, run_id, caller, visibility)

    return [
        store_imported(cursor, run, provider or run.tool, caller.token_id, caller.team, owner)
        for run in parsed.runs
    ]


def _store_bundle(
    cursor: duckdb.DuckDBPyConnection,
    bundle: CheckedBundle,
    caller: Caller,
    visibility: Visibility | None,
) -> StoredImport:
    """Insert the bundle's rows not stored yet; a run already stored must be the
    caller's team's to add to (check_change: 404 or 403)."""
    run_id = bundle.run_id
    stored = cursor.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchall()
    if stored:
        check_change(cursor, caller, Kind.RUN, run_id)

    def owner(con: duckdb.DuckDBPyConnection) -> None:
        record_owner(con, Kind.RUN, run_id, caller, visibility)

    # A run moved here belongs to no schedule or stored scenario of this control plane:
    # its origins name objects elsewhere (or, crafted, another team's schedule, whose
    # trend it would join), so they are not imported.
    tables = {name: rows for name, rows in bundle.tables.items() if name != "run_origins"}
    result = insert_bundle(cursor, run_id, bundle.schema_version, tables, owner)
    shards = bundle.tables.get("shards")
    records = bundle.tables.get("request_records")
    return StoredImport(
        run_id=run_id,
        tool="tokenbench",
        added=result.added > 0,
        stages=0 if shards is None else len(set(shards.column("stage").to_pylist())),
        requests=0 if records is None else records.num_rows,
        per_request=True,
    )


@router.post(
    "",
    status_code=201,
    response_model=ImportPublic,
    responses={
        200: {"description": "Every run was imported before by this team.", "model": ImportPublic},
        408: {"description": "The body did not arrive in time."},
        413: {"description": "Larger than TOKENBENCH__API__MAX_DATASET_BYTES."},
        422: {"description": "Not an importable result: the file, line or field, and why."},
    },
    openapi_extra={
        "requestBody": {
            "content": {m: {"schema": {"type": "string", "format": "binary"}} for m in MEDIA_TYPES},
            "required": True,
        }
    },
)
async def import_results(
    request: Request,
    response: Response,
    writer: WriterDep,
    heavy: HeavyDep,
    settings: SettingsDep,
    caller: SubmitterDep,
    tool: Annotated[ToolChoice, Query(description="Which tool wrote the files.")] = (
        ToolChoice.auto
    ),
    provider: Annotated[
        str | None,
        Query(max_length=MAX_ID_CHARS, pattern=PROVIDER_PATTERN, description="Provider name."),
    ] = None,
    name: Annotated[
        str,
        Query(max_length=MAX_ID_CHARS, pattern=COLUMN_NAME_PATTERN, description="File name."),
    ] = "upload",
    visibility: Annotated[
        Visibility | None, Query(description="Who reads the runs (default: the team's setting).")
    ] = None,
) -> ImportPublic:
    """Import another tool's result file (or a tar of a result folder) as runs."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in MEDIA_TYPES:
        raise UnsupportedMediaType(f"send the file as one of: {', '.join(MEDIA_TYPES)}")
    async with _slots(request):
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):
                body = await request.body()
        except TimeoutError:
            raise Timeout(f"body not received within {BODY_TIMEOUT_S:.0f} s") from None
        if tool == ToolChoice.auto and is_bundle(body):
            decoded = DATASET_DECODED_FACTOR * settings.api.max_dataset_bytes
            try:
                bundle = await asyncio.to_thread(check_in_child, body, decoded)
            except BundleError as exc:
                audit(writer, caller, "import", "run", None, "refused", reason=str(exc)[:200])
                raise BodyProblems.of_file(f"{name}: {exc}", None) from None
            one = await heavy.on_cursor(
                "a bundle import", writer, _store_bundle, bundle, caller, visibility
            )
            stored, parsed = [one], Parsed([], [])
        else:
            try:
                entries = _entries(body, name)
                parsed = await asyncio.to_thread(parse_in_child, entries, tool.value)
            except ImportFormatError as exc:
                audit(writer, caller, "import", "run", None, "refused", reason=exc.reason[:200])
                raise BodyProblems.of_file(str(exc), None) from None
            stored = await heavy.on_cursor(
                "an import", writer, _store, parsed, provider, caller, visibility
            )
    for one in stored:
        audit(writer, caller, "import", "run", one.run_id, "ok", tool=one.tool, new=one.added)
    response.status_code = 201 if any(one.added for one in stored) else 200
    return ImportPublic(
        runs=[ImportedRunPublic(**one.to_json()) for one in stored], skipped=parsed.skipped
    )
