"""``/v1/datasets``: upload JSONL prompt files, traffic logs and tokenizer.json files
(``workload.tokenizer: {dataset: ID}``); list and describe them.

A scenario submitted over REST names a dataset by id (``workload.prompts.dataset``,
``workload.replay.dataset``), never a path: the service reads no file a submitter
names. The body is the raw JSONL file, capped in bytes
(``TOKENBENCH__API__MAX_DATASET_BYTES``) and lines (``..._MAX_DATASET_LINES``),
validated before it is stored (a 422 names the line), and stored by content: the same
bytes uploaded again answer the same id with 200 instead of 201.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import duckdb
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from analytics.datasets import DatasetInfo, DatasetStore
from api.rest.deps import Authenticated, CursorDep, SettingsDep, WriterDep
from api.rest.errors import BodyProblems, UnsupportedMediaType
from scenarios.errors import Timeout
from scenarios.workload_files import WorkloadFileError

router = APIRouter(prefix="/v1/datasets", tags=["datasets"], dependencies=[Authenticated])

MEDIA_TYPES = (
    "application/x-ndjson",
    "application/jsonl",
    "application/json",  # a tokenizer.json
    "application/octet-stream",
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


def _public(info: DatasetInfo) -> DatasetPublic:
    return DatasetPublic(
        id=info.dataset_id,
        bytes=info.bytes,
        entries=info.entries,
        kinds=list(info.kinds),
        replay_problem=info.replay_problem,
        created_at=info.created_at,
    )


def _uploads(request: Request) -> asyncio.Semaphore:
    state = request.app.state
    if getattr(state, "dataset_uploads", None) is None:
        state.dataset_uploads = asyncio.Semaphore(CONCURRENT_UPLOADS)
    semaphore: asyncio.Semaphore = state.dataset_uploads
    return semaphore


def _store(
    cursor: duckdb.DuckDBPyConnection, content: bytes, max_lines: int
) -> tuple[DatasetInfo, bool]:
    try:
        return DatasetStore(cursor).add(content, max_lines)
    finally:
        cursor.close()


@router.post(
    "",
    status_code=201,
    response_model=DatasetPublic,
    responses={
        200: {"description": "The same bytes were uploaded before.", "model": DatasetPublic},
        408: {"description": "The body did not arrive in time."},
        413: {"description": "Larger than TOKENBENCH__API__MAX_DATASET_BYTES."},
        415: {"description": "Not sent as JSONL."},
        422: {"description": "Not valid JSONL prompts: the line and what is wrong."},
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
    request: Request, response: Response, settings: SettingsDep, writer: WriterDep
) -> DatasetPublic:
    """Store a JSONL prompt file or traffic log sent as the raw body; answers its id."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in MEDIA_TYPES:
        raise UnsupportedMediaType(f"send the JSONL file as one of: {', '.join(MEDIA_TYPES)}")
    async with _uploads(request):
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):
                body = await request.body()
        except TimeoutError:
            raise Timeout(f"body not received within {BODY_TIMEOUT_S:.0f} s") from None
        try:
            # Hashing and parsing up to 64 MiB: in a thread, on a cursor of its own.
            info, created = await asyncio.to_thread(
                _store, writer.cursor(), body, settings.api.max_dataset_lines
            )
        except WorkloadFileError as exc:
            raise BodyProblems.of_file(str(exc), exc.line) from None
    response.status_code = 201 if created else 200
    return _public(info)


@router.get("", response_model=list[DatasetPublic])
def list_datasets(cursor: CursorDep) -> list[DatasetPublic]:
    """Stored datasets, newest first."""
    return [_public(info) for info in DatasetStore(cursor).list_all()]


@router.get("/{dataset_id}", response_model=DatasetPublic)
def get_dataset(dataset_id: str, cursor: CursorDep) -> DatasetPublic:
    """One stored dataset's metadata (404 through api/rest/errors.py if there is none)."""
    return _public(DatasetStore(cursor).get(dataset_id))
