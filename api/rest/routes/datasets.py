"""``/v1/datasets``: upload JSONL prompt files, traffic logs, tokenizer.json files
(``workload.tokenizer: {dataset: ID}``) and dataset files for ``workload.dataset``
(ShareGPT JSON, JSONL, CSV, Parquet, Arrow: converted into JSONL entries once, here, in
a process of bounded memory and time; the query names the format and columns); list and
describe them.

A scenario submitted over REST names a dataset by id (``workload.prompts.dataset``,
``workload.replay.dataset``), never a path: the service reads no file a submitter
names. The body is the raw JSONL file, capped in bytes
(``TOKENBENCH__API__MAX_DATASET_BYTES``) and lines (``..._MAX_DATASET_LINES``),
validated before it is stored (a 422 names the line), and stored by content: the same
bytes uploaded again answer the same id with 200 instead of 201.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Annotated, Any

import duckdb
from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field

from analytics.datasets.uploads import DatasetInfo, DatasetStore
from api.access.audit import audit
from api.access.caller import Caller
from api.access.ownership import (
    Forbidden,
    Kind,
    check_read,
    dataset_use,
    owner_of,
    record_dataset_user,
    record_owner,
    release_dataset,
    uses_dataset,
    visible_sql,
)
from api.access.quotas import check_dataset_bytes
from api.access.teams import TeamStore
from api.rest.deps import (
    Authenticated,
    CallerDep,
    CursorDep,
    HeavyDep,
    SettingsDep,
    SubmitterDep,
    WriterDep,
)
from api.rest.errors import BodyProblems, UnsupportedMediaType
from scenarios.datasets.files import WorkloadFileError
from scenarios.datasets.formats import Conversion
from scenarios.datasets.spec import COLUMN_NAME_PATTERN, DatasetFormat
from scenarios.errors import Timeout, TokenbenchError
from scenarios.limits import MAX_ID_CHARS

router = APIRouter(prefix="/v1/datasets", tags=["datasets"], dependencies=[Authenticated])

MEDIA_TYPES = (
    "application/x-ndjson",
    "application/jsonl",
    "application/json",  # a tokenizer.json, a ShareGPT JSON array
    "application/octet-stream",
    "text/csv",
    "application/vnd.apache.parquet",
    "application/vnd.apache.arrow.file",
    "application/vnd.apache.arrow.stream",
)
# Uploads stored at once (each holds its body, up to the byte cap, while it is checked);
# further ones wait before their body is read.
CONCURRENT_UPLOADS = 2
# A body that has not arrived by then gives its slot up (64 MiB at 5 Mbit/s takes ~110 s).
BODY_TIMEOUT_S = 180.0


class DatasetPublic(BaseModel):
    """A stored dataset's metadata."""

    id: str = Field(description="ds- and the hex SHA-256 of the bytes.")
    bytes: int
    entries: int = Field(description="Lines with a prompt (blank and # lines excluded).")
    kinds: list[str] = Field(
        description="Uses it is valid for: prompts (JSONL), replay (every line has "
        "timestamp and max_tokens), tokenizer (a tokenizer.json; entries: its vocabulary)."
    )
    replay_problem: str | None = Field(default=None, description="Why it cannot be replayed.")
    created_at: dt.datetime
    source_sha256: str | None = Field(
        default=None, description="Hex SHA-256 of the uploaded bytes (before conversion)."
    )
    source_format: str | None = Field(
        default=None, description="What was uploaded, e.g. parquet/sharegpt, json/openai, jsonl."
    )
    conversion: dict[str, Any] | None = Field(
        default=None, description="Format and columns it was converted with (null: as uploaded)."
    )
    source_rows: int | None = Field(default=None, description="Rows of the uploaded file.")
    skipped_rows: dict[str, int] = Field(
        default_factory=dict, description="Rows that could not be a prompt, by reason."
    )
    unanswered: int = Field(default=0, description="Entries without an answer length.")
    origin: str | None = Field(default=None, description="The file name given with ?name=.")


def _public(info: DatasetInfo) -> DatasetPublic:
    return DatasetPublic(
        id=info.dataset_id,
        bytes=info.bytes,
        entries=info.entries,
        kinds=list(info.kinds),
        replay_problem=info.replay_problem,
        created_at=info.created_at,
        source_sha256=info.source_sha256,
        source_format=info.source_format,
        conversion=info.fingerprint()["conversion"],
        source_rows=info.source_rows,
        skipped_rows=dict(info.skipped),
        unanswered=info.unanswered,
        origin=info.origin,
    )


def _as_seen_by(
    cursor: duckdb.DuckDBPyConnection, caller: Caller, info: DatasetInfo
) -> DatasetInfo:
    """The dataset as ``caller`` sees it: a team that uploaded the same bytes itself sees
    its own file name and time, never those another team uploaded them with."""
    use = dataset_use(cursor, caller.team, info.dataset_id)
    if use is None:
        return info
    return dataclasses.replace(info, origin=use[0], created_at=use[1])


def _uploads(request: Request) -> asyncio.Semaphore:
    state = request.app.state
    if getattr(state, "dataset_uploads", None) is None:
        state.dataset_uploads = asyncio.Semaphore(CONCURRENT_UPLOADS)
    semaphore: asyncio.Semaphore = state.dataset_uploads
    return semaphore


def _store(
    cursor: duckdb.DuckDBPyConnection,
    content: bytes,
    max_lines: int,
    max_bytes: int,
    conversion: Conversion,
    name: str | None,
) -> tuple[DatasetInfo, bool]:
    return DatasetStore(cursor).add(content, max_lines, name or "", conversion, max_bytes, name)


