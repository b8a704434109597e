"""Server telemetry in the report (analytics/telemetry/metrics.py): per stage mean and max over the
scrapes taken while the stage's requests ran, how the scrapes went, the timeline of queue
depth and KV use against TTFT, and the table rows the text formats print."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from analytics.report.build import build_report
from analytics.sql.results import first_row
from analytics.store.db import connect
from analytics.telemetry.ingest import ingest_scrapes
from analytics.telemetry.metrics import (
    STAGE_FIGURES,
    TELEMETRY_HEADER,
    server_metrics,
    telemetry_rows,
    telemetry_timeline,
)
from tests.support.builders import REPORT_SCENARIO, evenly_paced, store_run
from tests.support.scrapes import S, payload, scrape_row, store_scraped_run

RUN = "run-telemetry"


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """A run of 10 requests, one a second, with scrapes before, during and after them."""
    con = connect(tmp_path / "report.duckdb")
    store_scraped_run(con, RUN)
    return con


def test_the_summary_covers_the_stage_span_only(con: duckdb.DuckDBPyConnection) -> None:
    section = server_metrics(con, RUN)
    figures = {r["metric"]: r for r in section["summary"]}
    # The idle scrape before the first send and the failed one after are not figures.
    assert figures["running_requests"]["samples"] == 9
    assert figures["running_requests"]["mean"] == 1.0
    assert figures["waiting_requests"]["max"] == 2.0
    assert figures["kv_cache_usage"]["max"] == pytest.approx(0.9)
    assert figures["generation_tokens_per_s"]["mean"] == pytest.approx(100.0)
    assert "generation_tokens_total" not in figures
    (scrapes,) = section["scrapes"]
    assert (scrapes["scrapes"], scrapes["errors"], scrapes["top_error"]) == (11, 1, "HTTP 503")


def test_a_run_without_scrapes_has_an_empty_section(tmp_path: Path) -> None:
    con = connect(tmp_path / "plain.duckdb")
    scenario = {**REPORT_SCENARIO, "providers": REPORT_SCENARIO["providers"][:1]}
    store_run(con, "plain", scenario, {("api", 0): evenly_paced(3)})
    assert server_metrics(con, "plain") == {"summary": [], "scrapes": [], "stages": []}
    assert telemetry_timeline(con, "plain")["series"] == []
    report = build_report(con, "plain")
    assert report.to_dict()["server_metrics"] == {"summary": [], "scrapes": [], "stages": []}
    assert "server_timeline" not in report.plots


def test_the_timeline_aligns_server_figures_with_ttft(con: duckdb.DuckDBPyConnection) -> None:
    timeline = telemetry_timeline(con, RUN)
    assert timeline["buckets"] == 11  # the scrapes of the one shard attempt
    (series,) = timeline["series"]
    values = series["values"]
    assert set(values) == {"running_requests", "waiting_requests", "kv_cache_usage", "ttft_p50_ms"}
    assert len(timeline["t_s"]) == timeline["buckets"]
    assert all(v is None or v == pytest.approx(100.0) for v in values["ttft_p50_ms"])
    assert max(v or 0 for v in values["waiting_requests"]) == 2.0
    assert max(v or 0 for v in values["kv_cache_usage"]) <= 1


def test_the_report_carries_the_section_and_the_table_rows(
    con: duckdb.DuckDBPyConnection,
) -> None:
    report = build_report(con, RUN)
    assert report.to_dict()["server_metrics"]["summary"]
    assert report.plots["server_timeline"]["series"]
    (row,) = telemetry_rows(report.server_metrics)
    assert len(row) == len(TELEMETRY_HEADER)
    cells = dict(zip(TELEMETRY_HEADER, row, strict=True))
    assert cells["running max"] == "1" and cells["KV max"] == "90.0%"
    assert cells["GPU util"] == "–"  # no DCGM exporter was scraped
    assert cells["failed"] == "1 (HTTP 503)"


# --------------------------------------------------------------------------- per-stage figures
# A run of 10 requests of provider ``api``, one a second from ``first`` (each ~0.2 s, 100
# output tokens): its steady window is [first send, last send] = 9 s, in which requests
# 0-8 end, 900 output tokens (docs/analytics.md, "Steady-state window").
WINDOW_S = 9
WINDOW_TOKENS = 900


def _scraped(
    tmp_path: Path, series: list[tuple[float, list[tuple[str, dict[str, str], float]] | None]]
) -> dict[str, Any]:
    """The ``stages`` row of a run whose one shard was scraped at ``first + t`` seconds
    with these samples (None: a failed scrape)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    con = connect(tmp_path / "figures.duckdb")
    scenario = {**REPORT_SCENARIO, "providers": REPORT_SCENARIO["providers"][:1]}
    store_run(con, "fig", scenario, {("api", 0): evenly_paced(10)})
    first = first_row(con.execute("SELECT epoch_ns(min(sent_at)) FROM requests"))
    assert first is not None
    rows = [
        scrape_row(
            seq,
            first[0] + round(t * S),
            samples or {},
            run_id="fig",
            provider="api",
            error=None if samples is not None else "HTTP 503",
        )
        for seq, (t, samples) in enumerate(series)
    ]
    ingest_scrapes(con, [payload(*rows)])
    (stage,) = server_metrics(con, "fig")["stages"]
    assert set(stage) == {"provider", "region", "stage", *STAGE_FIGURES}
    return stage


