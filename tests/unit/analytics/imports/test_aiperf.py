"""AIPerf importer on AIPerf 0.13.0's real files (tests/data/imports/aiperf/0.13.0: the
simulator at concurrency 1 and 4, 32 requests each), alone and together, plus error
records and malformed or hostile files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from analytics.imports import aiperf, tools
from analytics.imports.errors import ImportFormatError
from analytics.imports.model import ImportedRun, ImportedStage

DATA = Path(__file__).resolve().parents[4] / "tests" / "data" / "imports" / "aiperf" / "0.13.0"
RECORDS = "profile_export.jsonl"
SUMMARY = "profile_export_aiperf.json"


def folder(level: str) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in (DATA / level).iterdir()}


def one_run(files: dict[str, bytes]) -> ImportedRun:
    runs = tools.runs_in(files, "aiperf")
    assert len(runs) == 1
    return runs[0]


def figure(stage: ImportedStage, name: str, stat: str) -> float:
    found = [f.value for f in stage.summary if f.figure == name and f.stat == stat]
    assert len(found) == 1, (name, stat)
    return found[0]


def lines(level: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / level / RECORDS).read_text().splitlines()]


def jsonl(records: list[dict]) -> bytes:
    return "\n".join(json.dumps(record) for record in records).encode()


@pytest.mark.parametrize(("level", "concurrency"), [("c1", 1), ("c4", 4)])
def test_a_folder_imports_per_request_with_the_tools_summary(level: str, concurrency: int) -> None:
    files = folder(level)
    assert tools.detect(files) == "aiperf"
    run = one_run(files)
    assert (run.tool, run.tool_version, run.model) == ("aiperf", "0.13.0", "simulated")
    assert run.target == "http://127.0.0.1:8765"
    assert run.per_request
    assert run.format == f"aiperf {RECORDS} + {SUMMARY}"
    [stage] = run.stages
    assert (stage.label, stage.load_kind, stage.concurrency) == (
        f"concurrency {concurrency}",
        "concurrency",
        concurrency,
    )
    assert len(stage.requests) == 32
    assert all(row.ok and row.error is None for row in stage.requests)
    assert {row.prompt_tokens for row in stage.requests} == {128}
    assert {row.output_tokens for row in stage.requests} == {64}
    # 64 tokens, one per event: 63 gaps each, AIPerf's inter_chunk_latency
    assert {len(row.itl_ms or ()) for row in stage.requests} == {63}
    assert stage.started_at_ns == min(row.sent_at_ns or 0 for row in stage.requests)
    assert run.started_at is not None
    assert run.started_at.timestamp() == pytest.approx(stage.started_at_ns / 1e9)
    assert [(f.name, f.size) for f in run.files] == [
        (RECORDS, len(files[RECORDS])),
        (SUMMARY, len(files[SUMMARY])),
    ]
    assert run.files[0].sha256 == hashlib.sha256(files[RECORDS]).hexdigest()


@pytest.mark.parametrize("level", ["c1", "c4"])
def test_percentiles_from_the_rows_match_what_aiperf_printed(level: str) -> None:
    [stage] = one_run(folder(level)).stages
    rows = stage.requests
    ttft = [row.ttft_ms for row in rows]
    e2e = [row.e2e_ms for row in rows]
    gaps = [gap for row in rows for gap in row.itl_ms or ()]
    for stat, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        assert np.percentile(ttft, q) == pytest.approx(figure(stage, "ttft", stat), abs=0.01)
        assert np.percentile(e2e, q) == pytest.approx(figure(stage, "e2e", stat), abs=0.01)
        assert np.percentile(gaps, q) == pytest.approx(figure(stage, "itl", stat), abs=0.01)
    assert np.mean(ttft) == pytest.approx(figure(stage, "ttft", "mean"), abs=0.01)
    # AIPerf's "inter token latency" is TPOT: (latency - TTFT) / (tokens - 1), per request
    tpot = [(row.e2e_ms - row.ttft_ms) / (row.output_tokens - 1) for row in rows]
    assert np.median(tpot) == pytest.approx(figure(stage, "tpot", "p50"), abs=0.01)
    assert stage.duration_s is not None
    # AIPerf divides by its phase's time, 9 ms longer than benchmark_duration here
    throughput = sum(row.output_tokens or 0 for row in rows) / stage.duration_s
    assert throughput == pytest.approx(figure(stage, "output_tokens_per_s", "rate"), rel=0.005)
    assert figure(stage, "output_tokens", "total") == 2048
    rate = figure(stage, "requests_per_s", "rate")
    assert rate == pytest.approx(32 / stage.duration_s, rel=0.005)


def test_the_printed_figures_are_those_of_the_console() -> None:
    [stage] = one_run(folder("c1")).stages
    # profile_export_console.txt: TTFT p50 51.92, p99 99.09; output 91.97 tokens/s
    assert figure(stage, "ttft", "p50") == pytest.approx(51.92, abs=0.005)
    assert figure(stage, "ttft", "p99") == pytest.approx(99.09, abs=0.005)
    assert figure(stage, "tpot", "mean") == pytest.approx(10.00, abs=0.005)
    assert figure(stage, "output_tokens_per_s", "rate") == pytest.approx(91.97, abs=0.005)
    assert {f.unit for f in stage.summary if f.figure in ("ttft", "itl", "tpot", "e2e")} == {"ms"}


def test_definition_notes_name_the_tools_fields() -> None:
    run = one_run(folder("c4"))
    notes = {note.figure: note.note for note in run.notes}
    assert set(notes) >= {"itl", "tpot", "e2e", "output_tokens", "prompt_tokens"}
    assert "inter_chunk_latency" in notes["itl"]
    assert "inter_token_latency" in notes["tpot"]
    assert "request_latency" in notes["e2e"]


def test_the_connection_a_request_opened_is_kept() -> None:
    [stage] = one_run(folder("c1")).stages
    # http_req_connection_reused: 0 for the first request only (its 14.75 ms connect)
    assert [row.connection_new for row in stage.requests].count(True) == 1
    assert stage.requests[0].connection_new is True
    assert stage.requests[0].request_id == "8ca9a6e8-e219-4ba5-82fa-9bb88f574713"
    assert stage.requests[0].sent_at_ns == 1796416147839743899


def test_the_records_alone_import_without_the_summary() -> None:
    files = {RECORDS: folder("c4")[RECORDS]}
    assert aiperf.recognises(files)
    run = one_run(files)
    assert run.per_request
    assert (run.tool_version, run.model, run.target) == (None, "", None)
    [stage] = run.stages
    assert (stage.load_kind, stage.label, stage.concurrency) == ("unknown", "aiperf run", None)
    assert len(stage.requests) == 32
    assert stage.summary == ()
    assert stage.duration_s is None


def test_the_summary_alone_imports_as_a_summary_only_run() -> None:
    files = {SUMMARY: folder("c4")[SUMMARY]}
    run = one_run(files)
    assert not run.per_request
    assert run.started_at is None  # AIPerf's start_time has no time zone
    [stage] = run.stages
    assert stage.requests == ()
    assert stage.concurrency == 4
    assert figure(stage, "ttft", "p50") == pytest.approx(53.48, abs=0.005)
    assert stage.duration_s == pytest.approx(5.67861888)


def test_a_custom_export_prefix_is_read() -> None:
    source = folder("c1")
    files = {"mine.jsonl": source[RECORDS], "mine_aiperf.json": source[SUMMARY]}
    run = one_run(files)
    assert run.per_request
    assert len(run.stages[0].summary) > 0


def test_error_and_cancelled_records_are_failed_rows_with_their_message() -> None:
    records = lines("c1")[:3]
    records[1]["metrics"] = {"error_isl": {"value": 128, "unit": "tokens"}}
    records[1]["error"] = {"code": 500, "type": "HTTPError", "message": "upstream boom"}
    records[2]["metrics"] = None
    records[2]["metadata"]["was_cancelled"] = True
    [stage] = one_run({RECORDS: jsonl(records)}).stages
    first, failed, cancelled = stage.requests
    assert first.ok
    assert not failed.ok
    assert failed.error == "HTTPError (500): upstream boom"
    assert (failed.ttft_ms, failed.itl_ms, failed.output_tokens) == (None, None, None)
    assert failed.sent_at_ns == records[1]["metadata"]["request_start_ns"]
    assert not cancelled.ok
    assert cancelled.error == "cancelled"


def test_warm_up_records_are_left_out_as_aiperf_does() -> None:
    records = lines("c1")[:4]
    records[0]["metadata"]["benchmark_phase"] = "warmup"
    [stage] = one_run({RECORDS: jsonl(records)}).stages
    assert len(stage.requests) == 3


def test_a_unit_in_seconds_is_converted_and_an_unknown_unit_refused() -> None:
    records = lines("c1")[:1]
    records[0]["metrics"]["time_to_first_token"] = {"value": 0.05, "unit": "sec"}
    [stage] = one_run({RECORDS: jsonl(records)}).stages
    assert stage.requests[0].ttft_ms == pytest.approx(50.0)
    records[0]["metrics"]["time_to_first_token"] = {"value": 5, "unit": "fortnights"}
    with pytest.raises(ImportFormatError, match="fortnights") as caught:
        one_run({RECORDS: jsonl(records)})
    assert caught.value.where == f"{RECORDS} line 1: metrics.time_to_first_token"


def test_a_truncated_records_file_names_its_last_line() -> None:
    data = folder("c1")[RECORDS]
    with pytest.raises(ImportFormatError, match="not JSON") as caught:
        one_run({RECORDS: data[: len(data) - 500]})
    assert caught.value.where == f"{RECORDS} line 32"


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda r: r["metadata"].update(request_start_ns="soon"), "metadata.request_start_ns"),
        (lambda r: r["metadata"].update(request_start_ns=1.5e18), "metadata.request_start_ns"),
        (lambda r: r["metadata"].update(request_start_ns=10**30), "metadata.request_start_ns"),
        (lambda r: r.update(metrics=[1, 2]), "metrics"),
        (lambda r: r.update(metadata="x"), "metadata"),
        (
            lambda r: r["metrics"].update(inter_chunk_latency={"value": "fast", "unit": "ms"}),
            "metrics.inter_chunk_latency.value",
        ),
        (
            lambda r: r["metrics"].update(request_latency={"value": -3.0, "unit": "ms"}),
            "metrics.request_latency",
        ),
        (
            lambda r: r["metrics"].update(usage_completion_tokens={"value": 6.5, "unit": "tokens"}),
            "metrics.usage_completion_tokens.value",
        ),
    ],
)
def test_a_wrong_field_is_refused_with_its_line_and_path(change, where: str) -> None:
    records = lines("c1")[:2]
    change(records[1])
    with pytest.raises(ImportFormatError) as caught:
        one_run({RECORDS: jsonl(records)})
    assert caught.value.where is not None
    assert caught.value.where.startswith(f"{RECORDS} line 2")
    assert caught.value.where.endswith(where)


def test_a_huge_integer_is_refused_not_a_traceback() -> None:
    records = lines("c1")[:1]
    records[0]["metrics"]["usage_prompt_tokens"] = {"value": 10**400, "unit": "tokens"}
    with pytest.raises(ImportFormatError, match="out of range"):
        one_run({RECORDS: jsonl(records)})


def test_an_unknown_summary_schema_is_refused_naming_the_one_read() -> None:
    summary = json.loads(folder("c1")[SUMMARY])
    summary["schema_version"] = "2.0"
    with pytest.raises(ImportFormatError, match=r"'2\.0'.*expected 1\.4") as caught:
        one_run({SUMMARY: json.dumps(summary).encode()})
    assert caught.value.where == f"{SUMMARY}: schema_version"


def test_a_summary_of_the_wrong_shape_is_refused_with_its_field() -> None:
    summary = json.loads(folder("c1")[SUMMARY])
    summary["time_to_first_token"]["p50"] = "fast"
    with pytest.raises(ImportFormatError) as caught:
        one_run({SUMMARY: json.dumps(summary).encode()})
    assert caught.value.where == f"{SUMMARY}: time_to_first_token.p50"
    summary = json.loads(folder("c1")[SUMMARY])
    summary["input_config"]["phases"] = {"kind": "profiling"}
    with pytest.raises(ImportFormatError, match="expected a list"):
        one_run({SUMMARY: json.dumps(summary).encode()})


def test_absurd_nesting_is_refused() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ImportFormatError, match="nested deeper"):
        one_run({RECORDS: ('{"metadata": ' + deep + "}").encode()})
    with pytest.raises(ImportFormatError, match="nested deeper"):
        one_run({SUMMARY: deep.encode()})


def test_two_runs_in_one_folder_and_no_result_are_refused() -> None:
    source = folder("c1")
    with pytest.raises(ImportFormatError, match="one run's folder at a time"):
        one_run({SUMMARY: source[SUMMARY], "other_aiperf.json": source[SUMMARY]})
    with pytest.raises(ImportFormatError, match="no profiling record"):
        one_run({RECORDS: b"\n\n"})
    assert not aiperf.recognises({"profile_export_console.txt": b""})
    with pytest.raises(ImportFormatError, match=r"expected profile_export\.jsonl"):
        aiperf.runs_in({"profile_export_console.txt": b""})
