"""``POST /v1/sql`` through a real control plane: formats, row cap, and every refusal.

The database is filled before the control plane starts (a finished run, so nothing is
resumed); the control plane then holds it as the writer, and queries run in child
processes on its read-only copy.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.store.db import connect
from analytics.store.runs import RunStore
from tests.conftest import API_TOKEN, start_control_plane
from tests.support.builders import REPORT_SCENARIO, evenly_paced, store_run

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sql_api(
    worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    tmp = tmp_path_factory.mktemp("sql-api")
    db = tmp / "api.duckdb"
    con = connect(db)
    store_run(
        con, "run", REPORT_SCENARIO, {("api", 0): evenly_paced(12), ("gpu", 0): evenly_paced(5)}
    )
    RunStore(con).finish_run("run", "finished")
    con.close()
    proc, base = start_control_plane(worker_env, db, tmp / "api.log")
    with httpx.Client(
        base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=60
    ) as client:
        yield client
    proc.stop()


def test_json_answer_with_columns_and_snapshot_age(sql_api: httpx.Client) -> None:
    answer = sql_api.post(
        "/v1/sql",
        json={"query": "SELECT provider, count(*) AS n FROM requests GROUP BY 1 ORDER BY 1"},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["rows"] == [{"provider": "api", "n": 12}, {"provider": "gpu", "n": 5}]
    assert [c["name"] for c in body["columns"]] == ["provider", "n"]
    assert body["truncated"] is False and body["snapshot_age_s"] >= 0
    assert float(answer.headers["x-tokenbench-snapshot-age-s"]) >= 0


def test_csv_arrow_and_parquet(sql_api: httpx.Client) -> None:
    query = "SELECT stage, provider, ttft_p50_ms FROM stage_summary ORDER BY provider"
    csv = sql_api.post("/v1/sql", json={"query": query, "format": "csv"})
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert csv.text.splitlines()[0] == '"stage","provider","ttft_p50_ms"'
    arrow = sql_api.post(
        "/v1/sql",
        json={"query": query},
        headers={"accept": "application/vnd.apache.arrow.stream"},
    )
    assert arrow.status_code == 200
    table = pa.ipc.open_stream(pa.py_buffer(arrow.content)).read_all()
    assert table.column("provider").to_pylist() == ["api", "gpu"]
    parquet = sql_api.post("/v1/sql", json={"query": query, "format": "parquet"})
    assert pq.read_table(io.BytesIO(parquet.content)).num_rows == 2


def test_row_cap_cuts_and_says_so(sql_api: httpx.Client) -> None:
    answer = sql_api.post("/v1/sql", json={"query": "SELECT * FROM range(50)", "max_rows": 10})
    assert answer.status_code == 200
    assert len(answer.json()["rows"]) == 10 and answer.json()["truncated"] is True
    assert answer.headers["x-tokenbench-truncated"] == "true"


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "refused"),
        ("COPY (SELECT 1) TO '/tmp/tokenbench-escape.csv'", "COPY"),
        ("ATTACH '/tmp/tokenbench-escape.duckdb' AS x", "ATTACH"),
        ("INSTALL httpfs", "only SELECT"),
        ("LOAD httpfs", "only SELECT"),
        ("SET enable_external_access = true", "only SELECT"),
        ("PRAGMA database_list", "only SELECT"),
        ("SELECT 1; SELECT 2", "exactly one statement"),
        ("SELECT * FROM glob('/etc/*')", "refused"),
    ],
)
def test_escapes_are_refused_with_a_clear_message(
    sql_api: httpx.Client, query: str, words: str
) -> None:
    answer = sql_api.post("/v1/sql", json={"query": query})
    assert answer.status_code == 403, answer.text
    assert answer.json()["kind"] == "refused"
    assert words in answer.json()["detail"]
    assert not Path("/tmp/tokenbench-escape.csv").exists()


def test_a_query_that_would_run_forever_is_stopped(sql_api: httpx.Client) -> None:
    answer = sql_api.post(
        "/v1/sql",
        json={"query": "SELECT count(*) FROM range(100000000000) a", "timeout_s": 0.5},
    )
    assert answer.status_code == 408, answer.text
    assert "timeout" in answer.json()["detail"]


def test_invalid_sql_and_missing_token(sql_api: httpx.Client) -> None:
    answer = sql_api.post("/v1/sql", json={"query": "SELEC 1"})
    assert answer.status_code == 400 and answer.json()["kind"] == "invalid"
    unknown = sql_api.post("/v1/sql", json={"query": "SELECT * FROM no_such_table"})
    assert unknown.status_code == 400 and "no_such_table" in unknown.json()["detail"]
    anonymous = httpx.post(f"{sql_api.base_url}/v1/sql", json={"query": "SELECT 1"})
    assert anonymous.status_code == 401
