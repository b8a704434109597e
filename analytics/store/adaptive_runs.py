"""Stored state of stages decided while a run goes, and of stages ended early (schema v11).

The control plane writes, the reports and views read: each decided stage's role and
level (``adaptive_stages``), each early end with its evidence (``stage_outcomes``), each
capacity stage's verdict (``stage_verdicts``) and each provider's search
(``capacity_results``). ``stage_figures`` is the query both the live decisions and the
verdicts read (``sql/stage_monitor.sql``). Columns: docs/answers.md.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import duckdb

from analytics.sql.files import load_sql
from scenarios.load.adaptive import StopWhen
from scenarios.slo import SLO

__all__ = [
    "CapacityRow",
    "OutcomeRow",
    "RegionFigures",
    "RoleRow",
    "VerdictRow",
    "capacity_rows",
    "measured_rates",
    "outcome_rows",
    "role_rows",
    "stage_figures",
    "verdict_rows",
    "write_capacity",
    "write_outcome",
    "write_roles",
    "write_verdict",
]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class RoleRow:
    """A decided stage of one provider: its role and level, and why that level."""

    stage: int
    provider: str
    role: str
    load_kind: str  # open | closed
    level: float
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class OutcomeRow:
    """A stage a provider's shards were stopped in early (or marked), with the evidence."""

    stage: int
    provider: str
    outcome: str  # saturated | stopped_early
    acted: bool
    reason: str
    evidence: dict[str, Any]
    requests_planned: int | None
    requests_done: int
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class VerdictRow:
    """A capacity stage's verdict for one provider (the worst region's interval)."""

    stage: int
    provider: str
    verdict: str
    attainment: float | None
    low: float | None
    high: float | None
    requests: int
    met: int
    measured_rps: float | None
    regions: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CapacityRow:
    """Where a provider's capacity search stands."""

    provider: str
    search_by: str
    state: str
    low: float | None
    high: float | None
    low_stage: int | None
    high_stage: int | None
    stages: int
    message: str


def write_roles(con: duckdb.DuckDBPyConnection, run_id: str, rows: Iterable[RoleRow]) -> None:
    """Record decided stages (idempotent: a stage decided again after a restart is the
    same decision)."""
    rows = list(rows)
    if not rows:
        return
    now = _now()
    con.executemany(
        "INSERT OR REPLACE INTO adaptive_stages VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [[run_id, r.stage, r.provider, r.role, r.load_kind, r.level, r.reason, now] for r in rows],
    )


def role_rows(con: duckdb.DuckDBPyConnection, run_id: str) -> list[RoleRow]:
    """The run's decided stages, in stage order."""
    rows = con.execute(
        "SELECT stage, provider, role, load_kind, level, reason FROM adaptive_stages "
        "WHERE run_id = ? ORDER BY stage, provider",
        [run_id],
    ).fetchall()
    return [RoleRow(int(r[0]), r[1], r[2], r[3], float(r[4]), r[5]) for r in rows]


def write_outcome(con: duckdb.DuckDBPyConnection, run_id: str, row: OutcomeRow) -> None:
    """Record an early end (once per stage and provider: the first decision stands)."""
    con.execute(
        "INSERT OR IGNORE INTO stage_outcomes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run_id,
            row.stage,
            row.provider,
            row.outcome,
            row.acted,
            row.reason,
            json.dumps(row.evidence),
            row.requests_planned,
            row.requests_done,
            row.elapsed_s,
            _now(),
        ],
    )


def outcome_rows(con: duckdb.DuckDBPyConnection, run_id: str) -> list[OutcomeRow]:
    """The run's early ends, in stage order."""
    rows = con.execute(
        "SELECT stage, provider, outcome, acted, reason, evidence, requests_planned, "
        "requests_done, elapsed_s FROM stage_outcomes WHERE run_id = ? ORDER BY stage, provider",
        [run_id],
    ).fetchall()
    return [
        OutcomeRow(int(r[0]), r[1], r[2], bool(r[3]), r[4], json.loads(r[5]), r[6], int(r[7]),
                   float(r[8]))
        for r in rows
    ]  # fmt: skip


