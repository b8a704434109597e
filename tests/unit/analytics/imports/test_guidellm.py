"""GuideLLM importer on GuideLLM 0.8.1's real benchmarks.json (tests/data/imports/
guidellm/0.8.1: the simulator at concurrency 1 and 4, 20 requests each), failed and
sampled requests, the 0.2-0.3 layout, and malformed or hostile files."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analytics.imports import guidellm, tools
from analytics.imports.errors import ImportFormatError
from analytics.imports.model import ImportedRun, ImportedStage

DATA = Path(__file__).resolve().parents[4] / "tests" / "data" / "imports" / "guidellm" / "0.8.1"
FILE = "benchmarks.json"


def report(level: str) -> dict[str, Any]:
    return json.loads((DATA / level / FILE).read_bytes())


def one_run(document: dict[str, Any] | bytes) -> ImportedRun:
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    runs = tools.runs_in({FILE: data}, "guidellm")
    assert len(runs) == 1
    return runs[0]


def figure(stage: ImportedStage, name: str, stat: str) -> float:
    found = [f.value for f in stage.summary if f.figure == name and f.stat == stat]
    assert len(found) == 1, (name, stat)
    return found[0]


@pytest.mark.parametrize(("level", "streams"), [("c1", 1), ("c4", 4)])
def test_a_report_imports_one_stage_per_benchmark(level: str, streams: int) -> None:
    files = {path.name: path.read_bytes() for path in (DATA / level).iterdir()}
    assert tools.detect(files) == "guidellm"
    run = tools.runs_in(files)[0]
    assert (run.tool, run.tool_version, run.model) == ("guidellm", "0.8.1", "simulated")
    assert run.target == "http://127.0.0.1:8765"
    assert run.format == "guidellm benchmarks.json (report schema 2)"
    assert run.per_request
    [stage] = run.stages
    assert (stage.label, stage.load_kind, stage.concurrency) == (
        f"concurrent {streams}",
        "concurrency",
        streams,
    )
    assert len(stage.requests) == 20
    assert all(row.ok for row in stage.requests)
    assert {(row.prompt_tokens, row.output_tokens) for row in stage.requests} == {(128, 64)}
    assert all(row.itl_ms is None for row in stage.requests)  # GuideLLM keeps no gaps
    assert stage.started_at_ns is not None
    assert min(row.sent_at_ns or 0 for row in stage.requests) >= stage.started_at_ns
    assert [(f.name, f.size) for f in run.files] == [(FILE, len(files[FILE]))]


@pytest.mark.parametrize("level", ["c1", "c4"])
def test_percentiles_from_the_rows_match_what_guidellm_printed(level: str) -> None:
    [stage] = one_run(report(level)).stages
    ttft = [row.ttft_ms for row in stage.requests]
    e2e = [row.e2e_ms for row in stage.requests]
    # GuideLLM takes its percentiles without interpolation: within a sample's spacing
    assert np.median(ttft) == pytest.approx(figure(stage, "ttft", "p50"), abs=1.0)
    assert np.median(e2e) == pytest.approx(figure(stage, "e2e", "p50"), abs=1.0)
    assert max(ttft) == pytest.approx(figure(stage, "ttft", "max"))
    assert np.mean(e2e) == pytest.approx(figure(stage, "e2e", "mean"), abs=1e-6)
    assert np.mean(ttft) == pytest.approx(figure(stage, "ttft", "mean"), abs=1e-6)
    assert stage.duration_s is not None
    throughput = sum(row.output_tokens or 0 for row in stage.requests) / stage.duration_s
    assert throughput == pytest.approx(figure(stage, "output_tokens_per_s", "rate"), rel=0.01)
    assert figure(stage, "output_tokens", "total") == 1280


def test_the_printed_figures_are_guidellms() -> None:
    [stage] = one_run(report("c4")).stages
    # README: TTFT p50 54.6, p99 73.1, 370.1 output tokens/s (its "Server Throughput")
    assert figure(stage, "ttft", "p50") == pytest.approx(54.62, abs=0.01)
    assert figure(stage, "ttft", "p99") == pytest.approx(73.08, abs=0.01)
    assert figure(stage, "output_tokens_per_s", "rate") == pytest.approx(370.08, abs=0.01)
    assert figure(stage, "e2e", "p50") == pytest.approx(683.12, abs=0.01)  # seconds to ms
    assert figure(stage, "tpot", "p50") == pytest.approx(9.98, abs=0.01)
    assert {f.unit for f in stage.summary if f.figure in ("ttft", "tpot", "e2e")} == {"ms"}
    assert not [f for f in stage.summary if f.figure == "itl"]


def test_definition_notes_name_the_tools_fields() -> None:
    notes = {note.figure: note.note for note in one_run(report("c1")).notes}
    assert set(notes) >= {"start", "tpot", "itl", "output_tokens", "prompt_tokens"}
    assert "time.time()" in notes["start"]
    assert "inter_token_latency_ms" in notes["tpot"]
    assert "tokenizer" in notes["output_tokens"]


def test_errored_and_incomplete_requests_are_failed_rows() -> None:
    document = report("c4")
    bench = document["benchmarks"][0]
    successful = bench["requests"]["successful"]
    failed = successful.pop()
    failed["info"]["error"] = "ReadTimeout: the server stopped answering"
    cut = successful.pop()
    cut["info"]["status"] = "cancelled"
    bench["requests"]["errored"] = [failed]
    bench["requests"]["incomplete"] = [cut]
    [stage] = one_run(document).stages
    assert len(stage.requests) == 20
    assert [row.ok for row in stage.requests].count(False) == 2
    assert stage.requests[-2].error == "ReadTimeout: the server stopped answering"
    assert stage.requests[-1].error == "cancelled"
    assert stage.requests[-2].request_id == failed["request_id"]


def test_sampled_requests_import_as_the_summary_only() -> None:
    document = report("c1")
    del document["benchmarks"][0]["requests"]["successful"][5:]
    run = one_run(document)
    assert not run.per_request
    [stage] = run.stages
    assert stage.requests == ()
    assert figure(stage, "ttft", "p50") == pytest.approx(52.45, abs=0.01)


def test_several_benchmarks_are_several_stages_with_their_strategy() -> None:
    document = report("c1")
    rate = copy.deepcopy(document["benchmarks"][0])
    rate["config"]["strategy"] = {"type_": "poisson", "rate": 2.5, "max_concurrency": None}
    sync = copy.deepcopy(document["benchmarks"][0])
    sync["config"]["strategy"] = {"type_": "synchronous"}
    document["benchmarks"] += [rate, sync]
    stages = one_run(document).stages
    assert [(s.index, s.label, s.load_kind) for s in stages] == [
        (0, "concurrent 1", "concurrency"),
        (1, "poisson 2.5/s", "rate"),
        (2, "synchronous", "concurrency"),
    ]
    assert stages[1].rate_per_s == 2.5
    assert stages[2].concurrency == 1


def legacy_report() -> dict[str, Any]:
    """A benchmarks.json of the 0.2-0.3 layout, its fields as GuideLLM's source of
    that layout defines them (guidellm/benchmark/benchmark.py) and as a published 0.3
    file shows them; the request times are one such file's."""
    ok = {
        "type_": "generative_text_response",
        "request_id": "f90f365b-16a7-4ce3-8a53-8d37c71458a3",
        "request_type": "text_completions",
        "prompt_tokens": 8,
        "output_tokens": 16,
        "start_time": 1759354691.7182198,
        "end_time": 1759354695.648075,
        "first_token_time": 1759354692.9827628,
        "last_token_time": 1759354695.6479197,
        "request_latency": 3.9298553466796875,
        "time_to_first_token_ms": 1264.543056488037,
        "inter_token_latency_ms": 177.67712275187174,
    }
    error = {
        **ok,
        "type_": "generative_text_error",
        "request_id": "e2",
        "error": "HTTPStatusError: 503",
        "first_token_time": None,
        "time_to_first_token_ms": None,
    }
    ttft = {"mean": 1264.5, "median": 1264.5, "std_dev": 0.0, "min": 1264.5, "max": 1264.5}
    ttft["percentiles"] = {"p90": 1264.5, "p95": 1264.5, "p99": 1264.5}
    return {
        "benchmarks": [
            {
                "type_": "generative_benchmark",
                "args": {"strategy": {"type_": "constant", "rate": 2.0}},
                "worker": {"backend_model": "llama-3.2-1b", "backend_target": "http://x:8000"},
                "start_time": 1759354691.7182198,
                "end_time": 1759354695.648075,
                "metrics": {"time_to_first_token_ms": {"successful": ttft}},
                "request_totals": {"successful": 1, "errored": 1, "incomplete": 0, "total": 2},
                "requests": {"successful": [ok], "errored": [error], "incomplete": []},
            }
        ]
    }


