"""Scrape rows of server telemetry (scenarios/wire/server_metrics.py), as a worker publishes them."""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.telemetry.ingest import ingest_scrapes
from scenarios.wire.server_metrics import scrapes_to_ipc
from tests.support.builders import REPORT_SCENARIO, evenly_paced, store_run

S = 1_000_000_000


def scrape_row(
    seq: int,
    at_ns: int,
    samples: dict[str, float] | list[tuple[str, dict[str, str], float]],
    *,
    run_id: str = "r",
    stage: int = 0,
    provider: str = "p",
    shard_id: str | None = None,
    attempt: int = 1,
    error: str | None = None,
) -> dict[str, Any]:
    """One scrape at wall-clock ``at_ns`` with ``samples`` (name → value, or (name,
    labels, value) triples); ``error`` makes it a failed scrape without samples."""
    triples = (
        [(name, {}, value) for name, value in samples.items()]
        if isinstance(samples, dict)
        else samples
    )
    return {
        "run_id": run_id,
        "stage": stage,
        "provider": provider,
        "region": "local",
        "shard_id": shard_id or f"s{stage}.{provider}.local",
        "attempt": attempt,
        "worker": "w",
        "scrape_seq": seq,
        "scraped_at": at_ns,
        "duration_ns": 2_000_000,
        "status": "ok" if error is None else "error",
        "http_status": 200 if error is None else None,
        "error_message": error,
        "body_bytes": None if error else 100,
        "series_dropped": None if error else 0,
        "samples": []
        if error
        else [
            {"metric": name, "labels": sorted(labels.items()), "value": value}
            for name, labels, value in triples
        ],
    }


def payload(*rows: dict[str, Any]) -> bytes:
    """The Arrow IPC payload of ``rows`` (one metrics-stream entry)."""
    return scrapes_to_ipc(list(rows))


def store_scraped_run(con: duckdb.DuckDBPyConnection, run_id: str) -> None:
    """A run of 10 requests of provider ``api``, one a second, and 11 scrapes of its
    server: one idle before the first send, nine while the requests run (1 running, 0-2
    waiting, KV 10-90 %, 100 output tokens a second) and a failed one (HTTP 503) after."""
    scenario = {**REPORT_SCENARIO, "providers": REPORT_SCENARIO["providers"][:1]}
    store_run(con, run_id, scenario, {("api", 0): evenly_paced(10)})
    first, last = con.execute(
        "SELECT epoch_ns(min(sent_at)), epoch_ns(max(end_at)) FROM requests WHERE run_id = ?",
        [run_id],
    ).fetchone() or (0, 0)
    idle = {"vllm:num_requests_running": 0.0}
    rows = [scrape_row(0, first - 5 * S, idle, run_id=run_id, provider="api")]
    rows += [
        scrape_row(
            seq,
            first + (seq - 1) * S,
            {
                "vllm:num_requests_running": 1,
                "vllm:num_requests_waiting": seq % 3,
                "vllm:kv_cache_usage_perc": 0.1 * seq,
                "vllm:generation_tokens_total": 100 * seq,
            },
            run_id=run_id,
            provider="api",
        )
        for seq in range(1, 10)
    ]
    rows.append(scrape_row(10, last + S, {}, run_id=run_id, provider="api", error="HTTP 503"))
    ingest_scrapes(con, [payload(*rows)])
