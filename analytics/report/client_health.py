"""Did the client distort the figures? Per stage × provider × region, from the shards'
own self-measurement (stored with each accepted attempt) and the rule of
``scenarios.load.client_bound`` (docs/load.md), so nobody mistakes a client limit for a
server limit, and the note says how large the error is."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import duckdb

from scenarios.load.client_bound import ClientHealth, client_bound_note, client_bound_reasons

StageKey = tuple[str, int, str]  # provider, stage, region

# Figures of what the worker did around the measurement (docs/load.md): connections
# opened before the stage clock started, and the garbage collector's pauses in it.
# Summed over a stage's shards, except the ``_max_`` ones and prewarm_ms (the slowest).
_AROUND_SUMMED = ("prewarmed_connections", "gc_collections", "gc_pause_total_ms")
_AROUND_MAX = ("prewarm_ms", "gc_pause_max_ms")


def _around(parts: list[dict[str, Any]]) -> dict[str, float]:
    """The pre-warm and GC figures of a stage's shards, where they were measured."""
    found: dict[str, float] = {}
    for name in _AROUND_SUMMED + _AROUND_MAX:
        values = [float(p[name]) for p in parts if p.get(name) not in (None, "")]
        if values:
            found[name] = max(values) if name in _AROUND_MAX else sum(values)
    if "prewarmed_connections" in found:
        found["prewarmed_connections"] = int(found["prewarmed_connections"])
    if "gc_collections" in found:
        found["gc_collections"] = int(found["gc_collections"])
    return found


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
    raws: dict[StageKey, list[dict[str, Any]]] = {}
    for provider, stage, region, raw in rows:
        fields = json.loads(raw)
        health = ClientHealth.from_fields(fields)
        shards.setdefault((provider, stage, region), []).append(health)
        raws.setdefault((provider, stage, region), []).append(fields)
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
            **_around(raws[key]),
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
