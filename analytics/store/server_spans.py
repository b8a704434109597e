"""Server spans received over OTLP (docs/traces.md): which runs a span may be stored
for, and the rows of ``server_spans`` and ``server_span_receipts`` (schema v20).

A span is stored for a run that is running, or ended less than ``OTLP_GRACE_S`` ago,
that has a provider of the span's name and that belongs to the sender's team (an admin:
any team). A span never changes a record; the view ``request_server_timings`` joins it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from scenarios.limits import OTLP_GRACE_S
from scenarios.wire.otlp import ServerSpan

# A provider endpoint serves one run at a time (runs wait for endpoints in use), so a span
# matches one run; a handful more are allowed for endpoints declared ``shared``.
MAX_RUNS_PER_SPAN = 8

_SPAN_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("provider", pa.string()),
        pa.field("request_id", pa.string()),
        pa.field("queue_ns", pa.int64()),
        pa.field("ttft_ns", pa.int64()),
        pa.field("prefill_ns", pa.int64()),
        pa.field("decode_ns", pa.int64()),
        pa.field("e2e_ns", pa.int64()),
        pa.field("trace_id", pa.string()),
        pa.field("span_name", pa.string()),
        pa.field("received_at", pa.timestamp("us", tz="UTC")),
    ]
)


class WritableRuns:
    """The runs spans may be stored for, read once per export request (one query, however
    many providers its spans name): live (or ended within the grace) and of ``team``
    (None: an admin, any team), newest first, per provider they name."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, team: str | None, now: dt.datetime | None = None
    ) -> None:
        since = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(seconds=OTLP_GRACE_S)
        rows = con.execute(
            "SELECT p.provider, r.run_id FROM runs AS r "
            "JOIN providers AS p ON p.run_id = r.run_id "
            "LEFT JOIN object_owners AS o "
            "ON o.object_id = r.run_id AND o.kind IN ('run', 'session') "
            "WHERE (r.state = 'running' OR r.finished_at >= $since) "
            "AND ($team IS NULL OR coalesce(o.team, 'default') = $team) "
            "ORDER BY r.created_at DESC",
            {"since": since, "team": team},
        ).fetchall()
        self._by_provider: dict[str, list[str]] = {}
        for provider, run in rows:
            self._by_provider.setdefault(str(provider), []).append(str(run))

    def of(self, provider: str, run_id: str | None = None) -> list[str]:
        """Runs a span for ``provider`` may be stored for (``run_id`` only, if given)."""
        runs = self._by_provider.get(provider, [])
        if run_id is not None:
            runs = [run for run in runs if run == run_id]
        return runs[:MAX_RUNS_PER_SPAN]


def writable_runs(
    con: duckdb.DuckDBPyConnection,
    provider: str,
    team: str | None,
    run_id: str | None = None,
    now: dt.datetime | None = None,
) -> list[str]:
    """Runs a span for ``provider`` may be stored for: live (or within the grace), naming
    that provider, of ``team`` (None: an admin, any team), and ``run_id`` if given."""
    return WritableRuns(con, team, now).of(provider, run_id)


def store_spans(
    con: duckdb.DuckDBPyConnection,
    spans: Sequence[tuple[str, ServerSpan]],
    received_at: dt.datetime,
) -> None:
    """Append ``(run_id, span)`` rows to ``server_spans`` (one statement)."""
    if not spans:
        return
    columns: dict[str, list[object]] = {name: [] for name in _SPAN_SCHEMA.names}
    for run_id, span in spans:
        values = (
            run_id, span.provider, span.request_id, span.queue_ns, span.ttft_ns,
            span.prefill_ns, span.decode_ns, span.e2e_ns, span.trace_id, span.name, received_at,
        )  # fmt: skip
        for name, value in zip(_SPAN_SCHEMA.names, values, strict=True):
            columns[name].append(value)
    con.register("incoming_server_spans", pa.table(columns, schema=_SPAN_SCHEMA))
    try:
        con.execute("INSERT INTO server_spans SELECT * FROM incoming_server_spans")
    finally:
        con.unregister("incoming_server_spans")


@dataclass(frozen=True, slots=True)
class Receipt:
    """What became of one export request's spans."""

    team: str
    token_id: str
    encoding: str
    spans: int
    stored: int
    refused: int
    dropped: int


def record_receipt(con: duckdb.DuckDBPyConnection, receipt: Receipt, at: dt.datetime) -> None:
    """One row of ``server_span_receipts``."""
    con.execute(
        "INSERT INTO server_span_receipts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            at, receipt.team, receipt.token_id, receipt.encoding,
            receipt.spans, receipt.stored, receipt.refused, receipt.dropped,
        ],
    )  # fmt: skip
