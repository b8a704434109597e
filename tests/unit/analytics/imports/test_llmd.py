"""The llm-d benchmark report importer on hand-written reports made to llm-d's schema
(tests/data/imports/llmd/*/README.md: llm-d-benchmark cannot run here), and on broken,
hostile and other tools' files."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import pytest

from analytics.imports import llmd
from analytics.imports.errors import ImportFormatError
from analytics.imports.model import ImportedRun, ImportedStage
from analytics.imports.tools import detect, runs_in
from scenarios.limits import MAX_IMPORT_JSON_DEPTH

DATA = Path(__file__).parents[3] / "data" / "imports"
V02 = DATA / "llmd" / "0.2"
V01 = DATA / "llmd" / "0.1"
STAGE_0 = "benchmark_report_v0.2_stage_0.yaml"
STAGE_1 = "benchmark_report_v0.2_stage_1.yaml"
V01_NAME = "benchmark_report,_stage_0_lifecycle_metrics.json"


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix != ".md"}


def _figure(stage: ImportedStage, figure: str, stat: str) -> float:
    (value,) = [f.value for f in stage.summary if f.figure == figure and f.stat == stat]
    return value


def _only_run(files: dict[str, bytes]) -> ImportedRun:
    (run,) = runs_in(files, "llmd")
    return run


def test_a_0_2_experiment_is_one_run_with_a_stage_per_report() -> None:
    files = _files(V02)
    assert detect(files) == "llmd"
    run = _only_run(files)
    assert (run.tool, run.tool_version, run.per_request) == ("llmd", "0.3.0", False)
    assert run.format == "llm-d benchmark report 0.2, harness inference-perf"
    assert (run.model, run.target) == ("Qwen/Qwen3-0.6B", "vllm-decode-0")
    assert run.started_at == dt.datetime(2026, 3, 2, 10, 15, tzinfo=dt.UTC)
    assert [(s.index, s.label, s.load_kind, s.rate_per_s) for s in run.stages] == [
        (0, "stage 0", "rate", 2.0),
        (1, "stage 1", "rate", 5.0),
    ]
    assert all(s.requests == () and s.concurrency is None for s in run.stages)
    assert [f.name for f in run.files] == [STAGE_0, STAGE_1]
    digest = hashlib.sha256(files[STAGE_0]).hexdigest()
    assert (run.files[0].sha256, run.files[0].size) == (digest, len(files[STAGE_0]))


def test_seconds_become_milliseconds_and_rates_stay_per_second() -> None:
    first, second = _only_run(_files(V02)).stages
    assert _figure(first, "ttft", "p50") == pytest.approx(40.5)
    assert _figure(first, "ttft", "p999") == pytest.approx(60.1)  # llm-d's p99p9
    assert _figure(first, "ttft", "std") == pytest.approx(5.1)
    assert _figure(first, "itl", "p99") == pytest.approx(9.3)  # s/token → ms
    assert _figure(first, "tpot", "mean") == pytest.approx(6.2)
    assert _figure(first, "e2e", "p90") == pytest.approx(1387.7)
    assert _figure(first, "output_tokens", "mean") == pytest.approx(199.4)
    assert _figure(first, "prompt_tokens", "p50") == 1000
    assert _figure(first, "output_tokens_per_s", "rate") == pytest.approx(398.1)
    assert _figure(second, "requests_per_s", "rate") == pytest.approx(4.9516)
    units = {(f.figure, f.unit) for f in first.summary}
    assert ("ttft", "ms") in units and ("requests_per_s", "requests/s") in units
    # The harness's percentiles, as printed, in order.
    for stage in (first, second):
        for figure in ("ttft", "itl", "tpot", "e2e"):
            points = [_figure(stage, figure, p) for p in ("p50", "p90", "p99")]
            assert points == sorted(points), figure
    # Figures with no tokenbench counterpart are not imported: NTPOT, input/total rates.
    assert len([f for f in first.summary if f.figure == "tpot" and f.stat == "mean"]) == 1


def test_every_harness_figure_gets_a_note_naming_the_harness() -> None:
    run = _only_run(_files(V02))
    notes = {n.figure: n.note for n in run.notes}
    assert set(notes) == {"ttft", "itl", "tpot", "e2e", "output_tokens_per_s", "requests_per_s"}
    assert all("inference-perf" in text for text in notes.values())
    assert "time_to_first_token" in notes["ttft"]


def test_a_0_1_report_in_json() -> None:
    files = _files(V01)
    assert detect(files) == "llmd"
    run = _only_run(files)
    assert run.format == "llm-d benchmark report 0.1, harness vllm-benchmark"
    assert (run.model, run.tool_version, run.target) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        None,
        None,
    )
    (stage,) = run.stages
    assert stage.label == "benchmark_report,_stage_0_lifecycle_metrics"
    assert (stage.load_kind, stage.duration_s) == ("unknown", 21.84)
    assert stage.started_at_ns == 1772446500250000000
    assert run.started_at == dt.datetime.fromtimestamp(1772446500.25, dt.UTC)
    assert _figure(stage, "ttft", "p99") == pytest.approx(131.7)
    assert _figure(stage, "tpot", "mean") == pytest.approx(20.12)
    assert _figure(stage, "itl", "p90") == pytest.approx(22.3)
    assert _figure(stage, "output_tokens_per_s", "rate") == pytest.approx(366.92)
    assert _figure(stage, "requests_per_s", "rate") == pytest.approx(2.8846)
    assert {n.figure for n in run.notes} >= {"ttft", "itl", "tpot"}


def test_with_both_format_lines_beside_each_other_only_0_2_is_read() -> None:
    run = _only_run({**_files(V01), **_files(V02)})
    assert run.format.startswith("llm-d benchmark report 0.2")
    assert len(run.stages) == 2


def test_reports_of_one_stage_are_told_apart_by_their_uid() -> None:
    files = _files(V02)
    twin = files[STAGE_1].replace(b"      stage: 1\n", b"      stage: 0\n")
    run = _only_run({STAGE_0: files[STAGE_0], STAGE_1: twin})
    assert [s.label for s in run.stages] == [
        "stage 0 (7f0c2d8e5b6a4e51a3c9d04b1e2f6a70)",
        "stage 0 (a41e6b7c9d2f4c08b5e1f3a2d6c8e901)",
    ]


def test_the_first_0_2_spelling_requests_rate_is_read() -> None:
    data = _files(V02)[STAGE_1].replace(b"        request_rate:", b"        requests_rate:")
    (stage,) = _only_run({STAGE_1: data}).stages
    assert _figure(stage, "requests_per_s", "rate") == pytest.approx(4.9516)


def test_a_yaml_float_version_still_names_it() -> None:
    data = _files(V02)[STAGE_0].replace(b"version: '0.2'", b"version: 0.2")
    assert _only_run({STAGE_0: data}).stages[0].label == "stage 0"


def test_an_unknown_version_is_refused_naming_the_ones_read() -> None:
    data = _files(V02)[STAGE_0].replace(b"version: '0.2'", b"version: '0.3'")
    assert llmd.recognises({STAGE_0: data})
    with pytest.raises(ImportFormatError) as caught:
        runs_in({STAGE_0: data}, "llmd")
    assert caught.value.where == f"{STAGE_0}: version"
    assert "'0.1', '0.2', '0.2.1'" in caught.value.reason


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        (
            b"          mean: 0.0412\n",
            b"          mean: fast\n",
            "results.request_performance.aggregate.latency.time_to_first_token.mean",
        ),
        (
            b"        time_to_first_token:\n          units: s\n",
            b"        time_to_first_token:\n          units: s/token\n",
            "results.request_performance.aggregate.latency.time_to_first_token.units",
        ),
        (
            b"        total: 120\n",
            b"        total: -3\n",
            "results.request_performance.aggregate.requests.total",
        ),
        (b"      stage: 0\n", b"      stage: [0]\n", "scenario.load.standardized.stage"),
        (b"run:\n", b"run: 7\nrun_was:\n", "run"),
    ],
)
def test_wrong_types_and_units_name_the_field(old: bytes, new: bytes, where: str) -> None:
    data = _files(V02)[STAGE_0]
    assert old in data
    with pytest.raises(ImportFormatError) as caught:
        runs_in({STAGE_0: data.replace(old, new, 1)}, "llmd")
    assert caught.value.where == f"{STAGE_0}: {where}"


def test_a_0_1_report_without_its_model_is_refused() -> None:
    doc = json.loads(_files(V01)[V01_NAME])
    del doc["scenario"]["model"]["name"]
    with pytest.raises(ImportFormatError) as caught:
        runs_in({V01_NAME: json.dumps(doc).encode()}, "llmd")
    assert caught.value.where == f"{V01_NAME}: scenario.model.name"


def test_a_truncated_report_is_refused_with_its_name() -> None:
    json_data = _files(V01)[V01_NAME]
    with pytest.raises(ImportFormatError) as caught:
        runs_in({V01_NAME: json_data[: len(json_data) // 2]}, "llmd")
    assert caught.value.where is not None and caught.value.where.startswith(f"{V01_NAME} line ")
    # YAML cut at a line end still parses: the report then lacks its results.
    yaml_data = _files(V02)[STAGE_0]
    cut = yaml_data[: yaml_data.index(b"results:")]
    with pytest.raises(ImportFormatError, match="not an llm-d benchmark report") as caught:
        runs_in({STAGE_0: cut}, "llmd")
    assert caught.value.where == STAGE_0


def test_absurd_nesting_is_refused() -> None:
    depth = MAX_IMPORT_JSON_DEPTH + 10
    deep = b'{"version": "0.2", "run": {"uid": "x"}, "results": ' + b"[" * depth + b"]" * depth
    with pytest.raises(ImportFormatError, match="nested deeper"):
        runs_in({"benchmark_report.json": deep + b"}"}, "llmd")
    assert not llmd.recognises({"benchmark_report.json": deep + b"}"})


@pytest.mark.parametrize("folder", ["aiperf/0.13.0/c1", "guidellm/0.8.1/c1"])
def test_other_tools_files_are_not_taken_for_reports(folder: str) -> None:
    files = _files(DATA / folder)
    assert files and not llmd.recognises(files)
    assert llmd.runs_in(files) == []
