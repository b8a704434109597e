"""Which stages make a run exit 1 (analytics/decide/verdict.py)."""

from __future__ import annotations

from analytics.decide.verdict import failed_stages


def _row(stage: int, requests: int, errors: int, provider: str = "p") -> dict[str, object]:
    return {"provider": provider, "stage": stage, "region": "local", "requests": requests,
            "errors": errors}  # fmt: skip


def test_by_default_only_a_stage_whose_every_request_failed_fails() -> None:
    rows = [_row(0, 10, 10), _row(1, 10, 9), _row(2, 0, 0)]
    failed = failed_stages(rows)
    assert [(s.stage, s.errors) for s in failed] == [(0, 10)]
    assert failed[0].describe() == "p stage 0 (local): 10 of 10 requests failed (100.0 %)"


def test_a_limit_fails_stages_strictly_above_it() -> None:
    rows = [_row(0, 100, 5), _row(1, 100, 6), _row(2, 100, 0, provider="q")]
    assert [s.stage for s in failed_stages(rows, 0.05)] == [1]
    assert failed_stages(rows, 0.0)[0].stage == 0
    assert failed_stages([], 0.0) == []
