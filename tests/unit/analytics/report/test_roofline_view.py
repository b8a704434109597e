"""Roofline efficiency in the report's stage rows: measured decode over the ceiling."""

from __future__ import annotations

import pytest

from analytics.report.roofline_view import with_roofline
from scenarios.catalog import default_catalog
from scenarios.roofline import decode_ceiling, memory_fit, resolve_deployment


def test_efficiency_is_measured_decode_over_the_roofline_at_the_observed_batch() -> None:
    providers = [
        {
            "provider": "h100",
            "deployment_model": "llama-3.1-405b",
            "hardware": "h100",
            "gpus": 8,
            "quantization": "fp8",
        },
        {"provider": "api"},
    ]
    stage = {
        "ok": 10,
        "input_tokens": 10_000,
        "output_tokens": 2_000,
        "achieved_concurrency": 8.0,
        "decode_tok_s_p50": 30.0,
        "output_tok_s": 200.0,
    }
    rows = with_roofline([{**stage, "provider": "h100"}, {**stage, "provider": "api"}], providers)
    deployment = resolve_deployment(
        default_catalog(), model="llama-3.1-405b", quant="fp8", hardware="h100", gpus=8
    )
    kv_tokens = 1000 + 200 / 2  # mean prompt + half the mean answer
    ceiling = decode_ceiling(deployment, 8.0, kv_tokens)
    assert memory_fit(deployment, round(kv_tokens)).max_sequences > 8
    assert rows[0]["roofline_per_stream_tok_s"] == pytest.approx(ceiling.per_stream_tok_s)
    assert rows[0]["efficiency_pct"] == pytest.approx(100 * 30.0 / ceiling.per_stream_tok_s)
    assert rows[0]["aggregate_efficiency_pct"] == pytest.approx(
        100 * 200.0 / ceiling.aggregate_tok_s
    )
    assert rows[1]["efficiency_pct"] is None
