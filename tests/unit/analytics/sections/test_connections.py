"""The Connections and ids sections (analytics/sections/connections.py)."""

from __future__ import annotations

from typing import Any

from analytics.report.connections import CONNECTION_FIELDS
from analytics.sections.connections import connections, ids
from analytics.sections.model import SectionOptions
from tests.support.sample_report import report, stage_row


def figures(**values: Any) -> dict[str, Any]:
    return dict.fromkeys(CONNECTION_FIELDS) | values


HTTPS = figures(
    records_total=20, connections_new=4, connections_reused=16,
    dns_p50_ms=1.25, dns_p99_ms=2.5, connect_p50_ms=0.5, connect_p99_ms=0.9,
    tls_p50_ms=8.0, tls_p99_ms=12.0, ttft_new_p50_ms=95.0, ttft_new_p99_ms=120.0,
    ttft_reused_p50_ms=81.0, ttft_reused_p99_ms=99.0, response_id_pct=100.0,
    request_id_pct=50.0,
)  # fmt: skip
OTHER = figures(records_total=5, connections_new=0, connections_reused=0,
                response_id_pct=0.0, request_id_pct=0.0)  # fmt: skip


def test_connections_per_stage_row_with_new_and_reused() -> None:
    stages = [stage_row("api", connections=HTTPS), stage_row("gpu", 1, connections=OTHER)]
    (section,) = connections(report(stages=stages), SectionOptions())
    assert section.key == "connections"
    assert section.text_rows() == [
        ["api", "0", "eu", "4", "16", "1.25", "2.50", "0.50", "0.90", "8.00", "12.00",
         "95.0", "120.0", "81.0", "99.0"],
    ]  # fmt: skip
    assert "docs/metrics.md" in section.note


def test_optional_phase_columns_are_left_out_when_no_stage_had_them() -> None:
    plain = HTTPS | {"dns_p50_ms": None, "dns_p99_ms": None, "tls_p50_ms": None,
                     "tls_p99_ms": None}  # fmt: skip
    (section,) = connections(report(stages=[stage_row("api", connections=plain)]), SectionOptions())
    shown = [section.columns[i].name for i in section.shown()]
    assert "DNS p50 (ms)" not in shown and "TLS p50 (ms)" not in shown
    assert "connect p50 (ms)" in shown


def test_ids_share_per_stage_row() -> None:
    stages = [stage_row("api", connections=HTTPS), stage_row("gpu", 1, connections=OTHER)]
    (section,) = ids(report(stages=stages), SectionOptions())
    assert section.text_rows() == [
        ["api", "0", "eu", "20", "100.0 %", "50.0 %"],
        ["gpu", "1", "eu", "5", "0.0 %", "0.0 %"],
    ]


def test_nothing_to_show() -> None:
    assert connections(report(), SectionOptions()) == []
    assert ids(report(), SectionOptions()) == []
    only_other = report(stages=[stage_row("gpu", connections=OTHER)])
    assert connections(only_other, SectionOptions()) == []
