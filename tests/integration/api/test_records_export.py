"""``GET /v1/runs/{id}/records`` on a run of 200k records, through the served app: the
whole run in record order, streamed (chunked, no length) in Arrow batches and Parquet row
groups of bounded size, rather than built whole in the control plane."""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from celery import Celery
from pydantic import SecretStr

from analytics.query.record_export import BATCH_ROWS, ROW_GROUP_ROWS
from analytics.store.db import connect
from api.local.redis_server import RedisServer
from api.rest.app import create_app
from api.rest.routes.runs import ARROW_STREAM, PARQUET
from scenarios.settings import ApiSettings, DuckDBSettings, RedisSettings, Settings
from tests.conftest import API_TOKEN
from tests.integration.api.conftest import run_scenario
from tests.support.served_app import served, store_large_run

pytestmark = pytest.mark.integration

RUN = "20261202-000000-export"
PER_SHARD = 100_000
KEY_COLUMNS = ["stage", "shard_id", "seq", "ttft_ns"]


@dataclass
class Exported:
    client: httpx.Client
    expected: pa.Table


@pytest.fixture(scope="module")
def exported(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Exported]:
    db: Path = tmp_path_factory.mktemp("export") / "api.duckdb"
    con = connect(db)
    expected = store_large_run(con, RUN, run_scenario("local"), PER_SHARD)
    con.close()
    settings = Settings(
        redis=RedisSettings(url=redis_server.url),
        duckdb=DuckDBSettings(path=db),
        api=ApiSettings(tokens=[SecretStr(API_TOKEN)]),
    )
    app = create_app(settings, Celery("export-tests", set_as_current=False))
    with (
        served(app) as base,
        httpx.Client(
            base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=120
        ) as client,
    ):
        yield Exported(client, expected.select(KEY_COLUMNS))


def assert_same_rows(got: pa.Table, expected: pa.Table) -> None:
    """The key columns hold the same values in the same order (nullability aside: the
    view's columns are nullable, the record schema's keys are not)."""
    for column in KEY_COLUMNS:
        assert got[column].combine_chunks().equals(expected[column].combine_chunks()), column


def download(client: httpx.Client, accept: str) -> tuple[httpx.Headers, int, bytes]:
    """Headers, number of body pieces received and the body of the records answer."""
    with client.stream("GET", f"/v1/runs/{RUN}/records", headers={"accept": accept}) as answer:
        assert answer.status_code == 200
        pieces = list(answer.iter_raw())
        return answer.headers, len(pieces), b"".join(pieces)


def test_arrow_arrives_in_batches_of_the_whole_run_in_record_order(exported: Exported) -> None:
    headers, pieces, body = download(exported.client, ARROW_STREAM)
    assert headers["content-type"] == ARROW_STREAM
    # Streamed as encoded: chunked, no length known before the last batch.
    assert headers.get("transfer-encoding") == "chunked" and "content-length" not in headers
    assert pieces > 1
    batches = list(pa.ipc.open_stream(body))
    rows = sum(b.num_rows for b in batches)
    assert rows == 2 * PER_SHARD
    assert len(batches) >= math.ceil(rows / BATCH_ROWS)
    assert max(b.num_rows for b in batches) <= BATCH_ROWS
    table = pa.Table.from_batches(batches)
    assert_same_rows(table, exported.expected)
    assert "ttft_ms" in table.column_names  # the requests view's derived columns too


def test_parquet_arrives_in_row_groups_of_the_whole_run_in_record_order(
    exported: Exported,
) -> None:
    headers, pieces, body = download(exported.client, PARQUET)
    assert headers["content-type"] == PARQUET
    assert headers.get("transfer-encoding") == "chunked" and "content-length" not in headers
    assert pieces > 1
    parquet = pq.ParquetFile(io.BytesIO(body))
    groups = [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)]
    assert sum(groups) == 2 * PER_SHARD
    assert groups[:-1] == [ROW_GROUP_ROWS] * (len(groups) - 1) and groups[-1] <= ROW_GROUP_ROWS
    assert_same_rows(parquet.read(columns=KEY_COLUMNS), exported.expected)


def test_an_unknown_run_is_a_404_before_anything_is_streamed(exported: Exported) -> None:
    answer = exported.client.get("/v1/runs/no-such-run/records")
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("application/json")
