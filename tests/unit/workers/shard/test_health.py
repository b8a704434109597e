"""The shard health monitor's figures: percentiles and event-loop lag."""

from __future__ import annotations

import asyncio
import time
from array import array

import pytest

from workers.shard.health import ShardHealth, percentile
from workers.shard.spans import Spans


def test_percentile_matches_numpy_linear() -> None:
    np = pytest.importorskip("numpy")
    values = [5, 1, 9, 3, 7, 2, 8]
    for q in (0.0, 0.5, 0.9, 0.99, 1.0):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q * 100)))
    assert percentile([], 0.5) == 0.0


def test_a_blocked_loop_shows_as_loop_lag() -> None:
    async def main() -> dict[str, str | int | float]:
        health = ShardHealth()
        async with health:
            await asyncio.sleep(0.1)
            time.sleep(0.08)  # noqa: ASYNC251 - the loop is blocked: the probe wakes ~80 ms late
            await asyncio.sleep(0.1)
        return health.summary()

    summary = asyncio.run(main())
    assert float(summary["loop_lag_max_ms"]) >= 50
    assert summary["loop_cpu_util"] != -1.0
    assert "target_rps" not in summary


def test_settled_merges_count_as_they_would_have_unsettled() -> None:
    from workers.client.result import RequestResult

    ms = 1_000_000

    async def measured() -> ShardHealth:
        health = ShardHealth(kernel_stamps=True)
        async with health:
            pass
        return health

    def result(sent: int, stamps: list[int]) -> RequestResult:
        return RequestResult(intended_start=sent, sent=sent, end=stamps[-1], token_stamps=stamps)

    shards = [asyncio.run(measured()), asyncio.run(measured())]
    for health in shards:
        health.late_windows = Spans([(1000 * ms, 1080 * ms), (5000 * ms, 5090 * ms)])
        health.read_gaps = Spans([(1002 * ms, 1080 * ms), (5001 * ms, 5090 * ms)])
        for sent in range(900, 930):
            health.add(result(sent * ms, [(sent + 100 + 10 * i) * ms for i in range(5)]))
        health.add(result(900 * ms, [1070 * ms, 1070 * ms, 1090 * ms]))  # merged first token
        health.add(result(4900 * ms, [5050 * ms, 5060 * ms, 5085 * ms, 5085 * ms]))
    settled, pending = shards
    settled._settle(3000 * ms)  # the first stall's merges settle, the second's wait
    assert len(settled.merges) == 1 and len(pending.merges) == 2
    keys = ("shared_stamps", "merged_tokens", "merged_first_tokens", "merge_error_ttft_ms",
            "merged_ttft_tail", "read_stalls", "client_bound_reasons")  # fmt: skip
    a, b = settled.summary(), pending.summary()
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
    assert a["merged_tokens"] == 2 and a["merged_first_tokens"] == 1
    # Settled bounds are kept in buckets: within their 0.1 %.
    assert a["merge_error_p99_ms"] == pytest.approx(b["merge_error_p99_ms"], rel=2e-3)


def test_letting_old_gaps_go_keeps_the_stage_totals() -> None:
    """Read gaps and late windows older than any running request can need are dropped
    (bounded memory in long stages); the stall counts and merges stay what they were."""
    from workers.client.result import RequestResult

    ms = 1_000_000

    async def measured() -> ShardHealth:
        health = ShardHealth(kernel_stamps=True, longest_request_s=1.0)
        async with health:
            pass
        return health

    shards = [asyncio.run(measured()), asyncio.run(measured())]
    for health in shards:
        health.late_windows = Spans([(1000 * ms, 1080 * ms), (2000 * ms, 2010 * ms),
                                     (5000 * ms, 5090 * ms)])  # fmt: skip
        health.read_gaps = Spans([(1002 * ms, 1080 * ms), (3000 * ms, 3050 * ms),
                                  (4990 * ms, 5090 * ms)])  # fmt: skip
        health.add(RequestResult(intended_start=900 * ms, sent=900 * ms, end=1090 * ms,
                                 token_stamps=array("q", [1070 * ms, 1070 * ms, 1090 * ms])))  # fmt: skip
    kept, dropped = shards
    dropped._settle(1500 * ms)
    dropped._let_go(4995 * ms)  # the gap across it and the window it overlaps stay
    assert list(dropped.read_gaps) == [(4990 * ms, 5090 * ms)]
    assert list(dropped.late_windows) == [(5000 * ms, 5090 * ms)]
    keys = ("loop_stalls", "read_stalls", "merged_tokens", "merged_first_tokens")
    a, b = kept.summary(), dropped.summary()
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
    assert a["loop_stalls"] == 3 and a["read_stalls"] == 2 and a["merged_tokens"] == 1


def test_spans_drop_what_ended_before_a_time_and_count_it() -> None:
    spans = Spans([(1, 2), (3, 5), (6, 9)])
    assert spans.first_ending_at_or_after(5) == 1 and spans.after_last_starting_at_or_before(6) == 3
    assert list(spans.between(1, 3)) == [(3, 5), (6, 9)]
    assert spans.drop_ending_before(5) == 1 and spans.drop_ending_before(5) == 0
    assert list(spans) == [(3, 5), (6, 9)] and len(spans) == 2 and spans.total == 3
    assert list(spans.starts) == [3, 6] and list(spans.ends) == [5, 9]
