"""The shard health monitor's figures: percentiles and event-loop lag."""

from __future__ import annotations

import asyncio
import time

import pytest

from workers.health import ShardHealth, percentile


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
