"""Was the client the bottleneck? Per stage × provider × region, from the shards' own
self-measurement (stored with each accepted attempt) and the thresholds of
``scenarios.calibration`` (docs/load.md), so nobody mistakes a client limit for a
server limit."""

from __future__ import annotations

import json
from typing import Any

import duckdb

from scenarios.calibration import ClientHealth, client_bound_reasons

StageKey = tuple[str, int, str]  # provider, stage, region


def stage_health(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[StageKey, dict[str, Any]]:
    """The client's figures per stage: worst shard for lags and CPU, summed rates, and the
    ``client_bound`` flag with the thresholds crossed (any shard crossing one flags it)."""
    rows = con.execute(
        """
        SELECT s.provider, s.stage, s.region, a.health
        FROM shards AS s
        JOIN shard_attempts AS a
          ON a.run_id = s.run_id AND a.shard_id = s.shard_id AND a.attempt = s.accepted_attempt
        WHERE s.run_id = ? AND a.health IS NOT NULL
        """,
        [run_id],
    ).fetchall()
    stages: dict[StageKey, dict[str, Any]] = {}
    for provider, stage, region, raw in rows:
        fields = json.loads(raw)
        health = ClientHealth.from_fields(fields)
        entry = stages.setdefault(
            (provider, stage, region),
            {
                "client_bound": False,
                "client_bound_reasons": [],
                "loop_lag_p99_ms": 0.0,
                "loop_cpu_util": 0.0,
                "schedule_lag_p99_ms": 0.0,
                "scheduled_rps": None,
                "achieved_rps": None,
            },
        )
        reasons = client_bound_reasons(health)
        entry["client_bound"] = entry["client_bound"] or bool(reasons)
        entry["client_bound_reasons"] = sorted({*entry["client_bound_reasons"], *reasons})
        entry["loop_lag_p99_ms"] = max(entry["loop_lag_p99_ms"], health.loop_lag_p99_ms)
        entry["loop_cpu_util"] = max(entry["loop_cpu_util"], health.loop_cpu_util)
        entry["schedule_lag_p99_ms"] = max(entry["schedule_lag_p99_ms"], health.schedule_lag_p99_ms)
        for rate in ("scheduled_rps", "achieved_rps"):
            value = getattr(health, rate)
            if value is not None:
                entry[rate] = (entry[rate] or 0.0) + value
    return stages


def with_client_health(
    stages: list[dict[str, Any]], health: dict[StageKey, dict[str, Any]]
) -> list[dict[str, Any]]:
    """Stage rows with ``client_bound`` and ``client_health`` (None when not measured)."""
    merged = []
    for row in stages:
        entry = health.get((row["provider"], row["stage"], row["region"]))
        merged.append(
            {
                **row,
                "client_bound": bool(entry and entry["client_bound"]),
                "client_health": entry,
            }
        )
    return merged
