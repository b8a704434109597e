from __future__ import annotations

from typing import Any

from analytics.sections.model import SectionOptions
from analytics.sections.server_timings import server_timings
from tests.support.sample_report import report


def _row(stage: int, joined: int, **figures: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {"provider": "vllm", "stage": stage, "requests": 10, "joined": joined,
                           "joined_share": joined / 10, "client_ttft_p50_ms": 40.0}  # fmt: skip
    for part in ("queue", "prefill", "network_client"):
        for quantile in ("p50", "p99"):
            row[f"{part}_{quantile}_ms"] = figures.get(f"{part}_{quantile}")
    return row


def test_one_row_per_stage_unknown_where_nothing_joined() -> None:
    rows = [
        _row(0, 10, queue_p50=0.5, queue_p99=1.0, prefill_p50=20.0, prefill_p99=30.0,
             network_client_p50=3.0, network_client_p99=9.0),
        _row(1, 0),
    ]  # fmt: skip
    (section,) = server_timings(report(server_timings=rows), SectionOptions())
    names = [c.name for c in section.columns]
    first, second = (dict(zip(names, r, strict=True)) for r in section.text_rows())
    assert (first["stage"], first["joined"], first["queue p50"], first["prefill p99"]) == (
        "0",
        "100.0 %",
        "0.5",
        "30.0",
    )
    assert first["network+client p50"] == "3.0"
    assert second["joined"] == "0.0 %"
    assert second["queue p50"] == second["network+client p99"] == "unknown"
    assert section.key == "server-timings"


def test_no_section_when_no_request_joined() -> None:
    assert server_timings(report(server_timings=[_row(0, 0)]), SectionOptions()) == []
    assert server_timings(report(), SectionOptions()) == []
