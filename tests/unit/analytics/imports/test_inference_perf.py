"""The inference-perf importer, on the real 0.7.0 reports folder of
tests/data/imports/inference-perf (tokenbench's simulator, mock prompts, concurrency 1 then
4, 32 requests each), and on folders made wrong from it."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

import numpy as np
import pytest
import yaml

from analytics.imports import inference_perf, tools
from analytics.imports.errors import ImportFormatError
from analytics.imports.model import ImportedRun, ImportedStage
from tests.support.paths import REPO

DATA = REPO / "tests" / "data" / "imports" / "inference-perf" / "0.7.0" / "reports"
PER_REQUEST = "per_request_lifecycle_metrics.json"


def _folder() -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in DATA.iterdir()}


def _json(name: str) -> Any:
    return json.loads((DATA / name).read_bytes())


def _run(files: dict[str, bytes]) -> ImportedRun:
    (run,) = inference_perf.runs_in(files)
    return run


def _with(name: str, doc: Any, files: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """The folder with ``name`` replaced by ``doc`` (bytes as they are, else JSON/YAML)."""
    if not isinstance(doc, bytes):
        doc = (yaml.safe_dump(doc) if name.endswith(".yaml") else json.dumps(doc)).encode()
    return (files or _folder()) | {name: doc}


def _figure(stage: ImportedStage, figure: str, stat: str) -> float:
    (value,) = [f.value for f in stage.summary if f.figure == figure and f.stat == stat]
    return value


# ------------------------------------------------------------------------ the real folder


def test_a_reports_folder_is_one_run_with_a_stage_per_stage_file() -> None:
    files = _folder()
    assert tools.detect(files) == "inference-perf"
    (run,) = tools.runs_in(files)
    assert (run.tool, run.tool_version, run.format) == (
        "inference-perf",
        None,
        "inference-perf lifecycle reports",
    )
    assert (run.model, run.target) == ("simulated", "http://127.0.0.1:8765")
    assert run.started_at == dt.datetime(2026, 12, 4, 20, 36, 10, 719112, tzinfo=dt.UTC)
    assert run.per_request
    assert [(s.index, s.label, s.load_kind, s.concurrency, s.rate_per_s) for s in run.stages] == [
        (0, "stage_0", "concurrency", 1, None),
        (1, "stage_1", "concurrency", 4, None),
    ]
    assert run.stages[1].started_at_ns == 1_796_416_584_989_107_000  # 20:36:24.989107Z
    assert run.stages[0].duration_s == pytest.approx(11.0125, abs=1e-4)
    for stage in run.stages:
        assert len(stage.requests) == 32 and all(r.ok for r in stage.requests)
        assert {r.output_tokens for r in stage.requests} == {30}
        assert sum(r.prompt_tokens or 0 for r in stage.requests) == _figure(
            stage, "prompt_tokens", "total"
        )
    # validation.json and the run-wide summary are not what the run was read from
    assert [f.name for f in run.files] == [
        "stage_0_lifecycle_metrics.json",
        "stage_1_lifecycle_metrics.json",
        PER_REQUEST,
        "config.yaml",
        "inference-perf.partial.stage_0.yaml",
        "inference-perf.partial.stage_1.yaml",
    ]
    assert run.files[2].sha256 == hashlib.sha256(files[PER_REQUEST]).hexdigest()


def test_rows_give_back_the_percentiles_inference_perf_reported() -> None:
    for stage in _run(_folder()).stages:
        assert all(r.ttft_ms is not None and r.e2e_ms is not None for r in stage.requests)
        ttft = [r.ttft_ms or 0.0 for r in stage.requests]
        e2e = [r.e2e_ms or 0.0 for r in stage.requests]
        gaps = [g for r in stage.requests for g in r.itl_ms or ()]
        for q in (50, 90, 99):
            assert np.percentile(ttft, q) == pytest.approx(_figure(stage, "ttft", f"p{q}"))
            assert np.percentile(e2e, q) == pytest.approx(_figure(stage, "e2e", f"p{q}"))
            # no chunk re-tokenized to several tokens here: its gaps are the rows' gaps
            assert np.percentile(gaps, q) == pytest.approx(_figure(stage, "itl", f"p{q}"))
        assert len(gaps) == 32 * 29


def test_summary_figures_in_ms_and_tokens() -> None:
    stage = _run(_folder()).stages[0]
    assert _figure(stage, "ttft", "p50") == pytest.approx(51.133, abs=1e-3)  # a content token
    assert _figure(stage, "ttft", "p99.9") == pytest.approx(57.980, abs=1e-3)
    assert _figure(stage, "itl", "min") == pytest.approx(0.0872, abs=1e-4)
    assert _figure(stage, "output_tokens_per_s", "rate") == pytest.approx(87.17, abs=0.01)
    assert _figure(stage, "requests_per_s", "rate") == pytest.approx(2.906, abs=1e-3)
    assert _figure(stage, "output_tokens", "total") == 960
    assert {f.unit for f in stage.summary if f.figure == "ttft"} == {"ms"}
    assert not [f for f in stage.summary if f.stat in ("cached", "uncached", "median")]


def test_notes_say_what_differs_and_that_the_prompts_were_mock() -> None:
    notes = {n.figure: n.note for n in _run(_folder()).notes}
    assert set(notes) == {"ttft", "itl", "output_tokens", "tpot", "output_tokens_per_s", "workload"}
    assert "mock" in notes["workload"] and "inter_token_latency" in notes["itl"]
    config = yaml.safe_load((DATA / "config.yaml").read_bytes())
    config["data"]["type"] = "random"
    config["report"]["request_lifecycle"]["use_server_output_tokens"] = True
    figures = {n.figure for n in _run(_with("config.yaml", config)).notes}
    assert figures == {"ttft", "itl", "output_tokens"}


# ------------------------------------------------------------------------ other shapes


def test_without_per_request_rows_only_the_summaries() -> None:
    files = _folder()
    del files[PER_REQUEST]
    run = _run(files)
    assert not run.per_request and [len(s.requests) for s in run.stages] == [0, 0]
    assert _figure(run.stages[1], "ttft", "p99") == pytest.approx(58.25, abs=0.01)


def test_only_the_run_wide_summary_is_one_stage() -> None:
    files = _folder()
    del files["stage_0_lifecycle_metrics.json"], files["stage_1_lifecycle_metrics.json"]
    (stage,) = _run(files).stages
    assert (stage.label, stage.load_kind, len(stage.requests)) == ("all stages", "unknown", 64)
    assert stage.started_at_ns is not None  # stage 0's partial report


def test_chunks_of_several_tokens_are_one_event() -> None:
    rows = _json(PER_REQUEST)
    times = rows[0]["info"]["response_metrics"]["output_token_times"]
    times[5] = times[4]  # tokens 5 and 6 came in one chunk
    request = _run(_with(PER_REQUEST, rows)).stages[0].requests[0]
    assert len(request.itl_ms or ()) == 28 and 0.0 not in (request.itl_ms or ())


def test_a_failed_request_keeps_its_error() -> None:
    rows = _json(PER_REQUEST)
    rows[3]["error"] = {"error_type": "HTTP Error 500", "error_msg": "boom"}
    rows[3]["info"]["response_metrics"] = None
    request = _run(_with(PER_REQUEST, rows)).stages[0].requests[3]
    assert (request.ok, request.error) == (False, "HTTP Error 500: boom")
    assert (request.ttft_ms, request.output_tokens, request.prompt_tokens) == (None, None, 4)
    assert request.e2e_ms is not None


def test_the_model_from_the_request_body_when_there_is_no_config() -> None:
    files = _folder()
    del files["config.yaml"]
    run = _run(files)
    assert (run.model, run.target) == ("simulated", None)
    assert "workload" not in {n.figure for n in run.notes}


def test_other_tools_folders_are_not_recognised() -> None:
    vllm = REPO / "tests" / "data" / "imports" / "vllm-bench" / "0.30.0"
    assert not inference_perf.recognises({p.name: p.read_bytes() for p in vllm.iterdir()})
    assert inference_perf.runs_in({"config.yaml": b"a: 1"}) == []


# ------------------------------------------------------------------------ malformed, hostile


def _refused(files: dict[str, bytes]) -> str:
    with pytest.raises(ImportFormatError) as caught:
        inference_perf.runs_in(files)
    return str(caught.value)


def test_rows_that_do_not_match_the_stages_are_refused() -> None:
    rows = _json(PER_REQUEST)
    assert "63 requests, but the stage reports count 64" in _refused(_with(PER_REQUEST, rows[:-1]))
    stage = _json("stage_0_lifecycle_metrics.json")
    stage["load_summary"]["count"] = 31
    stages = _json("stage_1_lifecycle_metrics.json")
    stages["load_summary"]["count"] = 33
    files = _with(
        "stage_1_lifecycle_metrics.json", stages, _with("stage_0_lifecycle_metrics.json", stage)
    )
    assert "do not fall into the stages in order" in _refused(files)


def test_a_truncated_file_names_its_line() -> None:
    data = (DATA / PER_REQUEST).read_bytes()
    message = _refused(_with(PER_REQUEST, data[: len(data) // 3]))
    assert message.startswith(f"{PER_REQUEST} line ") and "not JSON" in message


def test_a_report_without_its_keys_names_the_format() -> None:
    stage = _json("stage_0_lifecycle_metrics.json")
    del stage["successes"]
    message = _refused(_with("stage_0_lifecycle_metrics.json", stage))
    assert message.startswith("stage_0_lifecycle_metrics.json: not an inference-perf")
    assert "no successes" in message and "0.7.0" in message


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        ((2, "start_time"), "soon", f"{PER_REQUEST}: [2].start_time"),
        (
            (2, "info", "response_metrics", "output_token_times"),
            "x",
            "[2].info.response_metrics.output_token_times",
        ),
        (
            (2, "info", "response_metrics", "server_usage", "completion_tokens"),
            -3,
            "[2].info.response_metrics",
        ),
        ((2, "info", "request_metrics", "text", "input_tokens"), 1.5, "[2].info.request_metrics"),
        ((2, "error"), "bad", f"{PER_REQUEST}: [2].error"),
        ((2,), [1], f"{PER_REQUEST}: [2]"),
    ],
)
def test_wrong_types_in_a_row_are_refused_where_they_are(
    path: tuple[Any, ...], value: Any, where: str
) -> None:
    rows = _json(PER_REQUEST)
    target = rows
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert where in _refused(_with(PER_REQUEST, rows))


def test_bad_stage_fields_are_refused() -> None:
    stage = _json("stage_1_lifecycle_metrics.json")
    stage["successes"]["latency"]["time_to_first_token"]["p99"] = "slow"
    assert "successes.latency.time_to_first_token.p99" in _refused(
        _with("stage_1_lifecycle_metrics.json", stage)
    )
    stage = _json("stage_1_lifecycle_metrics.json")
    stage["load_summary"]["concurrency"] = -4
    assert "load_summary.concurrency" in _refused(_with("stage_1_lifecycle_metrics.json", stage))


def test_a_stage_start_must_be_a_zoned_time() -> None:
    name = "inference-perf.partial.stage_0.yaml"
    partial = yaml.safe_load((DATA / name).read_bytes())
    partial["run"]["time"]["start"] = "2026-12-04T20:36:10"
    assert "no zone" in _refused(_with(name, partial))
    partial["run"]["time"]["start"] = "yesterday"
    assert _refused(_with(name, partial)).startswith(f"{name}: run.time.start: not a time")
    assert "not YAML" in _refused(_with(name, b"run: [unclosed"))


def test_absurd_depth_is_refused() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    assert "nested deeper than" in _refused(_with(PER_REQUEST, deep))
