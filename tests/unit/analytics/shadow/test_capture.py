"""Shadow sessions in DuckDB: opening and closing one, captures, pairing, comparison."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from analytics.shadow.capture import (
    comparison,
    ensure_shadow_schema,
    ingest_captures,
    is_session,
    pairs,
    replay_entries,
    session_summary,
)
from analytics.store.db import connect
from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import RunStore
from api.control.session_coordinator import SessionCoordinator
from scenarios.gateway_config import parse_gateway_config
from scenarios.wire.records import batch_to_ipc, records_to_batch
from tests.support.builders import timed_result
from workers.client.errors import ErrorClass, RequestFailure
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import RowContext, record_row

MS = 1_000_000
CONFIG = parse_gateway_config(
    {
        "primary": {
            "name": "prod",
            "kind": "openai",
            "base_url": "http://h/v1",
            "model": "m",
            "pricing": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
        },
        "shadows": [
            {
                "name": "cand",
                "kind": "simulated",
                "pricing": {"input_per_mtok": 0.5, "output_per_mtok": 0.5},
            }
        ],
        "regions": ["eu", "us"],
    }
)


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    con = connect(tmp_path / "s.duckdb")
    ensure_shadow_schema(con)
    return con


def _rows(
    shard: str, provider: str, region: str, kind: str, ttfts: list[float | None]
) -> list[dict[str, object]]:
    rows = []
    for n, ttft in enumerate(ttfts):
        res = timed_result(n * 1000 * MS, ttft or 10.0, [1.0, 1.0], tokens=3)
        if ttft is None:
            res.failure = RequestFailure(ErrorClass.HTTP_5XX, "boom", 500)
        row = record_row(
            RowContext(
                "sess", 0, shard, 1, provider, "m", region, "w", kind, 0, request_key=f"k{n}"
            ),
            PlannedRequest(n, 10, 3, ""),
            res,
        )
        rows.append(row)
    return rows


def _ingest(
    con: duckdb.DuckDBPyConnection, shard: str, seq: int, rows: list[dict[str, object]]
) -> None:
    ingest_batches(con, [BatchMessage("sess", shard, 1, seq, batch_to_ipc(records_to_batch(rows)))])


def test_session_lifecycle_pairs_and_comparison(con: duckdb.DuckDBPyConnection) -> None:
    store = RunStore(con)
    coordinator = SessionCoordinator.open("sess", CONFIG, store)
    assert is_session(con, "sess")
    assert not coordinator.complete
    assert coordinator.to_dispatch() == []
    shards = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT shard_id, state, accepted_attempt FROM shards WHERE run_id = 'sess'"
        ).fetchall()
    }
    assert shards == {
        "primary": ("running", 1),
        "shadow.cand.eu": ("running", 1),
        "shadow.cand.us": ("running", 1),
    }

    _ingest(con, "primary", 1, _rows("primary", "prod", "gateway", "live", [50, 50, 50, 50]))
    # eu: faster on 3 of 4, one shadow error; us: only two requests were sampled.
    _ingest(
        con,
        "shadow.cand.eu",
        1,
        _rows("shadow.cand.eu", "cand", "eu", "shadow", [20, 30, 80, None]),
    )
    _ingest(con, "shadow.cand.us", 1, _rows("shadow.cand.us", "cand", "us", "shadow", [60, 70]))
    # A redelivered shadow task published its record twice: it counts once.
    _ingest(con, "shadow.cand.us", 2, _rows("shadow.cand.us", "cand", "us", "shadow", [60]))

    paired = pairs(con, "sess")
    assert len(paired) == 6
    rows = {r["shadow_region"]: r for r in comparison(con, "sess")}
    eu, us = rows["eu"], rows["us"]
    assert eu["pairs"] == 4 and eu["both_ok"] == 3
    assert eu["shadow_error_rate"] == pytest.approx(0.25)
    assert eu["primary_error_rate"] == 0
    assert eu["ttft_delta_p50_ms"] == pytest.approx(-20.0)
    assert eu["ttft_shadow_faster_share"] == pytest.approx(2 / 3)
    assert eu["few_pairs"] is True
    assert us["pairs"] == 2
    assert us["ttft_delta_p50_ms"] == pytest.approx(15.0)
    assert us["completion_tokens_delta_p50"] == 0
    # 10 prompt + 3 completion tokens a request, at each provider's list price.
    assert eu["primary_usd_per_mtok"] == pytest.approx((10 * 1.0 + 3 * 2.0) / 13)
    assert eu["shadow_usd_per_mtok"] == pytest.approx(0.5)
    # The views exist for ad-hoc SQL too.
    assert con.execute("SELECT count(*) FROM shadow_pairs").fetchone() == (6,)

    coordinator.cancel_unsettled("stopped")
    assert coordinator.complete
    assert con.execute("SELECT state FROM runs WHERE run_id = 'sess'").fetchone() == ("finished",)
    assert con.execute(
        "SELECT records FROM shards WHERE run_id = 'sess' AND shard_id = 'primary'"
    ).fetchone() == (4,)
    resumed = SessionCoordinator.resume_session("sess", store)
    assert resumed.records_ingested == 11


def test_captures_are_stored_once_and_replayed_in_order(con: duckdb.DuckDBPyConnection) -> None:
    SessionCoordinator.open("sess", CONFIG, RunStore(con))

    def capture(key: str, at_s: float, text: str | None) -> dict[str, object]:
        return {
            "run_id": "sess",
            "request_key": key,
            "seq": 0,
            "gateway": "gw",
            "received_at": int(at_s * 1e9),
            "stream": True,
            "sampled": key == "b",
            "enqueued": key == "b",
            "prompt_chars": 5,
            "prompt_sha256": "0" * 64,
            "max_tokens": 7 if text else None,
            "messages": None if text is None else f'[{{"role":"user","content":"{text}"}}]',
        }

    batch = [capture("b", 1_700_000_002.5, "second"), capture("a", 1_700_000_001.0, "first")]
    ingest_captures(con, batch)
    ingest_captures(con, [*batch, capture("c", 1_700_000_003.0, None)])  # redelivered
    summary = session_summary(con, "sess")
    assert summary is not None
    assert summary["requests_captured"] == 3
    assert summary["requests_sampled"] == 1
    entries = replay_entries(con, "sess")
    assert [e.messages[0]["content"] for e in entries] == ["first", "second"]
    assert entries[1].timestamp_s - entries[0].timestamp_s == pytest.approx(1.5)
    assert entries[0].max_tokens == 7
