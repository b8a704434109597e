"""Token truth in the report: unknown prompt counts are never summed as if known, and
the report says which stages' counts are unknown, tokenizer-counted or short answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analytics.report.build import build_report
from analytics.report.stored import ExactLimits
from analytics.report.token_truth import with_token_truth
from analytics.store.db import connect
from tests.support.analytics_builders import MS, S, ok_result, scenario, store_run
from workers.client.result import RequestResult

PROVIDERS = [
    {"name": name, "kind": "simulated", "model": "m"} for name in ("usage", "none", "mixed")
]
EXACT, STORED = ExactLimits(), ExactLimits(ok_requests=0, itl_gaps=0)


def _answers(unknown: int, total: int = 12, reason: str = "length") -> list[RequestResult]:
    results = [ok_result(S + i * 100 * MS, 40.0, [5.0] * 9) for i in range(total)]
    for result in results[:unknown]:
        # The server reported no prompt count (and the plan had no tokenizer).
        result.prompt_tokens = result.prompt_count_source = None
    for result in results:
        result.finish_reason = reason
    return results


def _stages(tmp_path: Path, limits: ExactLimits) -> dict[str, dict[str, Any]]:
    con = connect(tmp_path / "t.duckdb")
    store_run(
        con,
        "run",
        scenario(PROVIDERS),
        {
            ("usage", 0, "local"): _answers(0),
            ("none", 0, "local"): _answers(12, reason="stop"),
            ("mixed", 0, "local"): _answers(1),
        },
    )
    report = build_report(con, "run", exact_limits=limits)
    con.close()
    return {row["provider"]: row for row in report.stages}


@pytest.mark.parametrize("limits", [EXACT, STORED], ids=["exact", "stored"])
def test_unknown_prompt_counts_make_input_tokens_unknown_not_smaller(
    tmp_path: Path, limits: ExactLimits
) -> None:
    rows = _stages(tmp_path, limits)
    assert rows["usage"]["input_tokens"] == 12 * 50
    assert rows["usage"]["input_tok_s"] > 0
    for provider in ("none", "mixed"):
        # One unknown count of twelve is enough: a partial sum would understate the rate.
        assert rows[provider]["input_tokens"] is None, provider
        assert rows[provider]["input_tok_s"] is None, provider
        assert rows[provider]["output_tok_s"] > 0, provider  # outputs were counted
    assert (rows["none"]["prompt_tokens_unknown"], rows["mixed"]["prompt_tokens_unknown"]) == (
        12,
        1,
    )
    assert rows["usage"]["prompt_tokens_unknown"] == 0


def test_finish_reasons_and_answer_lengths_per_stage(tmp_path: Path) -> None:
    rows = _stages(tmp_path, EXACT)
    assert rows["usage"]["finish_reasons"] == "length=12"
    assert rows["none"]["finish_reasons"] == "stop=12"
    # ok_result: 10 token events against 100 planned output tokens.
    assert rows["usage"]["output_tokens_planned_mean"] == pytest.approx(100)
    assert rows["usage"]["output_tokens_mean"] == pytest.approx(10)


def test_the_fields_of_a_row_without_token_truth_rows(tmp_path: Path) -> None:
    """A stage row the token-truth query has no row for gets zero counts and no figures."""
    con = connect(tmp_path / "e.duckdb")
    row = {"provider": "x", "stage": 0, "region": "local"}
    (out,) = with_token_truth(con, "no-such-run", [row])
    con.close()
    assert out == row | {
        "prompt_tokens_unknown": 0,
        "prompt_tokens_counted": 0,
        "finish_reasons": None,
        "output_tokens_planned_mean": None,
        "output_tokens_mean": None,
    }
