"""Sessions in the report: the by-turn figures and the session endings computed from
session records, the rows the text formats print, and nothing for a run without them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analytics.render.html_report import render_html
from analytics.render.markdown import render_markdown
from analytics.report.build import build_report
from analytics.report.sessions import TURNS_TITLE, session_ends, session_turns
from analytics.sections.model import SectionOptions
from analytics.sections.sessions import sessions
from analytics.store.db import connect
from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import PlannedShard, RunStore
from scenarios.loader import parse_scenario
from scenarios.wire.records import batch_to_ipc, records_to_batch
from tests.support.builders import ROW_CONTEXT, VALID_SCENARIO, S, failed_result, timed_result
from tests.support.terminal import terminal_tables
from workers.client.errors import ErrorClass
from workers.prompts.plan import PlannedRequest, SessionTurn
from workers.shard.rows import record_row

# Session 0: three turns, done; session 1: a second turn that failed; session 2: capped.
TURNS = [
    (0, 1, 3, 0, None, 40.0, [2.0, 2.0]),
    (0, 2, 3, 30, None, 20.0, [1.0, 3.0]),
    (0, 3, 3, 70, "done", 22.0, [1.0]),
    (1, 1, 3, 0, None, 44.0, [2.5]),
    (1, 2, 3, 25, "error", None, []),
    (2, 1, 2, 0, "context_cap", 38.0, [2.0, 4.0]),
]


def _store(path: Path) -> None:
    con = connect(path)
    RunStore(con).create_run(
        "run", parse_scenario(VALID_SCENARIO), [PlannedShard("s0.a.local", 0, "a", "local", 4, 6)]
    )
    rows = []
    for i, (session, turn, turns, context, end, ttft, gaps) in enumerate(TURNS):
        place = SessionTurn(session, turn, turns, context, 0, end)
        request = PlannedRequest(i, context + 10, 5, "p", session=place)
        result = (
            failed_result(i * S, ErrorClass.HTTP_5XX)
            if ttft is None
            else timed_result(i * S, ttft, gaps)
        )
        rows.append(record_row(ROW_CONTEXT, request, result))
    ingest_batches(
        con, [BatchMessage("run", "s0.a.local", 1, 0, batch_to_ipc(records_to_batch(rows)))]
    )
    RunStore(con).shard_done("run", "s0.a.local", "finished", 1, None)
    con.close()


def test_by_turn_figures_and_endings_are_the_records(tmp_path: Path) -> None:
    _store(tmp_path / "s.duckdb")
    con = connect(tmp_path / "s.duckdb")
    turns = {row["turn"]: row for row in session_turns(con, "run")}
    assert sorted(turns) == [1, 2, 3]
    first = turns[1]
    assert (first["requests"], first["ok"]) == (3, 3)
    assert first["ttft_p50_ms"] == pytest.approx(np.percentile([40, 44, 38], 50))
    assert first["ttft_p99_ms"] == pytest.approx(np.percentile([40, 44, 38], 99))
    assert first["itl_p50_ms"] == pytest.approx(np.percentile([2.0, 2.0, 2.5, 2.0, 4.0], 50))
    second = turns[2]
    assert (second["requests"], second["ok"]) == (2, 1) and second["ttft_p50_ms"] == pytest.approx(
        20
    )
    assert second["context_tokens_mean"] == pytest.approx(27.5)  # failed turns count too
    (ends,) = session_ends(con, "run")
    assert ends["sessions"] == 3
    assert ends["turns_mean"] == pytest.approx(2.0)
    assert ends["turns_planned_mean"] == pytest.approx(8 / 3)
    assert (ends["ended_done"], ends["ended_error"], ends["ended_context_cap"]) == (1, 1, 1)
    assert (ends["ended_stage_end"], ends["unended"]) == (0, 0)

    report = build_report(con, "run")
    assert report.session_turns == session_turns(con, "run")
    assert report.to_dict()["sessions"] == [ends]
    turns, ends_section = sessions(report, SectionOptions())
    rows = turns.text_rows()
    assert len(rows) == 3 and all(len(row) == len(turns.columns) for row in rows)
    assert rows[1][4:7] == ["2", "1", "20.0"]
    assert ends_section.text_rows() == [
        ["a", "0", "local", "3", "2.00", "2.67", "1", "1", "1", "0"]
    ]
    assert TURNS_TITLE in render_markdown(report) and TURNS_TITLE in render_html(report)
    assert len(terminal_tables(report, 200, "sessions", "session-ends")) >= 2


def test_a_run_without_sessions_has_no_session_rows(tmp_path: Path) -> None:
    con = connect(tmp_path / "n.duckdb")
    RunStore(con).create_run(
        "run", parse_scenario(VALID_SCENARIO), [PlannedShard("s0.a.local", 0, "a", "local", 4, 1)]
    )
    row = record_row(ROW_CONTEXT, PlannedRequest(0, 10, 5, "p"), timed_result(0, 30, [1.0]))
    assert row["session_id"] is None and row["turn"] is None
    ingest_batches(
        con, [BatchMessage("run", "s0.a.local", 1, 0, batch_to_ipc(records_to_batch([row])))]
    )
    RunStore(con).shard_done("run", "s0.a.local", "finished", 1, None)
    report = build_report(con, "run")
    assert report.session_turns == report.sessions == []
    assert TURNS_TITLE not in render_markdown(report) and TURNS_TITLE not in render_html(report)
    assert terminal_tables(report, 200, "sessions", "session-ends") == []
