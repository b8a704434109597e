"""Printing a shadow session's paired comparison, as a table and as JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
from rich.console import Console

from analytics.shadow.capture import comparison, ensure_shadow_schema
from analytics.shadow.report import print_comparison, print_shadow_report
from analytics.store.db import connect
from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import RunStore
from api.control.session_coordinator import SessionCoordinator
from scenarios.gateway_config import parse_gateway_config
from scenarios.wire.records import batch_to_ipc, records_to_batch
from tests.support.analytics_builders import S, ok_result
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import RowContext, record_row

CONFIG = parse_gateway_config(
    {
        "primary": {"name": "prod", "kind": "openai", "base_url": "http://h/v1", "model": "m"},
        "shadows": [{"name": "cand", "kind": "simulated"}],
        "regions": ["eu"],
    }
)


def _publish(
    con: duckdb.DuckDBPyConnection, shard: str, provider: str, kind: str, ttfts: list[float]
) -> None:
    """Records of one session shard: the gateway's are ``live``, the shadows' ``shadow``."""
    rows = [
        record_row(
            RowContext("sess", 0, shard, 1, provider, "m", "eu", "w", kind, 0, request_key=f"k{i}"),
            PlannedRequest(i, 10, 3, ""),
            ok_result(10 * S + i * S, ttft, [1.0, 1.0], prompt=10),
        )
        for i, ttft in enumerate(ttfts)
    ]
    ingest_batches(con, [BatchMessage("sess", shard, 1, 0, batch_to_ipc(records_to_batch(rows)))])


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """A session whose shadow was 20 ms faster on each of four paired requests."""
    con = connect(tmp_path / "s.duckdb")
    ensure_shadow_schema(con)
    SessionCoordinator.open("sess", CONFIG, RunStore(con))
    _publish(con, "primary", "prod", "live", [50.0, 60.0, 70.0, 80.0])
    _publish(con, "shadow.cand.eu", "cand", "shadow", [30.0, 40.0, 50.0, 60.0])
    return con


def _console() -> Console:
    return Console(record=True, width=250, color_system=None)


def test_table_shows_each_shadow_against_the_primary(con: duckdb.DuckDBPyConnection) -> None:
    console = _console()
    print_shadow_report(console, con, "sess")
    text = console.export_text()
    assert "shadow session sess" in text
    (line,) = [row for row in text.splitlines() if "cand" in row and "eu" in row]
    cells = re.split(r"\s{2,}", line.strip())  # columns are 2+ spaces apart
    assert cells[:3] == ["cand", "eu", "4"]
    assert cells[4] == "-20.0"  # TTFT Δ p50, ms: the shadow was faster
    assert cells[5] == "-20.0*"  # p99 over fewer than 100 pairs is marked
    assert cells[6] == "100.0%"  # faster on every pair


def test_json_output_is_the_comparison(con: duckdb.DuckDBPyConnection) -> None:
    console = _console()
    print_shadow_report(console, con, "sess", output="json")
    printed = json.loads(console.export_text())
    assert printed["session"] == "sess"
    expected = json.loads(json.dumps(comparison(con, "sess"), default=str))
    assert printed["comparison"] == expected
    assert printed["comparison"][0]["pairs"] == 4


def test_missing_figures_print_as_dashes() -> None:
    row = {
        "shadow_provider": "cand",
        "shadow_region": "us",
        "pairs": 0,
        "few_pairs": True,
        **dict.fromkeys(
            [
                "primary_error_rate", "shadow_error_rate", "ttft_delta_p50_ms",
                "ttft_delta_p99_ms", "ttft_shadow_faster_share", "e2e_delta_p50_ms",
                "e2e_delta_p99_ms", "e2e_shadow_faster_share", "primary_completion_tokens_mean",
                "shadow_completion_tokens_mean", "primary_usd_per_mtok", "shadow_usd_per_mtok",
            ]
        ),
    }  # fmt: skip
    console = _console()
    print_comparison(console, "s", [row])
    (line,) = [r for r in console.export_text().splitlines() if "cand" in r]
    cells = re.split(r"\s{2,}", line.strip())  # columns are 2+ spaces apart
    assert cells[2] == "0"
    assert set(cells[3:]) <= {"–", "– / –", "–*"}