def write_verdict(con: duckdb.DuckDBPyConnection, run_id: str, row: VerdictRow) -> None:
    """Record a capacity stage's verdict (idempotent)."""
    con.execute(
        "INSERT OR REPLACE INTO stage_verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run_id, row.stage, row.provider, row.verdict, row.attainment, row.low, row.high,
            row.requests, row.met, row.measured_rps, json.dumps(row.regions),
        ],
    )  # fmt: skip


def verdict_rows(con: duckdb.DuckDBPyConnection, run_id: str) -> list[VerdictRow]:
    """The run's capacity verdicts, in stage order."""
    rows = con.execute(
        "SELECT stage, provider, verdict, attainment, low, high, requests, met, measured_rps, "
        "regions FROM stage_verdicts WHERE run_id = ? ORDER BY stage, provider",
        [run_id],
    ).fetchall()
    return [
        VerdictRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], int(r[6]), int(r[7]), r[8],
                   json.loads(r[9]))
        for r in rows
    ]  # fmt: skip


def write_capacity(con: duckdb.DuckDBPyConnection, run_id: str, row: CapacityRow) -> None:
    """Record where a provider's search stands (replacing the previous state)."""
    con.execute(
        "INSERT OR REPLACE INTO capacity_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run_id, row.provider, row.search_by, row.state, row.low, row.high, row.low_stage,
            row.high_stage, row.stages, row.message, _now(),
        ],
    )  # fmt: skip


def capacity_rows(con: duckdb.DuckDBPyConnection, run_id: str) -> list[CapacityRow]:
    """The run's capacity searches, by provider."""
    rows = con.execute(
        "SELECT provider, search_by, state, low, high, low_stage, high_stage, stages, message "
        "FROM capacity_results WHERE run_id = ? ORDER BY provider",
        [run_id],
    ).fetchall()
    return [CapacityRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], int(r[7]), r[8]) for r in rows]


@dataclass(frozen=True, slots=True)
class RegionFigures:
    """One provider × region of a stage, from its stored records (``stage_monitor.sql``)."""

    provider: str
    region: str
    requests: int
    ok: int
    met: int
    n: int  # successful requests with a value of the stop_when metric
    estimate: float | None
    low: float | None
    high: float | None
    ttft_quarters_ms: list[float | None]


def stage_figures(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    stage: int,
    attempts: Sequence[tuple[str, int]],
    warmup_s: float,
    slo: SLO | None,
    stop_when: StopWhen | None,
) -> list[RegionFigures]:
    """Per provider × region figures of ``stage`` over the given (shard, attempt) pairs."""
    if not attempts:
        return []
    rule = stop_when or StopWhen(rel_ci=1.0)
    rows = con.execute(
        load_sql("stage_monitor"),
        {
            "run_id": run_id,
            "stage": stage,
            "attempts": [f"{shard}#{attempt}" for shard, attempt in attempts],
            "warmup_us": round(warmup_s * 1e6),
            "slo_ttft_ms": None if slo is None else slo.ttft_ms,
            "slo_tpot_ms": None if slo is None else slo.tpot_ms,
            "slo_e2e_ms": None if slo is None else slo.e2e_ms,
            "metric": rule.metric,
            "quantile": rule.quantile,
            "z": NormalDist().inv_cdf(0.5 + rule.confidence / 2),
        },
    ).fetchall()
    return [
        RegionFigures(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5]), r[6], r[7], r[8],
                      list(r[9]) if r[9] is not None else [None] * 4)
        for r in rows
    ]  # fmt: skip


def measured_rates(con: duckdb.DuckDBPyConnection, run_id: str, stage: int) -> dict[str, float]:
    """Successful requests per second of a settled stage per provider, the mean over its
    regions (each region sends the stage's level; the report's ``request_rate``)."""
    rows = con.execute(
        "SELECT provider, avg(request_rate) FROM stage_summary "
        "WHERE run_id = ? AND stage = ? AND request_rate > 0 GROUP BY provider",
        [run_id, stage],
    ).fetchall()
    return {str(r[0]): float(r[1]) for r in rows if r[1] is not None}