def _gauge(name: str, value: float, **labels: str) -> tuple[str, dict[str, str], float]:
    return (name, labels, value)


def _every_second(
    make: Callable[[int], list[tuple[str, dict[str, str], float]] | None],
) -> list[tuple[float, list[tuple[str, dict[str, str], float]] | None]]:
    """Scrapes at -1 s … 10 s around the run (the shard's first and last included)."""
    return [(float(t), make(t)) for t in range(-1, 11)]


def test_the_hit_rate_is_hits_over_queries_of_the_counters_increases(tmp_path: Path) -> None:
    # 100 prompt tokens looked up and 40 found per second; the server restarts between
    # the 5th and 6th scrape (the counters start again from zero: that interval adds
    # the value after the reset), and one scrape fails (the interval spans it).
    queries = [1000, 1100, 1200, 1300, 1400, 50, 150, 250, 350, 450, 550, 650]
    hits = [500, 540, 580, 620, 660, 20, 60, 100, 140, 180, 220, 260]

    def make(t: int) -> list[tuple[str, dict[str, str], float]] | None:
        if t == 7:
            return None
        i = t + 1
        return [
            _gauge("vllm:prefix_cache_queries_total", queries[i], engine="0"),
            _gauge("vllm:prefix_cache_hits_total", hits[i], engine="0"),
        ]

    stage = _scraped(tmp_path, _every_second(make))
    assert stage["prefix_cache_queried_tokens"] == 10 * 100 + 50  # 10 intervals, 1 reset
    assert stage["prefix_cache_hit_tokens"] == 10 * 40 + 20
    assert stage["server_prefix_cache_hit_rate"] == pytest.approx(0.4)
    # Nothing else was exposed: unknown, not zero.
    assert stage["spec_acceptance_rate"] is None and stage["joules_per_output_token"] is None


def test_vllm_versions_exposing_old_and_new_names_give_the_same_rate(tmp_path: Path) -> None:
    def make(t: int) -> list[tuple[str, dict[str, str], float]]:
        q, h = 100.0 * (t + 1), 25.0 * (t + 1)
        return [
            _gauge("vllm:prefix_cache_queries_total", q),
            _gauge("vllm:prefix_cache_hits_total", h),
            _gauge("vllm:gpu_prefix_cache_queries_total", q),
            _gauge("vllm:gpu_prefix_cache_hits_total", h),
        ]

    stage = _scraped(tmp_path, _every_second(make))
    assert stage["server_prefix_cache_hit_rate"] == pytest.approx(0.25)


def test_sglang_gauges_are_averaged_over_the_stage(tmp_path: Path) -> None:
    def make(t: int) -> list[tuple[str, dict[str, str], float]]:
        return [
            _gauge("sglang:cache_hit_rate", 0.9 if t < 0 else (0.2 if t % 2 else 0.6)),
            _gauge("sglang:spec_accept_length", 2.0 if t % 2 else 3.0),
            _gauge("sglang:spec_accept_rate", 0.5),
        ]

    stage = _scraped(tmp_path, _every_second(make))
    # The scrape before the first send and the one after the last end are outside the
    # stage's span [first send, last end]: t = 0 … 9.
    assert stage["server_prefix_cache_hit_rate"] == pytest.approx(0.4)
    assert stage["spec_mean_accepted_length"] == pytest.approx(2.5)
    assert stage["spec_acceptance_rate"] == pytest.approx(0.5)
    assert stage["prefix_cache_queried_tokens"] is None  # no counters, a gauge


