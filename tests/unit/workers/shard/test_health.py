"""The shard health monitor's figures: percentiles and event-loop lag."""

from __future__ import annotations

import asyncio
import time

import pytest

from workers.shard.health import ShardHealth, percentile


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
        health.late_windows = [(1000 * ms, 1080 * ms), (5000 * ms, 5090 * ms)]
        health.read_gaps = [(1002 * ms, 1080 * ms), (5001 * ms, 5090 * ms)]
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
