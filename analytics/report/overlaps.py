"""Runs that overlapped a run's shared endpoints (docs/teams.md, endpoint leases).

A provider with ``shared: true`` takes no lease: other runs measuring the same target
(URL, model, key variable: ``scenarios/targets.py``) may run at the same time, and their
load is in this run's figures. The report says which: every other run measuring a
target this run measured shared, whose time span (created or started → finished, or
now while it goes) crossed this run's.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb

from analytics.sql.results import first_row
from scenarios.model import Scenario
from scenarios.targets import provider_target, shared_targets

# Runs looked at as candidates, newest first: a bound on the work of one report.
MAX_CANDIDATES = 500


def _span_end(finished: dt.datetime | None) -> dt.datetime:
    return finished if finished is not None else dt.datetime.now(dt.UTC)


def shared_overlaps(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """One row per (provider measured shared, other run) that overlapped in time: the
    provider, its target, the other run, its provider there and the overlap in seconds."""
    row = first_row(
        con.execute(
            "SELECT scenario, created_at, finished_at, state FROM runs WHERE run_id = ?", [run_id]
        )
    )
    if row is None or row[3] == "queued":
        return []
    try:
        mine = shared_targets(Scenario.model_validate_json(row[0]))
    except ValueError:  # a scenario stored by an older version may not read back
        return []
    if not mine:
        return []
    start, end = row[1], _span_end(row[2])
    candidates = con.execute(
        "SELECT run_id, scenario, created_at, finished_at FROM runs "
        "WHERE run_id != ? AND state != 'queued' AND created_at < ? "
        "AND (finished_at IS NULL OR finished_at > ?) ORDER BY created_at DESC LIMIT ?",
        [run_id, end, start, MAX_CANDIDATES],
    ).fetchall()
    rows: list[dict[str, Any]] = []
    for other_id, document, other_start, other_finished in candidates:
        try:
            theirs = Scenario.model_validate_json(document)
        except ValueError:
            continue
        overlap = (min(end, _span_end(other_finished)) - max(start, other_start)).total_seconds()
        for provider, target in mine.items():
            for other in theirs.providers:
                if provider_target(other) == target:
                    rows.append(
                        {
                            "provider": provider,
                            "target": target,
                            "run_id": str(other_id),
                            "other_provider": other.name,
                            "overlap_s": round(max(overlap, 0.0), 3),
                        }
                    )
    return sorted(rows, key=lambda r: (r["provider"], r["run_id"], r["other_provider"]))
