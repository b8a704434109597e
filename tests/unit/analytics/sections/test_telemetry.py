from __future__ import annotations

from analytics.sections.model import SectionOptions
from analytics.sections.telemetry import telemetry
from analytics.telemetry.metrics import STAGE_FIGURES
from tests.support.sample_report import report

METRICS = {
    "summary": [
        {"provider": "gpu", "region": "eu", "stage": 0, "metric": "kv_cache_usage",
         "mean": 0.5, "max": 0.75},
    ],
    "scrapes": [{"provider": "gpu", "region": "eu", "stage": 0, "scrapes": 12, "errors": 0,
                 "top_error": None}],
}  # fmt: skip


def test_one_row_per_scraped_stage() -> None:
    (section,) = telemetry(report(server_metrics=METRICS), SectionOptions())
    row = dict(zip([c.name for c in section.columns], section.text_rows()[0], strict=True))
    assert (row["provider"], row["stage"], row["KV mean"], row["KV max"]) == (
        "gpu",
        "0",
        "50.0%",
        "75.0%",
    )
    assert row["running mean"] == "–" and row["scrapes"] == "12" and row["failed"] == "0"
    assert section.key == "server-metrics"
    assert telemetry(report(), SectionOptions()) == []


def _stage(**figures: float | None) -> dict[str, object]:
    row: dict[str, object] = {"provider": "gpu", "region": "eu", "stage": 0}
    return row | dict.fromkeys(STAGE_FIGURES) | figures


def test_server_observed_figures_are_a_table_of_their_own() -> None:
    metrics = {
        **METRICS,
        "stages": [
            _stage(
                server_prefix_cache_hit_rate=0.425,
                spec_acceptance_rate=0.7,
                spec_mean_accepted_length=3.1,
                mean_gpu_power_w=412.0,
                joules_per_output_token=0.8125,
            )
        ],
    }
    _, figures = telemetry(report(server_metrics=metrics), SectionOptions())
    assert figures.key == "server-figures"
    (row,) = figures.text_rows()
    cells = dict(zip([c.name for c in figures.columns], row, strict=True))
    assert cells == {
        "provider": "gpu",
        "region": "eu",
        "stage": "0",
        "server prefix-cache hit": "42.5 %",
        "draft acceptance": "70.0 %",
        "mean accepted length": "3.10",
        "GPU power mean (W)": "412",
        "J per output token": "0.812",
    }
    # The JSON report's section keeps the values, not their text.
    assert figures.to_dict()["rows"] == [["gpu", "eu", 0, 42.5, 70.0, 3.1, 412.0, 0.8125]]


def test_no_server_figure_means_no_table_and_absent_ones_are_unknown() -> None:
    metrics = {**METRICS, "stages": [_stage()]}
    assert [s.key for s in telemetry(report(server_metrics=metrics), SectionOptions())] == [
        "server-metrics"
    ]
    partial = {**METRICS, "stages": [_stage(joules_per_output_token=1.5)]}
    _, figures = telemetry(report(server_metrics=partial), SectionOptions())
    (row,) = figures.text_rows()
    assert row[3:] == ["–", "–", "–", "–", "1.500"]
    # Columns nobody has a value in are left out of the table.
    assert [figures.columns[i].name for i in figures.shown()][3:] == ["J per output token"]
