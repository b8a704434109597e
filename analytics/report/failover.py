"""Failover in the report (docs/failover.md): what a gateway's fallbacks cost, from the
records joined to the logs of the run's simulated upstreams. Empty for a run without
upstreams, so its report is unchanged.

Per provider × stage × region (``failover.sql``): requests, the error rate clients saw,
how many requests the logs account for, the share of those that fell back, TTFT p50/p99
of the successful requests that fell back and of those served at their first try, and
the mean time from first attempt to serving attempt at the upstreams. Per upstream
(``failover_upstreams.sql``): the attempts it got for those requests and its own error
rate. The logs as a whole (``failover_logs.sql``): entries, unmatched, dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from analytics.sql.files import load_sql

__all__ = [
    "FAILOVER_HEADER",
    "FAILOVER_NOTE",
    "FAILOVER_TITLE",
    "LOGS_HEADER",
    "LOGS_TITLE",
    "UPSTREAMS_HEADER",
    "UPSTREAMS_TITLE",
    "FailoverSection",
    "failover_rows",
    "failover_sections",
    "log_rows",
    "run_failover",
    "upstream_rows",
]

FAILOVER_TITLE = "Failover"
FAILOVER_HEADER = (
    "provider", "stage", "region", "n", "client err", "matched", "fell back",
    "TTFT p50 fell back", "TTFT p99 fell back", "TTFT p50 1st try", "TTFT p99 1st try",
    "failover mean",
)  # fmt: skip
FAILOVER_NOTE = (
    "ms over successful requests; client err: share of all requests that failed; matched: "
    "requests found in the upstreams' logs; fell back: share of matched requests whose "
    "first attempt failed and a later one was served; failover mean: first attempt to "
    "serving attempt, at the upstreams (docs/failover.md)"
)
UPSTREAMS_TITLE = "Upstreams"
UPSTREAMS_HEADER = (
    "provider", "stage", "region", "upstream", "received", "1st tries", "ok", "429", "5xx",
    "reset", "other", "error rate",
)  # fmt: skip
LOGS_TITLE = "Upstream logs"
LOGS_HEADER = ("upstream", "port", "entries", "unmatched", "dropped")


def _rows(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def run_failover(
    con: duckdb.DuckDBPyConnection, run_id: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The run's failover rows, upstream rows and log rows (all empty without upstreams)."""
    logs = _rows(con.execute(load_sql("failover_logs"), {"run_id": run_id}))
    if not logs:
        return [], [], []
    failover = _rows(con.execute(load_sql("failover"), {"run_id": run_id}))
    upstreams = _rows(con.execute(load_sql("failover_upstreams"), {"run_id": run_id}))
    return failover, upstreams, logs


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} %"


def failover_rows(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The failover table of the text formats (:data:`FAILOVER_HEADER`)."""
    return [
        [
            str(r["provider"]), str(r["stage"]), str(r["region"]), f"{r['requests']:,}",
            _pct(r["client_error_pct"]), f"{r['attributed']:,}",
            f"{r['fell_back']:,} ({_pct(r['fallback_pct'])})",
            _ms(r["ttft_fell_back_p50_ms"]), _ms(r["ttft_fell_back_p99_ms"]),
            _ms(r["ttft_first_try_p50_ms"]), _ms(r["ttft_first_try_p99_ms"]),
            _ms(r["failover_mean_ms"]),
        ]
        for r in rows
    ]  # fmt: skip


def upstream_rows(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The per-upstream table of the text formats (:data:`UPSTREAMS_HEADER`)."""
    return [
        [
            str(r["provider"]), str(r["stage"]), str(r["region"]), str(r["upstream"]),
            f"{r['received']:,}", f"{r['first_tries']:,}", f"{r['ok']:,}",
            f"{r['http_429']:,}", f"{r['http_5xx']:,}", f"{r['reset']:,}",
            f"{r['other_errors']:,}", _pct(r["error_pct"]),
        ]
        for r in rows
    ]  # fmt: skip


def log_rows(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The upstream-logs table of the text formats (:data:`LOGS_HEADER`)."""
    return [
        [
            str(r["upstream"]), str(r["port"]), f"{r['entries']:,}", f"{r['unmatched']:,}",
            f"{r['missed']:,}",
        ]
        for r in rows
    ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class FailoverSection:
    """One table of the failover part of a report, as every format renders it: the
    first ``keys`` columns name the row (provider, stage, ...), the others are figures."""

    title: str
    header: tuple[str, ...]
    rows: list[list[str]]
    keys: int
    note: str = ""

    @property
    def numeric(self) -> list[bool]:
        """Right-aligned columns: the stage among the keys, and every figure."""
        keys = [name == "stage" for name in self.header[: self.keys]]
        return keys + [True] * (len(self.header) - self.keys)


def failover_sections(
    failover: Sequence[dict[str, Any]],
    upstreams: Sequence[dict[str, Any]],
    logs: Sequence[dict[str, Any]],
) -> list[FailoverSection]:
    """The failover tables that have rows: per stage, per upstream, and the logs (none
    for a run without upstreams)."""
    sections = [
        FailoverSection(FAILOVER_TITLE, FAILOVER_HEADER, failover_rows(failover), 3, FAILOVER_NOTE),
        FailoverSection(UPSTREAMS_TITLE, UPSTREAMS_HEADER, upstream_rows(upstreams), 4),
        FailoverSection(LOGS_TITLE, LOGS_HEADER, log_rows(logs), 1),
    ]
    return [section for section in sections if section.rows]
