"""How report values are written: numbers, flagged percentiles, intervals, money, and the
summary and percentile tables every format shares."""

from __future__ import annotations

from typing import Any

from analytics.report.formatting import (
    LATENCY_METRICS,
    PERCENTILE_HEADER,
    errors,
    method_note,
    money,
    number,
    percentile,
    percentile_rows,
)
from analytics.stats.percentiles import QUANTILES


def _row(**values: Any) -> dict[str, Any]:
    """A summary row with every field the columns read, overridden by ``values``."""
    row: dict[str, Any] = {
        "provider": "api",
        "stage": 2,
        "region": "eu",
        "concurrency": 64,
        "requests": 1200,
        "errors": 0,
        "errors_by_class": "",
        "request_rate": 12.3456,
        "decode_tok_s_p50": 55.5,
        "output_tok_s": 3550.25,
        "goodput_rps": 11.0,
        "slo_attainment_pct": 98.76,
        "cost_per_mtok_input": 0.5,
        "cost_per_mtok_output": 1.5,
        "cost_per_1k_requests": 0.0123,
        "low_sample": [],
    }
    for metric, _ in LATENCY_METRICS:
        row[f"{metric}_n"] = 0
        for label, _ in QUANTILES:
            row[f"{metric}_{label}_ms"] = None
    row.update(values)
    return row


def test_numbers_money_and_errors() -> None:
    assert number(None) == "–"
    assert number(True) == "yes" and number(False) == "no"
    assert number(12345.678) == "12,345.7" and number(0.125, 2) == "0.12"
    assert number(7) == "7"
    assert money(None) == "–"
    assert money(1234.5) == "$1,234.50"
    assert money(0.01234) == "$0.0123"  # cents would hide a small price
    assert errors(_row()) == "0"
    assert (
        errors(_row(errors=3, errors_by_class="http_429=2, timeout=1"))
        == "3 (http_429=2, timeout=1)"
    )


def test_percentile_cells_carry_the_low_sample_flag_and_the_interval() -> None:
    row = _row(
        ttft_p99_ms=812.34,
        ttft_p99_ci_low_ms=790.0,
        ttft_p99_ci_high_ms=1034.567,
        low_sample=["ttft_p99_ms"],
    )
    assert percentile(row, "ttft_p99_ms") == "812.3*"
    assert percentile(row, "ttft_p99_ms", ci=True) == "812.3* [790.0–1,034.6]"
    assert percentile(row, "ttft_p50_ms", ci=True) == "–"  # no value, no interval
    assert percentile(_row(itl_p50_ms=1.234), "itl_p50_ms", 2) == "1.23"


def test_percentile_rows_list_each_sampled_metric_with_the_header_shape() -> None:
    row = _row(
        ttft_n=1200,
        **{f"ttft_{label}_ms": 100.0 + i for i, (label, _) in enumerate(QUANTILES)},
        ttft_p50_ci_low_ms=99.0,
        ttft_p50_ci_high_ms=101.0,
        itl_n=5000,
        itl_p50_ms=2.345,
        low_sample=["ttft_p999_ms"],
    )
    lines = percentile_rows([row])
    assert [line[3] for line in lines] == ["TTFT", "ITL"]  # metrics without samples are left out
    assert all(len(line) == len(PERCENTILE_HEADER) for line in lines)
    ttft, itl = lines
    assert ttft[4] == "1200" and ttft[5] == "100.0" and ttft[9] == "104.0*"
    assert ttft[-2:] == ["99.0–101.0", "–"]
    assert itl[5] == "2.35"  # ITL and TPOT get two decimals


def test_method_note() -> None:
    assert method_note({"method": "exact"}) == ""
    assert method_note({"note": "from stored histograms, within 0.05 %"}) == (
        "Percentiles: from stored histograms, within 0.05 %."
    )
