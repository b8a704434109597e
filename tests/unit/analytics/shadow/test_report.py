"""analytics/shadow/report.py: a shadow session's comparison fits the terminal's width."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from analytics.shadow.report import print_comparison


def _row(region: str, few: bool) -> dict[str, Any]:
    """One row as ``analytics.shadow.capture.comparison`` gives it (the fields the table reads)."""
    return {
        "shadow_provider": "candidate-llama-70b", "shadow_region": region, "pairs": 1234,
        "few_pairs": few, "primary_error_rate": 0.0, "shadow_error_rate": 0.0125,
        "ttft_delta_p50_ms": -20.25, "ttft_delta_p99_ms": 1234.5,
        "ttft_shadow_faster_share": 2 / 3, "e2e_delta_p50_ms": -1500.0,
        "e2e_delta_p99_ms": None, "e2e_shadow_faster_share": 0.5,
        "primary_completion_tokens_mean": 180.25, "shadow_completion_tokens_mean": 175.0,
        "primary_usd_per_mtok": 1.2307, "shadow_usd_per_mtok": 0.5,
    }  # fmt: skip


@pytest.mark.parametrize("width", [80, 120, 200])
def test_the_comparison_fits_and_shows_every_figure_whole(width: int) -> None:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    print_comparison(console, "sess-1", [_row("eu-west", True), _row("us", False)])
    text = console.file.getvalue()  # type: ignore[attr-defined]
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width and "…" not in text
    eu = [line for line in lines if line.startswith("candidate-llama-70b  eu-west")]
    for figure in (
        "1234", "0.0% / 1.2%", "-20.2", "+1234.5*", "66.7%", "-1500.0", "–", "50.0%",
        "180.2 / 175.0", "$1.231 / $0.500",
    ):  # fmt: skip
        assert any(f" {figure}" in line for line in eu), figure
    assert "p99 over < 100 pairs is marked *" in " ".join(text.split())