def _column_query(description: str) -> Any:
    return Query(
        min_length=1, max_length=MAX_ID_CHARS, pattern=COLUMN_NAME_PATTERN,
        description=description,
    )  # fmt: skip


ColumnQuery = Annotated[str | None, _column_query("Column holding it (workload.dataset.columns).")]


@router.post(
    "",
    status_code=201,
    response_model=DatasetPublic,
    responses={
        200: {"description": "The same bytes were uploaded before.", "model": DatasetPublic},
        408: {"description": "The body did not arrive in time."},
        413: {"description": "Larger than TOKENBENCH__API__MAX_DATASET_BYTES."},
        415: {"description": "Not sent as JSONL."},
        422: {"description": "Not a valid dataset: the line or row and what is wrong."},
    },
    openapi_extra={
        "requestBody": {
            "content": {
                media: {"schema": {"type": "string", "format": "binary"}} for media in MEDIA_TYPES
            },
            "required": True,
        }
    },
)
async def upload_dataset(
    request: Request,
    response: Response,
    settings: SettingsDep,
    writer: WriterDep,
    heavy: HeavyDep,
    caller: SubmitterDep,
    format: Annotated[
        DatasetFormat, Query(description="File format; auto: from its first bytes and name.")
    ] = "auto",
    prompt_column: ColumnQuery = None,
    messages_column: ColumnQuery = None,
    answer_column: ColumnQuery = None,
    output_tokens_column: ColumnQuery = None,
    name: Annotated[
        str | None,
        Query(max_length=MAX_ID_CHARS, pattern=COLUMN_NAME_PATTERN, description="File name."),
    ] = None,
) -> DatasetPublic:
    """Store a dataset sent as the raw body (JSONL prompts or traffic log, tokenizer.json,
    or a file for workload.dataset, converted with the format and columns given);
    answers its id."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in MEDIA_TYPES:
        raise UnsupportedMediaType(f"send the JSONL file as one of: {', '.join(MEDIA_TYPES)}")
    async with _uploads(request):
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):
                body = await request.body()
        except TimeoutError:
            raise Timeout(f"body not received within {BODY_TIMEOUT_S:.0f} s") from None
        # The team's dataset quota (docs/teams.md, Quotas and fairness): 429 past it.
        check_dataset_bytes(
            writer, TeamStore(writer, settings.teams).policy(caller.team), len(body)
        )
        try:
            # Hashing and parsing up to 64 MiB: in a heavy-work thread (api/rest/offload.py),
            # on a cursor of its own.
            columns = {
                "prompt": prompt_column,
                "messages": messages_column,
                "answer": answer_column,
                "output_tokens": output_tokens_column,
            }
            conversion = Conversion.of(format, {k: v for k, v in columns.items() if v})
            info, created = await heavy.on_cursor(
                "a dataset upload",
                writer,
                _store,
                body,
                settings.api.max_dataset_lines,
                settings.api.max_dataset_bytes,
                conversion,
                name,
            )
        except WorkloadFileError as exc:
            audit(writer, caller, "dataset.upload", "dataset", None, "refused", line=exc.line)
            raise BodyProblems.of_file(str(exc), exc.line) from None
    # Stored by content: the first team to upload the bytes owns the object; each team
    # that uploads them has its own use of it (201 the first time for that team, so the
    # answer never tells whether another team holds the same bytes).
    record_owner(writer, Kind.DATASET, info.dataset_id, caller)
    first_for_team = record_dataset_user(writer, info.dataset_id, caller, name)
    audit(
        writer, caller, "dataset.upload", "dataset", info.dataset_id, "ok",
        bytes=info.bytes, new=created,
    )  # fmt: skip
    response.status_code = 201 if first_for_team else 200
    return _public(_as_seen_by(writer, caller, info))


@router.get("", response_model=list[DatasetPublic])
def list_datasets(cursor: CursorDep, caller: CallerDep) -> list[DatasetPublic]:
    """Stored datasets the caller may read, newest first."""
    where = visible_sql(Kind.DATASET, caller, "datasets.dataset_id")
    infos = DatasetStore(cursor).list_all(where)
    return [_public(_as_seen_by(cursor, caller, info)) for info in infos]


@router.get("/{dataset_id}", response_model=DatasetPublic)
def get_dataset(dataset_id: str, cursor: CursorDep, caller: CallerDep) -> DatasetPublic:
    """One stored dataset's metadata (404 if there is none, or the caller may not read it)."""
    check_read(cursor, caller, Kind.DATASET, dataset_id)
    return _public(_as_seen_by(cursor, caller, DatasetStore(cursor).get(dataset_id)))


@router.delete("/{dataset_id}", status_code=204)
async def delete_dataset(dataset_id: str, writer: WriterDep, caller: SubmitterDep) -> Response:
    """Remove the caller's team's dataset: 404 for one it may not read, 403 for another
    team's. A team that uploaded the same bytes as others removes its own use only; the
    stored dataset goes with the last team's (an admin's delete removes it for all)."""
    try:
        check_read(writer, caller, Kind.DATASET, dataset_id)
        store = DatasetStore(writer)
        store.get(dataset_id)
        mine = owner_of(writer, Kind.DATASET, dataset_id).team == caller.team
        if not (caller.is_admin or mine or uses_dataset(writer, caller.team, dataset_id)):
            raise Forbidden(f"dataset {dataset_id} belongs to another team")
    except TokenbenchError as exc:
        audit(writer, caller, "dataset.delete", "dataset", dataset_id, "refused",
              error=type(exc).__name__)  # fmt: skip
        raise
    last = release_dataset(writer, dataset_id, None if caller.is_admin else caller.team)
    if last:
        store.delete(dataset_id)
    audit(writer, caller, "dataset.delete", "dataset", dataset_id, "ok", removed=last)
    return Response(status_code=204)
