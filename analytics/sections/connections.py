"""Connections and ids (analytics/report/connections.py, docs/metrics.md): requests on new
and reused connections, what opening a connection cost (DNS, TCP connect, TLS), TTFT of
first-on-connection requests against the rest, and the share of records that carry an id
server-side figures can be joined on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from analytics.sections.model import WHERE, Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

CONNECTIONS = (
    *WHERE,
    Column("new", "int", label="new\nconn"),
    Column("reused", "int", label="reused\nconn"),
    Column("DNS p50 (ms)", "ms", "ms", digits=2, optional=True, label="DNS\np50 ms"),
    Column("DNS p99 (ms)", "ms", "ms", digits=2, optional=True, label="DNS\np99 ms"),
    Column("connect p50 (ms)", "ms", "ms", digits=2, label="connect\np50 ms"),
    Column("connect p99 (ms)", "ms", "ms", digits=2, label="connect\np99 ms"),
    Column("TLS p50 (ms)", "ms", "ms", digits=2, optional=True, label="TLS\np50 ms"),
    Column("TLS p99 (ms)", "ms", "ms", digits=2, optional=True, label="TLS\np99 ms"),
    Column("TTFT first p50 (ms)", "ms", "ms", label="TTFT first\np50 ms"),
    Column("TTFT first p99 (ms)", "ms", "ms", label="TTFT first\np99 ms"),
    Column("TTFT reused p50 (ms)", "ms", "ms", label="TTFT reused\np50 ms"),
    Column("TTFT reused p99 (ms)", "ms", "ms", label="TTFT reused\np99 ms"),
)

IDS = (
    *WHERE,
    Column("records", "int"),
    Column("response id", "percent", "%", label="response\nid"),
    Column("request id", "percent", "%", label="request\nid"),
)


def _where(row: Mapping[str, Any]) -> tuple[str, int, str]:
    return row["provider"], row["stage"], row["region"]


@section(order=175)
def connections(report: RunReport, options: SectionOptions) -> list[Section]:
    """Per stage row whose transport told new from reused connections: how many of each,
    the new ones' DNS, connect and TLS times, and TTFT first-on-connection vs the rest."""
    rows = tuple(
        (
            *_where(r), c["connections_new"], c["connections_reused"],
            c["dns_p50_ms"], c["dns_p99_ms"], c["connect_p50_ms"], c["connect_p99_ms"],
            c["tls_p50_ms"], c["tls_p99_ms"], c["ttft_new_p50_ms"], c["ttft_new_p99_ms"],
            c["ttft_reused_p50_ms"], c["ttft_reused_p99_ms"],
        )
        for r in report.stages
        if (c := r.get("connections")) and (c["connections_new"] or c["connections_reused"])
    )  # fmt: skip
    if not rows:
        return []
    note = (
        "requests on a connection they opened (new) and on a reused or pre-warmed one (with "
        "pre-warm, the default, all are reused: opening them is the client health's "
        "prewarm_ms); DNS (names only), TCP connect and TLS (https only) of the new ones; "
        "TTFT of successful requests, first on their connection vs the rest "
        '(docs/metrics.md, "Connection phases")'
    )
    return [Section("connections", "Connections", CONNECTIONS, rows, note)]


@section(order=176)
def ids(report: RunReport, options: SectionOptions) -> list[Section]:
    """Per stage row: the share of records with the response's own id and with a request
    id header, what a server's own log or trace can be joined on."""
    rows = tuple(
        (*_where(r), c["records_total"], c["response_id_pct"], c["request_id_pct"])
        for r in report.stages
        if (c := r.get("connections")) and c["records_total"]
    )
    if not rows:
        return []
    note = (
        "share of all records carrying the response's own id (the stream's id) and a "
        "request id header the server sent; 0 %: the provider sends none, its figures "
        'cannot be joined (docs/metrics.md, "Response and request ids")'
    )
    return [Section("ids", "Response and request ids", IDS, rows, note)]