def test_the_0_3_layout_is_read() -> None:
    run = one_run(legacy_report())
    assert run.format == "guidellm benchmarks.json (0.2-0.3 layout)"
    assert (run.tool_version, run.model, run.target) == (None, "llama-3.2-1b", "http://x:8000")
    [stage] = run.stages
    assert (stage.label, stage.load_kind, stage.rate_per_s) == ("constant 2/s", "rate", 2.0)
    ok, failed = stage.requests
    assert ok.ok
    assert ok.sent_at_ns == round(1759354691.7182198 * 1e9)
    assert ok.ttft_ms == pytest.approx(1264.543056488037)
    assert ok.e2e_ms == pytest.approx(3929.8553466796875)
    assert (ok.prompt_tokens, ok.output_tokens) == (8, 16)
    assert not failed.ok
    assert failed.error == "HTTPStatusError: 503"
    assert failed.ttft_ms is None
    assert figure(stage, "ttft", "p50") == 1264.5


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["metadata"].update(version=1), r"schema version 1 .*expected"),
        (lambda d: d["metadata"].update(version="3"), r"schema version '3'"),
    ],
)
def test_another_schema_version_is_refused_naming_the_ones_read(change, message: str) -> None:
    document = report("c1")
    change(document)
    with pytest.raises(ImportFormatError, match=message) as caught:
        one_run(document)
    assert caught.value.where == f"{FILE}: metadata.version"
    assert "GuideLLM 0.8" in caught.value.reason


