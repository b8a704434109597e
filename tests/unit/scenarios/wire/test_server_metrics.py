"""The server-telemetry name map and the Arrow form of scrapes (scenarios/wire/server_metrics.py):
the SQL view holds exactly the Python map, every canonical figure has a source, and scrape
rows survive the trip through Arrow IPC."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.store.db import connect
from scenarios.wire.server_metrics import (
    COUNTERS,
    KNOWN_NAMES,
    NAME_MAP,
    RATES,
    Canonical,
    ipc_to_scrapes,
    scrapes_to_ipc,
)
from workers.shard.prometheus_text import parse_known


def test_the_sql_view_holds_exactly_the_python_name_map(tmp_path: Path) -> None:
    con = connect(tmp_path / "names.duckdb")
    rows = con.execute(
        "SELECT source, metric, canonical, scale, combine FROM server_metric_names"
    ).fetchall()
    expected = [(m.source, m.name, m.canonical.value, m.scale, m.combine) for m in NAME_MAP]
    assert sorted(rows) == sorted(expected)


def test_every_canonical_figure_has_a_source_and_names_are_unique() -> None:
    assert {m.canonical for m in NAME_MAP} == set(Canonical)
    assert len(KNOWN_NAMES) == len(NAME_MAP)
    assert set(RATES) == {Canonical.PROMPT_TOKENS_TOTAL, Canonical.GENERATION_TOKENS_TOTAL}
    shares = {m.name for m in NAME_MAP if m.combine == "avg"}
    assert all(
        m.canonical
        in (
            Canonical.KV_CACHE_USAGE,
            Canonical.GPU_UTILIZATION,
            Canonical.PREFIX_CACHE_HIT_RATE,
            Canonical.SPEC_ACCEPT_RATE,
            Canonical.SPEC_ACCEPT_LENGTH,
        )
        for m in NAME_MAP
        if m.name in shares
    )
    # Counters add up over series (GPUs, engines), never average.
    assert all(m.combine == "sum" for m in NAME_MAP if m.canonical in COUNTERS)
    assert set(RATES) <= COUNTERS


# The names as vLLM (V1 engine; V0's gauge), SGLang and NVIDIA's DCGM exporter expose them:
# prometheus_client adds ``_total`` to a counter's samples.
@pytest.mark.parametrize(
    ("name", "canonical", "scale"),
    [
        ("vllm:prefix_cache_queries_total", Canonical.PREFIX_CACHE_QUERIES_TOTAL, 1.0),
        ("vllm:prefix_cache_hits_total", Canonical.PREFIX_CACHE_HITS_TOTAL, 1.0),
        ("vllm:gpu_prefix_cache_queries_total", Canonical.PREFIX_CACHE_QUERIES_TOTAL, 1.0),
        ("vllm:gpu_prefix_cache_hits_total", Canonical.PREFIX_CACHE_HITS_TOTAL, 1.0),
        ("vllm:gpu_prefix_cache_hit_rate", Canonical.PREFIX_CACHE_HIT_RATE, 1.0),
        ("vllm:spec_decode_num_drafts_total", Canonical.SPEC_DRAFTS_TOTAL, 1.0),
        ("vllm:spec_decode_num_draft_tokens_total", Canonical.SPEC_DRAFT_TOKENS_TOTAL, 1.0),
        ("vllm:spec_decode_num_accepted_tokens_total", Canonical.SPEC_ACCEPTED_TOKENS_TOTAL, 1.0),
        ("sglang:cache_hit_rate", Canonical.PREFIX_CACHE_HIT_RATE, 1.0),
        ("sglang:spec_accept_rate", Canonical.SPEC_ACCEPT_RATE, 1.0),
        ("sglang:spec_accept_length", Canonical.SPEC_ACCEPT_LENGTH, 1.0),
        ("DCGM_FI_DEV_POWER_USAGE", Canonical.GPU_POWER_WATTS, 1.0),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Canonical.GPU_ENERGY_JOULES_TOTAL, 0.001),
    ],
)
def test_cache_speculation_and_power_names_map_to_canonical_figures(
    name: str, canonical: Canonical, scale: float
) -> None:
    (mapped,) = [m for m in NAME_MAP if m.name == name]
    assert (mapped.canonical, mapped.scale) == (canonical, scale)
    # The scraper keeps their lines, and only theirs: the per-position counter is not read.
    text = (
        f'{name}{{model_name="m"}} 3.0\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 1.0\n'
    )
    (sample,) = parse_known(text, KNOWN_NAMES).samples
    assert sample["metric"] == name


def test_dcgm_units_become_canonical_ones() -> None:
    by_name = {m.name: m for m in NAME_MAP}
    assert by_name["DCGM_FI_DEV_GPU_UTIL"].scale == 0.01  # percent to 0..1
    assert by_name["DCGM_FI_DEV_FB_USED"].scale == 1024 * 1024  # MiB to bytes


def test_scrape_rows_survive_arrow_ipc() -> None:
    row = {
        "run_id": "r",
        "stage": 1,
        "provider": "p",
        "region": "eu",
        "shard_id": "s1.p.eu",
        "attempt": 2,
        "worker": "w",
        "scrape_seq": 7,
        "scraped_at": 1_700_000_000_123_456_789,
        "duration_ns": 1500,
        "status": "ok",
        "http_status": 200,
        "error_message": None,
        "body_bytes": 120,
        "series_dropped": 0,
        "samples": [
            {"metric": "vllm:num_requests_running", "labels": [("model_name", "m")], "value": 3.0}
        ],
    }
    table = ipc_to_scrapes(scrapes_to_ipc([row]))
    (back,) = table.drop_columns(["scraped_at"]).to_pylist()
    assert back["scrape_seq"] == 7 and back["attempt"] == 2
    assert back["samples"] == row["samples"]
    assert table.column("scraped_at")[0].value == 1_700_000_000_123_456_789  # ns kept
