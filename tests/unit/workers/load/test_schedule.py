"""Arrival schedules: seeded and reproducible, the right rate and shape, parts partition."""

from __future__ import annotations

import itertools
import statistics

import pytest

from workers.load.schedule import ARRIVALS, arrival_offsets, part_arrivals, schedule_rng


def take(arrival: str, rps: float, n: int, burstiness: float = 1.0, seed: int = 3) -> list[int]:
    return list(
        itertools.islice(arrival_offsets(arrival, rps, burstiness, schedule_rng(seed, 0)), n)
    )


@pytest.mark.parametrize("arrival", sorted(ARRIVALS))
def test_same_seed_same_schedule_other_seed_or_stage_other_schedule(arrival: str) -> None:
    assert take(arrival, 10, 100) == take(arrival, 10, 100)
    if arrival != "constant":
        assert take(arrival, 10, 100) != take(arrival, 10, 100, seed=4)
        other_stage = arrival_offsets(arrival, 10, 1.0, schedule_rng(3, 1))
        assert take(arrival, 10, 100) != list(itertools.islice(other_stage, 100))


@pytest.mark.parametrize(
    ("arrival", "burstiness"), [("constant", 1), ("poisson", 1), ("gamma", 0.5), ("gamma", 4)]
)
def test_mean_gap_is_one_over_rate(arrival: str, burstiness: float) -> None:
    offsets = take(arrival, 40, 20_001, burstiness)
    assert offsets[0] == 0
    assert offsets == sorted(offsets)
    rate = 20_000 / (offsets[-1] / 1e9)
    assert rate == pytest.approx(40, rel=0.03)


def test_constant_rate_never_accumulates_rounding() -> None:
    # 1/3 s gaps: per-gap rounding would drift; offsets are rounded once each.
    offsets = take("constant", 3, 3001)
    assert offsets[3000] == 1_000_000_000_000
    assert {b - a for a, b in itertools.pairwise(offsets)} <= {333_333_333, 333_333_334}


def test_gamma_burstiness_sets_the_coefficient_of_variation() -> None:
    def cv(burstiness: float) -> float:
        gaps = [b - a for a, b in itertools.pairwise(take("gamma", 10, 20_001, burstiness))]
        return statistics.pstdev(gaps) / statistics.fmean(gaps)

    assert cv(0.25) == pytest.approx(2.0, rel=0.1)  # 1/sqrt(k): bursty
    assert cv(1.0) == pytest.approx(1.0, rel=0.05)  # Poisson
    assert cv(4.0) == pytest.approx(0.5, rel=0.05)  # more regular than Poisson


def test_parts_partition_the_stage_schedule_round_robin() -> None:
    stage = list(enumerate(take("poisson", 100, 1000)))
    # Offsets are endless: bound the parts by the duration the 1000 arrivals span.
    duration = stage[-1][1] + 1
    parts = [
        list(
            part_arrivals(
                arrival_offsets("poisson", 100, 1.0, schedule_rng(3, 0)), p, 3, None, duration
            )
        )
        for p in range(3)
    ]
    assert sorted(a for part in parts for a in part) == stage
    assert [len(p) for p in parts] == [334, 333, 333]


def test_count_and_duration_bound_a_part() -> None:
    offsets = arrival_offsets("constant", 10, 1.0, schedule_rng(0, 0))
    assert [seq for seq, _ in part_arrivals(offsets, 1, 2, 3, None)] == [1, 3, 5]
    offsets = arrival_offsets("constant", 10, 1.0, schedule_rng(0, 0))
    bounded = list(part_arrivals(offsets, 0, 1, None, 1_000_000_000))
    assert len(bounded) == 10 and bounded[-1] == (9, 900_000_000)
