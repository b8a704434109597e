"""The vLLM serving benchmark importer, on the real ``vllm bench serve`` 0.30.0 result files
of tests/data/imports/vllm-bench (tokenbench's simulator: 50 ms to the first token, 10 ms
between tokens, a role-only first event), and on files made wrong from them."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pytest

from analytics.imports import tools, vllm_bench
from analytics.imports.errors import ImportFormatError
from analytics.imports.model import ImportedRun, ImportedStage
from tests.support.paths import REPO

DATA = REPO / "tests" / "data" / "imports" / "vllm-bench" / "0.30.0"
# What --save-detailed adds; a result without them has only the summary.
DETAILED = (
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "start_times",
    "generated_texts",
    "errors",
)


def _folder() -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in DATA.iterdir()}


def _doc(concurrency: int = 1) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / f"vllm-bench-c{concurrency}.json").read_bytes())
    return doc


def _one(doc: Any, name: str = "result.json") -> ImportedRun:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    runs = vllm_bench.runs_in({name: data})
    assert len(runs) == 1
    return runs[0]


def _figure(stage: ImportedStage, figure: str, stat: str) -> float:
    (value,) = [f.value for f in stage.summary if f.figure == figure and f.stat == stat]
    return value


# ------------------------------------------------------------------------ the real files


def test_each_result_file_is_a_run_of_one_stage_at_its_concurrency() -> None:
    files = _folder()
    assert tools.detect(files) == "vllm-bench"
    runs = tools.runs_in(files)  # README.md and console-*.txt are not results
    assert [(r.files[0].name, r.stages[0].concurrency) for r in runs] == [
        ("vllm-bench-c1.json", 1),
        ("vllm-bench-c4.json", 4),
    ]
    for run in runs:
        (stage,) = run.stages
        assert (run.tool, run.tool_version, run.model) == ("vllm-bench", None, "simulated")
        assert run.format == vllm_bench.SERVE and run.per_request and run.started_at is None
        assert stage.load_kind == "concurrency" and stage.rate_per_s is None
        assert stage.label == f"concurrency {stage.concurrency}"
        assert len(stage.requests) == 32 and all(r.ok for r in stage.requests)
        assert sum(r.prompt_tokens or 0 for r in stage.requests) == 4100
        assert {r.output_tokens for r in stage.requests} == {64}
        assert all(r.sent_at_ns is None for r in stage.requests)  # perf_counter stamps only
    assert runs[0].stages[0].duration_s == pytest.approx(21.9014, abs=1e-3)


def test_rows_give_back_the_percentiles_vllm_printed() -> None:
    for concurrency in (1, 4):
        (stage,) = _one(_doc(concurrency)).stages
        assert all(r.ttft_ms is not None and r.e2e_ms is not None for r in stage.requests)
        ttft = [r.ttft_ms or 0.0 for r in stage.requests]
        gaps = [g for r in stage.requests for g in r.itl_ms or ()]
        e2e = [r.e2e_ms or 0.0 for r in stage.requests]
        for q in (50, 90, 99):
            assert np.percentile(ttft, q) == pytest.approx(_figure(stage, "ttft", f"p{q}"))
            assert np.percentile(gaps, q) == pytest.approx(_figure(stage, "itl", f"p{q}"))
            assert np.percentile(e2e, q) == pytest.approx(_figure(stage, "e2e", f"p{q}"))
        assert np.std(ttft) == pytest.approx(_figure(stage, "ttft", "std"))


def test_the_role_only_first_event_shows_in_ttft_and_the_first_gap() -> None:
    (stage,) = _one(_doc(1)).stages
    # vLLM's first token is the simulator's role-only event: TTFT of a few ms, and the
    # ~50 ms to the first real token is the first "inter-token" gap.
    assert _figure(stage, "ttft", "p50") == pytest.approx(2.396, abs=1e-3)
    assert all((r.ttft_ms or 0) < 15 for r in stage.requests)
    # TTFT plus the first gap: the simulator's 50 ms to the first content token
    assert all(50 < (r.ttft_ms or 0) + (r.itl_ms or ())[0] < 70 for r in stage.requests)
    # 65 gaps for 64 tokens: the last one is to the event carrying only the finish reason.
    assert {len(r.itl_ms or ()) for r in stage.requests} == {65}
    for request in stage.requests:  # latency = TTFT + all gaps
        assert request.e2e_ms == pytest.approx((request.ttft_ms or 0) + sum(request.itl_ms or ()))
    notes = {n.figure: n.note for n in _one(_doc(1)).notes}
    assert set(notes) == {"ttft", "itl", "tpot", "e2e", "output_tokens", "prompt_tokens"}
    assert "role-only" in notes["ttft"] and "ttfts" in notes["ttft"]


def test_summary_figures_as_printed() -> None:
    (stage,) = _one(_doc(4)).stages
    assert _figure(stage, "output_tokens_per_s", "rate") == pytest.approx(372.37, abs=0.01)
    assert _figure(stage, "output_tokens_per_s", "max") == 391.0
    assert _figure(stage, "requests_per_s", "rate") == pytest.approx(5.82, abs=0.01)
    assert _figure(stage, "prompt_tokens", "total") == 4100
    assert _figure(stage, "tpot", "mean") == pytest.approx(10.81, abs=0.01)
    assert _figure(stage, "ttft", "p99") == pytest.approx(12.35, abs=0.01)
    # median_* and p50_* are one figure, kept once
    assert [f.stat for f in stage.summary if f.figure == "e2e"] == [
        "mean",
        "std",
        "p50",
        "p90",
        "p99",
    ]
    assert {f.unit for f in stage.summary if f.figure in ("ttft", "itl", "tpot", "e2e")} == {"ms"}


def test_files_are_named_with_their_digest() -> None:
    data = (DATA / "vllm-bench-c1.json").read_bytes()
    (file,) = _one(data, "vllm-bench-c1.json").files
    assert (file.name, file.size) == ("vllm-bench-c1.json", len(data))
    assert file.sha256 == hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------ other shapes


def test_without_save_detailed_only_the_summary() -> None:
    doc = {k: v for k, v in _doc(1).items() if k not in DETAILED}
    run = _one(doc)
    assert not run.per_request and run.stages[0].requests == ()
    assert _figure(run.stages[0], "ttft", "p99") == pytest.approx(12.15, abs=0.01)
    assert len(run.notes) == 6


def test_the_older_benchmark_serving_format() -> None:
    doc = _doc(1)
    for key in ("failed", "latencies", "start_times", "queue_times", "endpoint_type", "label"):
        del doc[key]
    doc["request_goodput:"] = doc.pop("request_goodput")  # that script's own spelling
    run = _one(doc)
    assert run.format == vllm_bench.LEGACY and run.tool_version is None
    (stage,) = run.stages
    assert all(r.ok and r.e2e_ms is None and r.ttft_ms for r in stage.requests)
    assert "e2e" not in {n.figure for n in run.notes}
    assert "changed between vLLM versions" in next(n.note for n in run.notes if n.figure == "ttft")


def test_failed_requests_keep_their_error_and_no_timing() -> None:
    doc = _doc(1)
    for i, error in ((3, "Internal Server Error"), (5, "")):
        doc["errors"][i], doc["latencies"][i], doc["ttfts"][i] = error, 0.0, 0.0
        doc["itls"][i], doc["output_lens"][i] = [], 0
    requests = _one(doc).stages[0].requests
    assert [i for i, r in enumerate(requests) if not r.ok] == [3, 5]
    assert requests[3].error == "Internal Server Error"
    assert requests[5].error == "failed (vLLM saved no reason)"
    assert (requests[3].ttft_ms, requests[3].itl_ms, requests[3].output_tokens) == (
        None,
        None,
        None,
    )
    assert requests[3].prompt_tokens == 128


@pytest.mark.parametrize(
    ("rate", "concurrency", "kind", "label"),
    [
        (2.5, None, "rate", "rate 2.5/s"),
        (2.5, 8, "rate", "rate 2.5/s, concurrency 8"),
        ("inf", None, "throughput", "all requests at once"),
    ],
)
def test_the_load_the_file_names(rate: Any, concurrency: Any, kind: str, label: str) -> None:
    doc = _doc(1) | {"request_rate": rate, "max_concurrency": concurrency}
    (stage,) = _one(doc).stages
    assert (stage.load_kind, stage.label, stage.concurrency) == (kind, label, concurrency)
    assert stage.rate_per_s == (None if rate == "inf" else rate)


def test_append_result_files_hold_a_run_a_line() -> None:
    lines = [json.dumps(_doc(1)), json.dumps(_doc(4))]
    runs = vllm_bench.runs_in({"all.json": "\n".join(lines).encode()})
    assert [r.stages[0].concurrency for r in runs] == [1, 4]


def test_what_is_not_a_result_is_left_alone() -> None:
    files = _folder() | {"x.pytorch.json": b"[]", "notes.txt": b"{"}
    assert len(vllm_bench.runs_in(files)) == 2
    assert not vllm_bench.recognises({"notes.txt": b"{}", "config.json": b'{"a": 1}'})
    inference_perf = REPO / "tests" / "data" / "imports" / "inference-perf" / "0.7.0" / "reports"
    assert not vllm_bench.recognises({p.name: p.read_bytes() for p in inference_perf.iterdir()})


# ------------------------------------------------------------------------ malformed, hostile


def _refused(doc: Any) -> str:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    with pytest.raises(ImportFormatError) as caught:
        vllm_bench.runs_in({"r.json": data})
    return str(caught.value)


def test_a_truncated_file_names_its_line() -> None:
    data = json.dumps(_doc(1), indent=1).encode()
    message = _refused(data[: len(data) // 2])
    assert message.startswith("r.json line ") and "not JSON" in message


def test_missing_keys_are_named_with_the_format_expected() -> None:
    doc = _doc(1)
    del doc["duration"], doc["completed"]
    message = _refused(doc)
    assert "no duration, completed" in message and "vllm bench serve" in message
    assert "benchmark_serving.py" in message
    assert "not a vLLM serving benchmark result" in _refused({"a": 1})
    assert "expected an object" in _refused([1, 2])


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"ttfts": "fast"}, "r.json: ttfts"),
        ({"max_concurrency": -1}, "r.json: max_concurrency"),
        ({"max_concurrency": 1.5}, "r.json: max_concurrency"),
        ({"duration": "long"}, "r.json: duration"),
        ({"request_rate": -2}, "r.json: request_rate"),
        ({"model_id": 7}, "r.json: model_id"),
        ({"p99_ttft_ms": "slow"}, "r.json: p99_ttft_ms"),
    ],
)
def test_wrong_types_are_refused_where_they_are(change: dict[str, Any], where: str) -> None:
    assert _refused(_doc(1) | change).startswith(where)


def test_per_request_lists_are_checked_entry_by_entry() -> None:
    doc = _doc(1)
    doc["itls"][2][7] = "x"
    assert _refused(doc).startswith("r.json: itls[2][7]")
    doc = _doc(1)
    doc["latencies"] = doc["latencies"][:-1]
    assert "31 entries for the 32 requests of ttfts" in _refused(doc)
    doc = _doc(1)
    doc["input_lens"][0] = -4
    assert _refused(doc).startswith("r.json: input_lens[0]")
    doc = _doc(1)
    del doc["itls"]
    assert "without itls" in _refused(doc)


def test_absurd_depth_is_refused() -> None:
    deep = b'{"date": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert "nested deeper than" in _refused(deep)
