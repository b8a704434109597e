"""Did the client distort the figures? Per stage × provider × region, from the shards'
own self-measurement (stored with each accepted attempt) and the rule of
``scenarios.calibration`` (docs/load.md), so nobody mistakes a client limit for a
server limit, and the note says how large the error is."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import duckdb

from scenarios.calibration import ClientHealth, client_bound_note, client_bound_reasons

StageKey = tuple[str, int, str]  # provider, stage, region


def stage_health(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[StageKey, dict[str, Any]]:
    """The client's figures per stage (its shards' combined: counts and rates summed,
    lags the worst shard's), the ``client_bound`` verdict on them, the reasons and the
    note stating the expected error."""
    rows = con.execute(
        """
        SELECT s.provider, s.stage, s.region, a.health
        FROM shards AS s
        JOIN shard_attempts AS a
          ON a.run_id = s.run_id AND a.shard_id = s.shard_id AND a.attempt = s.accepted_attempt
        WHERE s.run_id = ? AND a.health IS NOT NULL
        ORDER BY s.shard_id
        """,
        [run_id],
    ).fetchall()
    shards: dict[StageKey, list[ClientHealth]] = {}
    for provider, stage, region, raw in rows:
        health = ClientHealth.from_fields(json.loads(raw))
        shards.setdefault((provider, stage, region), []).append(health)
    stages: dict[StageKey, dict[str, Any]] = {}
    for key, parts in shards.items():
        health = ClientHealth.combine(parts)
        reasons = client_bound_reasons(health)
        stages[key] = {
            **asdict(health),
            "merged_share": health.merged_share,
            "not_sent_share": health.not_sent_share,
            "client_bound": bool(reasons),
            "client_bound_reasons": reasons,
            "client_bound_note": client_bound_note(health),
        }
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
