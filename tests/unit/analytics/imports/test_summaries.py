"""The tools' printed figures, read as they printed them (AIPerf's summary file,
GuideLLM's per-benchmark metrics), from the real fixture files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.imports.aiperf_summary import read_summary, to_ms
from analytics.imports.errors import ImportFormatError
from analytics.imports.guidellm_summary import figures

DATA = Path(__file__).parents[3] / "data" / "imports"


def _figure(found: tuple, figure: str, stat: str) -> float:  # type: ignore[type-arg]
    return next(f.value for f in found if f.figure == figure and f.stat == stat)


def test_aiperfs_summary_is_its_printed_figures() -> None:
    path = DATA / "aiperf" / "0.13.0" / "c1" / "profile_export_aiperf.json"
    raw = json.loads(path.read_bytes())
    summary = read_summary(path.read_bytes(), path.name)
    assert summary.concurrency == 1 and summary.model == "simulated"
    assert _figure(summary.figures, "ttft", "p99") == raw["time_to_first_token"]["p99"]
    assert _figure(summary.figures, "ttft", "mean") == raw["time_to_first_token"]["avg"]
    assert to_ms(2.5, "sec", "x") == pytest.approx(2500.0)
    with pytest.raises(ImportFormatError, match="unit 'fortnights'"):
        to_ms(1.0, "fortnights", "x")
    other = dict(raw, schema_version="9.9")
    with pytest.raises(ImportFormatError, match=r"schema_version '9\.9'") as caught:
        read_summary(json.dumps(other).encode(), path.name)
    assert caught.value.where == f"{path.name}: schema_version"


def test_guidellms_figures_are_over_its_successful_requests() -> None:
    path = DATA / "guidellm" / "0.8.1" / "c1" / "benchmarks.json"
    metrics = json.loads(path.read_bytes())["benchmarks"][0]["metrics"]
    found = figures(metrics, "benchmarks[0].metrics")
    ttft = metrics["time_to_first_token_ms"]["successful"]
    assert _figure(found, "ttft", "p50") == ttft["median"]
    assert _figure(found, "ttft", "p99") == ttft["percentiles"]["p99"]
    assert {f.unit for f in found if f.figure == "ttft"} == {"ms"}
