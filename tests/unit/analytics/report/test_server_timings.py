"""The TTFT decomposition (analytics/report/server_timings.py and the view
request_server_timings) on a stored run: spans joined on the response id or the server
request id, in-band timings winning, duplicates counted once, unknown stays NULL."""

from __future__ import annotations

import dataclasses
import datetime as dt

import duckdb

from analytics.report.server_timings import server_timings
from analytics.store.db import connect
from analytics.store.server_spans import WritableRuns, store_spans, writable_runs
from scenarios.wire.otlp import ServerSpan
from tests.support.builders import MS, ok_result, store_run
from tests.support.builders import REPORT_SCENARIO as SCENARIO


def _span(request_id: str, queue_ms: float, ttft_ms: float, provider: str = "api") -> ServerSpan:
    return ServerSpan(
        provider, request_id, None, "", "llm_request",
        round(queue_ms * MS), round(ttft_ms * MS), None, None, None,
    )  # fmt: skip


def _run(con: duckdb.DuckDBPyConnection) -> None:
    by_id = ok_result(0, 50.0, [1.0])
    by_header = dataclasses.replace(ok_result(10**9, 60.0, [1.0]), server_request_id="hdr-2")
    in_band = dataclasses.replace(
        ok_result(2 * 10**9, 70.0, [1.0]), server_queue_ns=5 * MS, server_ttft_ns=40 * MS
    )
    stage0 = [
        dataclasses.replace(by_id, response_id="chatcmpl-1"),
        by_header,
        dataclasses.replace(in_band, response_id="chatcmpl-3"),
        ok_result(3 * 10**9, 80.0, [1.0]),  # no id: nothing joins
    ]
    store_run(con, "run-st", SCENARIO, {("api", 0): stage0, ("api", 1): [ok_result(0, 9.0, [])]})


def test_spans_join_and_split_ttft() -> None:
    con = connect(":memory:")
    _run(con)
    now = dt.datetime.now(dt.UTC)
    assert writable_runs(con, "api", None) == ["run-st"]
    assert writable_runs(con, "api", "another-team") == []
    assert writable_runs(con, "nope", None) == []
    spans = [
        _span("chatcmpl-1", 10.0, 30.0),
        _span("chatcmpl-1", 99.0, 99.0),  # a retried export: the first copy counts
        _span("hdr-2", 20.0, 45.0),
        _span("chatcmpl-3", 30.0, 35.0),  # the response's own figures win
        _span("chatcmpl-1", 1.0, 2.0, provider="other"),  # another provider's id space
    ]
    store_spans(con, [("run-st", s) for s in spans[:1]], now)
    store_spans(con, [("run-st", s) for s in spans[1:]], now + dt.timedelta(seconds=1))
    rows = {r["stage"]: r for r in server_timings(con, "run-st")}
    stage0 = rows[0]
    assert (stage0["requests"], stage0["joined"]) == (4, 3)
    assert stage0["joined_share"] == 0.75
    # queues 10, 20, 5 ms; prefills 20, 25, 35; network + client 20, 15, 30.
    assert round(stage0["queue_p50_ms"], 3) == 10.0
    assert round(stage0["prefill_p50_ms"], 3) == 25.0
    assert round(stage0["network_client_p50_ms"], 3) == 20.0
    by_record = con.execute(
        "SELECT seq, server_timing_source, span_joined FROM request_server_timings "
        "WHERE run_id = 'run-st' AND stage = 0 ORDER BY seq"
    ).fetchall()
    assert by_record == [(0, "otlp", True), (1, "otlp", True), (2, "otlp", True), (3, None, False)]
    stage1 = rows[1]
    assert stage1["joined"] == 0 and stage1["queue_p50_ms"] is None
    assert stage1["network_client_p50_ms"] is None


class _CountingConnection:
    """A DuckDB connection that counts the statements run through it."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con, self.statements = con, 0

    def execute(self, *args: object) -> duckdb.DuckDBPyConnection:
        self.statements += 1
        return self.con.execute(*args)  # type: ignore[arg-type]


def test_the_runs_spans_may_join_are_read_once_whatever_an_export_names() -> None:
    con = connect(":memory:")
    _run(con)
    counting = _CountingConnection(con)
    writable = WritableRuns(counting, None)  # type: ignore[arg-type]
    # An export naming 2,048 providers (hostile or not) costs one query, not one each.
    answers = [writable.of(f"p{i}") for i in range(2048)]
    assert counting.statements == 1 and not any(answers)
    assert writable.of("api") == ["run-st"]
    assert writable.of("api", "run-st") == ["run-st"] and writable.of("api", "other") == []