def test_guidellm_0_4s_layout_is_refused() -> None:
    with pytest.raises(ImportFormatError, match=r"0\.4's layout"):
        one_run({"args": {"profile": "sweep"}, "benchmarks": []})


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda b: b.update(requests=[]), "benchmarks[0].requests"),
        (lambda b: b["config"].update(strategy="fast"), "benchmarks[0].config.strategy"),
        (
            lambda b: b["requests"]["successful"][3]["info"]["timings"].update(request_start="x"),
            "benchmarks[0].requests.successful[3].info.timings.request_start",
        ),
        (
            lambda b: b["requests"]["successful"][3]["info"]["timings"].update(request_start=1e300),
            "benchmarks[0].requests.successful[3].info.timings.request_start",
        ),
        (
            lambda b: b["requests"]["successful"][0].update(output_tokens=-4),
            "benchmarks[0].requests.successful[0].output_tokens",
        ),
        (
            lambda b: b["requests"]["successful"][0].update(request_latency=-0.5),
            "benchmarks[0].requests.successful[0].request_latency",
        ),
        (
            lambda b: b["metrics"]["time_to_first_token_ms"]["successful"].update(mean=[1]),
            "benchmarks[0].metrics.time_to_first_token_ms.successful.mean",
        ),
        (lambda b: b.update(metrics=None), "benchmarks[0].metrics"),
    ],
)
def test_a_wrong_field_is_refused_with_its_path(change, where: str) -> None:
    document = report("c1")
    change(document["benchmarks"][0])
    with pytest.raises(ImportFormatError) as caught:
        one_run(document)
    assert caught.value.where == f"{FILE}: {where}"


def test_a_truncated_file_names_its_line() -> None:
    data = (DATA / "c1" / FILE).read_bytes()
    with pytest.raises(ImportFormatError, match="not JSON") as caught:
        one_run(data[: len(data) // 2])
    assert caught.value.where is not None
    assert caught.value.where.startswith(f"{FILE} line ")


def test_absurd_nesting_and_a_non_report_are_refused() -> None:
    with pytest.raises(ImportFormatError, match="nested deeper"):
        one_run(("[" * 100_000 + "]" * 100_000).encode())
    with pytest.raises(ImportFormatError, match="expected an object"):
        one_run(b"[1, 2]")
    with pytest.raises(ImportFormatError, match="expected a list"):
        one_run({"benchmarks": {"0": {}}})
    with pytest.raises(ImportFormatError, match="no benchmark"):
        one_run({"benchmarks": []})
    assert not guidellm.recognises({"scenario.json": b"{}"})
