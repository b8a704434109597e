"""Storing an imported run: exactly once, whole, and read by the same views as any run."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from analytics.imports.model import (
    DefinitionNote,
    ImportedRequest,
    ImportedRun,
    ImportedStage,
    SummaryFigure,
)
from analytics.imports.tools import described
from analytics.report.build import build_report
from analytics.report.imported import definition_notes
from analytics.sections.imported import imported as imported_sections
from analytics.sections.model import SectionOptions
from analytics.sections.registry import build_sections
from analytics.store.db import connect
from analytics.store.imported_runs import import_run_id, store_imported

T0 = 1_796_000_000_000_000_000


def _run(files: tuple[bytes, ...] = (b"one", b"two")) -> ImportedRun:
    def stage(index: int, concurrency: int, ttft: float) -> ImportedStage:
        requests = [
            ImportedRequest(
                ok=True,
                sent_at_ns=T0 + i * 100_000_000,
                ttft_ms=ttft + i,
                e2e_ms=ttft + i + 30.0,
                itl_ms=(10.0, 10.0, 10.0),
                prompt_tokens=128,
                output_tokens=4,
            )
            for i in range(9)
        ]
        requests.append(ImportedRequest(ok=False, sent_at_ns=T0, error="HTTP 500"))
        return ImportedStage(
            index=index,
            label=f"concurrency {concurrency}",
            load_kind="concurrency",
            concurrency=concurrency,
            requests=tuple(requests),
            summary=(SummaryFigure(figure="ttft", stat="p50", value=ttft + 4, unit="ms"),),
        )

    return ImportedRun(
        tool="aiperf",
        tool_version="0.13.0",
        format="aiperf profile_export.jsonl",
        model="m",
        per_request=True,
        stages=(stage(0, 1, 50.0), stage(1, 4, 60.0)),
        notes=(DefinitionNote(figure="ttft", note="from the actual send"),),
        files=tuple(described(f"f{i}", data) for i, data in enumerate(files)),
    )


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    connection = connect(tmp_path / "i.duckdb")
    yield connection
    connection.close()


def test_an_imported_run_is_stored_once_and_reads_like_any_run(
    con: duckdb.DuckDBPyConnection,
) -> None:
    run = _run()
    first = store_imported(con, run, "sim", "local")
    again = store_imported(con, run, "other-name", "local")
    assert first.added and not again.added
    assert first.run_id == again.run_id == import_run_id(run)
    assert con.execute("SELECT count(*) FROM request_records").fetchone() == (20,)
    rows = con.execute(
        "SELECT stage, provider, requests, errors, ttft_p50_ms FROM stage_summary "
        "WHERE run_id = ? ORDER BY stage",
        [first.run_id],
    ).fetchall()
    assert rows == [(0, "sim", 10, 1, 54.0), (1, "sim", 10, 1, 64.0)]
    report = build_report(con, first.run_id)
    assert [s["ttft_p50_ms"] for s in report.stages] == [54.0, 64.0]
    provenance = con.execute("SELECT tool, tool_version, per_request FROM run_imports").fetchall()
    assert provenance == [("aiperf", "0.13.0", True)]
    assert con.execute("SELECT figure, note FROM import_notes").fetchall() == [
        ("ttft", "from the actual send")
    ]
    assert con.execute("SELECT stage, value FROM import_summaries ORDER BY 1").fetchall() == [
        (0, 54.0),
        (1, 64.0),
    ]


def test_other_files_are_another_run(con: duckdb.DuckDBPyConnection) -> None:
    assert import_run_id(_run((b"a",))) != import_run_id(_run((b"b",)))
    assert import_run_id(_run((b"a", b"b"))) == import_run_id(_run((b"b", b"a")))


def test_a_run_that_fails_to_store_leaves_nothing(con: duckdb.DuckDBPyConnection) -> None:
    def refuse(_: duckdb.DuckDBPyConnection, __: str) -> None:
        raise RuntimeError("owner refused")

    with pytest.raises(RuntimeError):
        store_imported(con, _run(), "sim", "local", also=refuse)
    for table in ("runs", "shards", "request_records", "run_imports", "import_summaries"):
        assert con.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table


def test_the_report_shows_provenance_notes_and_the_tools_figures(
    con: duckdb.DuckDBPyConnection,
) -> None:
    stored = store_imported(con, _run(), "sim", "local")
    report = build_report(con, stored.run_id)
    assert report.imported is not None
    assert [f["name"] for f in report.imported["files"]] == ["f0", "f1"]
    # The tool's p50 TTFT beside the one computed from the rows.
    assert [(f["tool_value"], f["from_rows"]) for f in report.imported["figures"]] == [
        (54.0, 54.0),
        (64.0, 64.0),
    ]
    sections = {s.key: s for s in imported_sections(report, SectionOptions())}
    assert set(sections) <= {s.key for s in build_sections(report, SectionOptions())}
    assert "Imported from aiperf (0.13.0)" in sections["imported"].lines[0]
    assert sections["imported-definitions"].lines == ("ttft: from the actual send",)
    assert sections["imported-figures"].rows[0] == (0, "sim", "ttft", "p50", 54.0, 54.0, "ms")


def test_a_comparison_names_the_definitions_that_differ() -> None:
    aiperf = {"tool": "aiperf", "notes": [{"figure": "e2e", "note": "ends early"}]}
    vllm = {"tool": "vllm-bench", "notes": [{"figure": "ttft", "note": "role chunk"}]}
    assert definition_notes("ttft_p50", None, vllm) == ["vllm-bench: role chunk"]
    assert definition_notes("e2e_p99", aiperf, vllm) == ["aiperf: ends early"]
    assert definition_notes("tpot_p50", aiperf, vllm) == []
    assert definition_notes("ttft_p50", vllm, vllm) == []  # one tool, one method
    assert definition_notes("ttft_p50", None, None) == []


def test_two_runs_of_one_endpoint_are_paired_stage_by_stage(
    con: duckdb.DuckDBPyConnection,
) -> None:
    a = store_imported(con, _run((b"a",)), "aiperf-sim", "local")
    b = store_imported(con, _run((b"b",)), "other-sim", "local")
    report = build_report(con, b.run_id).with_run_comparison(build_report(con, a.run_id))
    assert report.comparison is not None
    rows = report.comparison["rows"]
    assert {(r["stage"], r["provider"]) for r in rows} == {
        (0, "aiperf-sim / other-sim"),
        (1, "aiperf-sim / other-sim"),
    }
    assert report.comparison["tools"] == ["aiperf 0.13.0", "aiperf 0.13.0"]
    assert all(r["definitions"] == [] for r in rows)


def test_a_summary_only_run_is_compared_by_its_printed_figures(
    con: duckdb.DuckDBPyConnection,
) -> None:
    rows_run = store_imported(con, _run((b"rows",)), "sim", "local")
    printed = ImportedRun(
        tool="llmd",
        tool_version=None,
        format="llm-d benchmark report 0.2",
        model="m",
        per_request=False,
        stages=(
            ImportedStage(
                index=0,
                label="stage 0",
                load_kind="concurrency",
                concurrency=1,
                summary=(
                    SummaryFigure(figure="ttft", stat="p50", value=108.0, unit="ms"),
                    SummaryFigure(figure="output_tokens_per_s", stat="rate", value=9.0,
                                  unit="tokens/s"),
                ),
            ),
        ),
        files=(described("report.yaml", b"report"),),
    )  # fmt: skip
    summary_run = store_imported(con, printed, "sim", "local")
    summary = build_report(con, summary_run.run_id)
    assert summary.stages == []  # nothing computed from nothing
    report = summary.with_run_comparison(build_report(con, rows_run.run_id))
    assert report.comparison is not None
    (row,) = report.comparison["rows"]
    assert (row["metric"], row["a_ms"], row["b_ms"], row["ratio"]) == ("ttft_p50", 54.0, 108.0, 2.0)
    assert "llmd: figures as the tool printed them (no rows: no interval)" in row["definitions"]
