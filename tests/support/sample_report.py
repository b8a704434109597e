"""A report as analytics/report/build.py builds it, with the fields the sections read."""

from __future__ import annotations

from typing import Any

from analytics.report.build import RunReport


def stage_row(provider: str, stage: int = 0, **extra: Any) -> dict[str, Any]:
    """One summary row (the fields every section reads, and ``extra``)."""
    row: dict[str, Any] = {
        "provider": provider, "stage": stage, "region": "eu", "concurrency": 4,
        "requests": 120, "errors": 2, "errors_by_class": "http_429: 2", "request_rate": 3.5,
        "ttft_p50_ms": 81.0, "ttft_p99_ms": 240.0, "itl_p50_ms": 9.5, "itl_p99_ms": 30.0,
        "tpot_p50_ms": 10.0, "e2e_p99_ms": 1900.0, "decode_tok_s_p50": 101.0,
        "output_tok_s": 410.0, "goodput_rps": 3.1, "slo_attainment_pct": 92.0,
        "cost_per_mtok_input": 0.8, "cost_per_mtok_output": 1.2, "cost_per_1k_requests": 0.3,
        "ttft_n": 118, "ttft_p90_ms": 150.0, "ttft_p95_ms": 190.0, "ttft_p999_ms": 300.0,
        "low_sample": ["ttft_p99_ms"], "ok": 118,
    }  # fmt: skip
    return row | extra


def report(**fields: Any) -> RunReport:
    """A finished run of two stage rows, with ``fields`` replaced."""
    base: dict[str, Any] = {
        "run_id": "run-1",
        "name": "sections",
        "state": "finished",
        "shards": [],
        "stages": [stage_row("api"), stage_row("gpu", 1)],
    }
    return RunReport(**(base | fields))
