"""A sweep's rates and its knee."""

from __future__ import annotations

import pytest

from analytics.decide.sweep import CurvePoint, knee, sweep_rates


def test_rates_are_evenly_spaced_strictly_between_the_two_measured() -> None:
    assert sweep_rates(2.0, 12.0, 4) == [4.0, 6.0, 8.0, 10.0]
    rates = sweep_rates(1.37, 23.9, 7)
    assert all(1.37 < r < 23.9 for r in rates) and rates == sorted(rates)
    assert len(rates) == 7


def test_an_endpoint_that_does_not_batch_gets_its_points_below_the_synchronous_rate() -> None:
    assert sweep_rates(5.0, 4.0, 4) == [1.0, 2.0, 3.0, 4.0]


def curve(*points: tuple[int, str, float, float, bool]) -> list[CurvePoint]:
    return [CurvePoint(*p) for p in points]


def test_the_knee_is_the_fastest_point_within_the_factor_of_the_synchronous_median() -> None:
    points = curve(
        (0, "synchronous", 2.0, 40.0, False),
        (1, "throughput", 20.0, 900.0, False),
        (2, "sweep", 6.0, 45.0, False),
        (3, "sweep", 10.0, 79.0, False),  # within 2 × 40
        (4, "sweep", 14.0, 81.0, False),  # just beyond
    )
    found = knee(points, 2.0)
    assert found is not None and found.stage == 3
    assert knee(points, 3.0) == points[4]


def test_an_over_saturated_point_is_never_the_knee() -> None:
    points = curve(
        (0, "synchronous", 2.0, 40.0, False),
        (2, "sweep", 6.0, 50.0, False),
        (3, "sweep", 9.0, 60.0, True),
    )
    found = knee(points, 2.0)
    assert found is not None and found.stage == 2


def test_when_every_loaded_point_is_slower_the_synchronous_stage_is_the_knee() -> None:
    points = curve((0, "synchronous", 2.0, 40.0, False), (2, "sweep", 6.0, 500.0, False))
    found = knee(points, 2.0)
    assert found is not None and found.role == "synchronous"


@pytest.mark.parametrize("sync", [None, CurvePoint(0, "synchronous", 2.0, None)])
def test_no_knee_without_a_synchronous_ttft(sync: CurvePoint | None) -> None:
    points = [CurvePoint(2, "sweep", 6.0, 50.0)] + ([sync] if sync else [])
    assert knee(points, 2.0) is None
