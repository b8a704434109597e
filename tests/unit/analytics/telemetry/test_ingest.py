"""Storing scrapes (analytics/telemetry/ingest.py) and the canonical view over them
(sql/views/9*_server_metric*.sql): each scrape once, failed ones kept, engine names to
canonical ones with their units, series combined per scrape, counters as rates."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from analytics.store.db import connect
from analytics.telemetry.ingest import ingest_scrapes
from tests.support.scrapes import S, payload, scrape_row

T0 = 1_700_000_000 * S


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    return connect(tmp_path / "telemetry.duckdb")


def _canonical(con: duckdb.DuckDBPyConnection) -> dict[tuple[int, str], float]:
    rows = con.execute(
        "SELECT scrape_seq, metric, value FROM server_metrics_canonical ORDER BY 1, 2"
    ).fetchall()
    return {(seq, metric): value for seq, metric, value in rows}


def test_each_scrape_is_stored_once_with_its_samples(con: duckdb.DuckDBPyConnection) -> None:
    first = scrape_row(0, T0, {"vllm:num_requests_running": 3, "vllm:num_requests_waiting": 1})
    failed = scrape_row(1, T0 + S, {}, error="HTTP 503")
    assert ingest_scrapes(con, [payload(first, failed), payload(first)]) == 2
    assert ingest_scrapes(con, [payload(first, failed)]) == 0  # a re-delivered entry
    assert ingest_scrapes(con, []) == 0
    scrapes = con.execute(
        "SELECT scrape_seq, status, series, error_message FROM server_metric_scrapes ORDER BY 1"
    ).fetchall()
    assert scrapes == [(0, "ok", 2, None), (1, "error", 0, "HTTP 503")]
    assert con.execute("SELECT count(*) FROM server_metrics").fetchone() == (2,)
    # Another attempt of the same shard is another scrape.
    assert ingest_scrapes(con, [payload(scrape_row(0, T0, {"tgi_queue_size": 2}, attempt=2))]) == 1


def test_engine_names_become_canonical_figures(con: duckdb.DuckDBPyConnection) -> None:
    gpus = [
        ("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0"}, 50.0),
        ("DCGM_FI_DEV_GPU_UTIL", {"gpu": "1"}, 100.0),
        ("DCGM_FI_DEV_FB_USED", {"gpu": "0"}, 1024.0),
        ("DCGM_FI_DEV_FB_USED", {"gpu": "1"}, 2048.0),
        ("sglang:num_running_reqs", {"dp": "0"}, 4.0),
        ("sglang:num_running_reqs", {"dp": "1"}, 5.0),
        ("sglang:token_usage", {"dp": "0"}, 0.2),
        ("sglang:token_usage", {"dp": "1"}, 0.4),
        ("vllm:time_to_first_token_seconds_sum", {}, 9.0),  # not a known name
    ]
    ingest_scrapes(con, [payload(scrape_row(0, T0, gpus))])
    assert _canonical(con) == {
        (0, "gpu_utilization"): pytest.approx(0.75),  # mean of the GPUs, as a share
        (0, "gpu_memory_used_bytes"): 3072 * 1024 * 1024,  # summed, MiB to bytes
        (0, "running_requests"): 9.0,  # summed over engines
        (0, "kv_cache_usage"): pytest.approx(0.3),  # a share: averaged
    }


def test_counters_become_rates_between_scrapes(con: duckdb.DuckDBPyConnection) -> None:
    counters = [
        (0, 0, 100.0),
        (1, 2 * S, 300.0),  # +200 in 2 s
        (2, 3 * S, 50.0),  # reset (a restarted server): no rate
        (3, 4 * S, 150.0),  # +100 in 1 s
    ]
    rows = [
        scrape_row(seq, T0 + at, {"vllm:generation_tokens_total": value, "tgi_queue_size": 1})
        for seq, at, value in counters
    ]
    ingest_scrapes(con, [payload(*rows)])
    figures = _canonical(con)
    rates = {seq: v for (seq, metric), v in figures.items() if metric == "generation_tokens_per_s"}
    assert rates == {1: pytest.approx(100.0), 3: pytest.approx(100.0)}
    assert figures[(2, "generation_tokens_total")] == 50.0
    assert figures[(0, "waiting_requests")] == 1.0


def test_a_bad_payload_stores_nothing(con: duckdb.DuckDBPyConnection) -> None:
    good = payload(scrape_row(0, T0, {"vllm:num_requests_running": 1}))
    with pytest.raises(pa.ArrowInvalid):
        ingest_scrapes(con, [good, b"not arrow"])
    assert con.execute("SELECT count(*) FROM server_metric_scrapes").fetchone() == (0,)