def test_speculative_decoding_from_vllms_counters(tmp_path: Path) -> None:
    def make(t: int) -> list[tuple[str, dict[str, str], float]]:
        n = t + 1
        return [
            _gauge("vllm:spec_decode_num_drafts_total", 10.0 * n),
            _gauge("vllm:spec_decode_num_draft_tokens_total", 30.0 * n),
            _gauge("vllm:spec_decode_num_accepted_tokens_total", 21.0 * n),
        ]

    stage = _scraped(tmp_path, _every_second(make))
    assert (stage["spec_drafts"], stage["spec_draft_tokens"]) == (110, 330)
    assert stage["spec_acceptance_rate"] == pytest.approx(0.7)
    assert stage["spec_mean_accepted_length"] == pytest.approx(1 + 2.1)


@pytest.mark.parametrize("gpus", [1, 4])
def test_constant_power_over_the_steady_window(tmp_path: Path, gpus: int) -> None:
    def make(t: int) -> list[tuple[str, dict[str, str], float]]:
        return [_gauge("DCGM_FI_DEV_POWER_USAGE", 300.0, gpu=str(g)) for g in range(gpus)]

    stage = _scraped(tmp_path, _every_second(make))
    assert stage["energy_window_s"] == pytest.approx(WINDOW_S)
    assert stage["output_tokens_in_window"] == WINDOW_TOKENS
    assert stage["gpu_energy_j"] == pytest.approx(300.0 * gpus * WINDOW_S)
    assert stage["mean_gpu_power_w"] == pytest.approx(300.0 * gpus)
    assert stage["joules_per_output_token"] == pytest.approx(300.0 * gpus * WINDOW_S / 900)
    assert stage["energy_source"] == "gpu_power_watts"


def test_a_power_ramp_is_integrated_across_a_failed_scrape(tmp_path: Path) -> None:
    # 100 W + 10 W/s: linear between scrapes, so the trapezoids are exact, a missing
    # scrape included; scrapes at half seconds are cut at the window's edges.
    def make(t: int) -> list[tuple[str, dict[str, str], float]] | None:
        return None if t == 4 else [_gauge("DCGM_FI_DEV_POWER_USAGE", 100.0 + 10.0 * (t + 0.5))]

    series = [(t + 0.5, samples) for t, samples in _every_second(make)]
    stage = _scraped(tmp_path, series)
    expected = 100.0 * WINDOW_S + 10.0 * WINDOW_S**2 / 2  # ∫0..9 (100 + 10 t) dt
    assert stage["gpu_energy_j"] == pytest.approx(expected)
    assert stage["joules_per_output_token"] == pytest.approx(expected / WINDOW_TOKENS)


def test_the_energy_counter_wins_over_the_power_gauge_and_survives_a_reset(
    tmp_path: Path,
) -> None:
    # 500 J a second (in mJ) while the gauge says 300 W; a reboot between 4 s and 5 s: the
    # counter then holds 250 J since boot, which is what that interval adds.
    def make(t: int) -> list[tuple[str, dict[str, str], float]]:
        energy_mj = 9e9 + 500_000.0 * (t + 1) if t <= 4 else 250_000.0 + 500_000.0 * (t - 5)
        return [
            _gauge("DCGM_FI_DEV_POWER_USAGE", 300.0),
            _gauge("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", energy_mj),
        ]

    stage = _scraped(tmp_path, _every_second(make))
    assert stage["energy_source"] == "gpu_energy_joules_total"
    assert stage["gpu_energy_j"] == pytest.approx(8 * 500.0 + 250.0)


def test_no_power_scraped_throughout_the_window_is_unknown(tmp_path: Path) -> None:
    # Power only from 5 s on: the window shrinks to [5 s, 9 s] and its tokens with it.
    def make(t: int) -> list[tuple[str, dict[str, str], float]]:
        return [_gauge("DCGM_FI_DEV_POWER_USAGE", 200.0)] if t >= 5 else []

    stage = _scraped(tmp_path, _every_second(make))
    assert stage["energy_window_s"] == pytest.approx(4)
    assert stage["output_tokens_in_window"] == 400  # requests 5-8 end inside it
    assert stage["joules_per_output_token"] == pytest.approx(200.0 * 4 / 400)
    # Power only after the window: nothing to integrate, unknown.
    late = _scraped(
        tmp_path / "late",
        _every_second(lambda t: [_gauge("DCGM_FI_DEV_POWER_USAGE", 200.0)] if t >= 9 else []),
    )
    assert late["gpu_energy_j"] is None and late["joules_per_output_token"] is None
