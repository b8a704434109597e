"""Failover from records and upstream logs: attempts matched by id or by a unique prompt,
who served, who fell back, and the report's rows - nothing for a run without upstreams."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import duckdb
import pytest

from analytics.render.html_report import render_html
from analytics.render.markdown import render_markdown
from analytics.report.build import build_report
from analytics.report.failover import (
    FAILOVER_HEADER,
    FAILOVER_TITLE,
    UPSTREAMS_HEADER,
    failover_rows,
    failover_sections,
    log_rows,
    run_failover,
    upstream_rows,
)
from analytics.store.db import connect
from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import PlannedShard, RunStore
from analytics.store.upstream_log import store_upstream_entries, store_upstream_summary
from scenarios.loader import parse_scenario
from scenarios.wire.records import batch_to_ipc, records_to_batch
from tests.support.builders import ROW_CONTEXT, VALID_SCENARIO, S, failed_result, timed_result
from tests.support.terminal import terminal_tables
from workers.client.errors import ErrorClass
from workers.client.request_ids import prompt_hash
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import record_row, tagged

TAGGING = dataclasses.replace(ROW_CONTEXT, tag_requests=True)
T0 = 1_800_000_000 * S  # wall clock of the upstream entries (ns)
MS = 1_000_000
PROMPTS = ["zero", "one", "two", "three", "dup", "dup"]
TTFT = [20.0, 330.0, 260.0, None, 15.0, 16.0]  # None: failed


def _id(seq: int) -> str | None:
    return tagged(TAGGING, PlannedRequest(seq, 4, 2, PROMPTS[seq])).request_id


def _entry(seq: int, at_ms: float, status: int, outcome: str, **kw: Any) -> dict[str, Any]:
    return {"seq": seq, "received_at_ns": T0 + int(at_ms * MS), "status": status,
            "outcome": outcome, "stall_ms": 0.0, **kw}  # fmt: skip


def _store(path: Path, upstreams: bool = True) -> duckdb.DuckDBPyConnection:
    con = connect(path)
    RunStore(con).create_run(
        "run", parse_scenario(VALID_SCENARIO), [PlannedShard("s0.a.local", 0, "a", "local", 4, 6)]
    )
    rows = []
    for seq, (prompt, ttft) in enumerate(zip(PROMPTS, TTFT, strict=True)):
        request = PlannedRequest(seq, 4, 2, prompt)
        result = (
            failed_result(seq * S, ErrorClass.HTTP_429)
            if ttft is None
            else timed_result(seq * S, ttft, [1.0])
        )
        rows.append(record_row(TAGGING if upstreams else ROW_CONTEXT, request, result))
    ingest_batches(
        con, [BatchMessage("run", "s0.a.local", 1, 0, batch_to_ipc(records_to_batch(rows)))]
    )
    RunStore(con).shard_done("run", "s0.a.local", "finished", 1, None)
    if not upstreams:
        return con
    hashed = {seq: prompt_hash([("user", p)]) for seq, p in enumerate(PROMPTS)}
    up_a = [
        _entry(1, 0, 200, "ok", request_id=_id(0), prompt_hash=hashed[0]),
        _entry(2, 1000, 429, "http_429", request_id=_id(1), prompt_hash=hashed[1]),
        # A gateway that dropped the id: matched by its prompt, unique in the run.
        _entry(3, 2000, 503, "http_5xx", prompt_hash=hashed[2]),
        _entry(4, 2200, 200, "ok", prompt_hash=hashed[2]),  # a retry on the same upstream
        _entry(5, 3000, 429, "http_429", request_id=_id(3), prompt_hash=hashed[3]),
        # Two requests sent this prompt: the entry cannot be told apart, so it is unmatched.
        _entry(6, 4000, 200, "ok", prompt_hash=hashed[4]),
    ]
    up_b = [_entry(1, 1300, 200, "ok", request_id=_id(1), prompt_hash=hashed[1])]
    assert store_upstream_entries(con, "run", "up-a", up_a) == 6
    store_upstream_entries(con, "run", "up-a", up_a[:2])  # read twice: stored once
    store_upstream_entries(con, "run", "up-b", up_b)
    store_upstream_summary(con, "run", "up-a", 9101, 3, T0)
    store_upstream_summary(con, "run", "up-b", 9102, 0, T0 + 1300 * MS)
    return con


def test_each_request_knows_its_attempts(tmp_path: Path) -> None:
    con = _store(tmp_path / "f.duckdb")
    rows = con.execute(
        "SELECT seq, upstream_attempts, attempt_outcomes, tries, served_by, fell_back, "
        "failover_ms, matched_by FROM request_upstreams ORDER BY seq"
    ).fetchall()
    assert rows == [
        (0, ["up-a"], ["ok"], 1, "up-a", False, None, "id"),
        (1, ["up-a", "up-b"], ["http_429", "ok"], 2, "up-b", True, pytest.approx(300.0), "id"),
        (2, ["up-a", "up-a"], ["http_5xx", "ok"], 2, "up-a", True, pytest.approx(200.0), "prompt"),
        (3, ["up-a"], ["http_429"], 1, None, False, None, "id"),
        (4, None, None, 0, None, False, None, None),
        (5, None, None, 0, None, False, None, None),
    ]


def test_the_report_rows_are_the_attempts(tmp_path: Path) -> None:
    con = _store(tmp_path / "f.duckdb")
    failover, upstreams, logs = run_failover(con, "run")
    (row,) = failover
    assert (row["requests"], row["attributed"], row["fell_back"]) == (6, 4, 2)
    assert row["client_error_pct"] == pytest.approx(100 / 6)
    assert row["fallback_pct"] == pytest.approx(50.0)
    assert row["ttft_fell_back_p50_ms"] == pytest.approx(295.0)  # of 330 and 260
    assert row["ttft_first_try_p50_ms"] == pytest.approx(20.0)  # seq 0 only: 3 failed
    assert row["failover_mean_ms"] == pytest.approx(250.0)
    by_upstream = {r["upstream"]: r for r in upstreams}
    a, b = by_upstream["up-a"], by_upstream["up-b"]
    assert (a["received"], a["first_tries"], a["ok"], a["http_429"], a["http_5xx"]) == (
        5,
        4,
        2,
        2,
        1,
    )
    assert a["error_pct"] == pytest.approx(60.0)
    assert (b["received"], b["first_tries"], b["ok"], b["error_pct"]) == (1, 0, 1, 0)
    assert [(r["upstream"], r["entries"], r["unmatched"], r["missed"]) for r in logs] == [
        ("up-a", 6, 1, 3),
        ("up-b", 1, 0, 0),
    ]

    report = build_report(con, "run")
    assert report.to_dict()["failover"] == failover
    assert report.upstreams == upstreams and report.upstream_logs == logs
    text = failover_rows(report.failover)
    assert len(text[0]) == len(FAILOVER_HEADER) and text[0][6] == "2 (50.0 %)"
    assert all(len(r) == len(UPSTREAMS_HEADER) for r in upstream_rows(report.upstreams))
    assert log_rows(report.upstream_logs)[0] == ["up-a", "9101", "6", "1", "3"]
    assert FAILOVER_TITLE in render_markdown(report) and FAILOVER_TITLE in render_html(report)
    assert len(terminal_tables(report, 200, "failover", "upstreams", "upstream-logs")) >= 3


def test_a_run_without_upstreams_has_no_failover_rows(tmp_path: Path) -> None:
    con = _store(tmp_path / "n.duckdb", upstreams=False)
    assert run_failover(con, "run") == ([], [], [])
    report = build_report(con, "run")
    assert report.failover == [] and FAILOVER_TITLE not in render_markdown(report)
    assert terminal_tables(report, 200, "failover", "upstreams", "upstream-logs") == []


def test_sections_are_only_those_with_rows_and_stage_keys_are_numeric() -> None:
    assert failover_sections([], [], []) == []
    logs = [{"upstream": "a", "port": 9101, "entries": 7, "unmatched": 1, "missed": 0}]
    (section,) = failover_sections([], [], logs)
    assert section.title == "Upstream logs" and section.keys == 1
    assert section.numeric == [False, True, True, True, True]
    assert section.rows == log_rows(logs)
