"""The over-saturation rule on synthetic stages: growing queues are caught, stable ones
(however loaded and noisy) are not."""

from __future__ import annotations

import numpy as np

from analytics.decide.saturation import ShardSamples, StageSnapshot, judge, quarter_in_flight


def growing(offered: float, served: float, seconds: int) -> ShardSamples:
    """An open loop whose server serves ``served`` of ``offered`` req/s: its backlog grows."""
    return ShardSamples(
        [
            (float(t), round(offered * t), round(min(offered, served) * t))
            for t in range(1, seconds + 1)
        ]
    )


def stable(rate: float, latency_s: float, seconds: int, seed: int = 0) -> ShardSamples:
    """A stable open loop with Poisson noise around ``rate × latency`` in flight."""
    rng = np.random.default_rng(seed)
    samples, sent, done = [], 0, 0
    for t in range(1, seconds + 1):
        sent += int(rng.poisson(rate))
        in_flight = int(rng.poisson(rate * latency_s))
        done = max(done, sent - in_flight)
        samples.append((float(t), sent, done))
    return ShardSamples(samples)


def test_a_growing_queue_with_growing_latency_is_over_saturated() -> None:
    snapshot = StageSnapshot(
        elapsed_s=8,
        completed=150,
        offered_rps=60,
        cap=None,
        shards=[growing(60, 20, 8)],
        ttft_quarters_ms=[300.0, 900.0, 1600.0, 2400.0],
    )
    found = judge(snapshot, min_s=2, min_requests=40)
    assert found is not None
    reason, evidence = found
    assert "TTFT from intent rose 300 → 2,400 ms" in reason
    assert evidence["signals"][:2] == ["latency growing", "in flight growing"]
    assert "arrivals no longer served" in evidence["signals"]
    assert evidence["in_flight"] == sorted(evidence["in_flight"])


def test_it_is_judged_only_after_min_s_and_min_requests() -> None:
    snapshot = StageSnapshot(8, 150, 60, None, [growing(60, 20, 8)], [300.0, 900.0, 1600.0, 2400.0])
    assert judge(snapshot, min_s=10, min_requests=40) is None
    assert judge(snapshot, min_s=2, min_requests=200) is None


def test_latency_must_grow_in_every_quarter_and_at_least_double() -> None:
    shards = [growing(60, 20, 8)]
    for quarters in ([300.0, 900.0, 800.0, 2400.0], [300.0, 320.0, 340.0, 360.0], [None] * 4):
        snapshot = StageSnapshot(8, 150, 60, None, shards, quarters)
        assert judge(snapshot, 2, 40) is None, quarters


def test_stable_loaded_stages_are_never_called_saturated() -> None:
    # 200 noisy stable stages at 90 % load, with latency quarters as noisy as a few dozen
    # requests give: the rule must hold back on every one.
    rng = np.random.default_rng(7)
    for seed in range(200):
        quarters = list(200 + rng.normal(0, 60, 4).clip(-150, 400))
        snapshot = StageSnapshot(
            12, 300, 30, None, [stable(30, 1.5, 12, seed)], [float(q) for q in quarters]
        )
        assert judge(snapshot, 2, 40) is None, (seed, quarters)


def test_a_capped_open_loop_pinned_at_its_cap_is_over_saturated() -> None:
    # max_in_flight 20: in flight cannot grow, arrivals wait for slots (schedule lag).
    pinned = ShardSamples([(float(t), 20 * t + 20, 20 * t) for t in range(1, 11)])
    snapshot = StageSnapshot(10, 200, 60, 20, [pinned], [100.0, 600.0, 1200.0, 1900.0])
    found = judge(snapshot, 2, 40)
    assert found is not None and "in flight pinned at the cap" in found[1]["signals"]


def test_in_flight_sums_a_regions_parts_on_one_grid() -> None:
    a = ShardSamples([(1.0, 10, 5), (2.0, 20, 10), (3.0, 30, 15), (4.0, 40, 20)])
    b = ShardSamples([(1.0, 10, 5), (2.0, 20, 10), (3.0, 30, 15), (4.0, 40, 20)])
    one = StageSnapshot(4, 40, 20, None, [a], [None] * 4)
    both = StageSnapshot(4, 80, 40, None, [a, b], [None] * 4)
    assert quarter_in_flight(both) == [2 * v for v in quarter_in_flight(one)]
    assert ShardSamples([]).at(5.0) == (0, 0)
