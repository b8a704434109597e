from __future__ import annotations

from analytics.sections.model import SectionOptions
from analytics.sections.telemetry import telemetry
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
