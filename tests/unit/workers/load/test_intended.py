"""IntendedStarts answers what a list of every start answered, in bounded memory."""

from __future__ import annotations

import random

import pytest

from workers.load.intended import IntendedStarts

S = 1_000_000_000


def _window(
    starts: list[int], start: int, warmup: int, cooldown: int, duration: int | None
) -> tuple[int, int, int]:
    """The stage window as stage_window computes it, from every start (the old way)."""
    end = start + duration if duration is not None else max(starts, default=start)
    steady_start = start + warmup
    steady_end = max(steady_start, end - cooldown)
    return steady_start, steady_end, sum(1 for t in starts if steady_start <= t < steady_end)


@pytest.mark.parametrize("duration", [None, 60 * S])
@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_the_steady_count_equals_the_count_over_every_start(
    duration: int | None, ordered: bool, seed: int
) -> None:
    rng = random.Random(seed)
    start = 10**12
    warmup, cooldown = rng.choice([0, 5 * S]), rng.choice([0, 1, 7 * S])
    # A closed loop's or sessions' starts are out of order by up to a few seconds.
    starts = sorted(start + rng.randrange(0, 70 * S) for _ in range(3_000))
    if not ordered:
        starts = [t + rng.randrange(-3 * S, 3 * S) for t in starts]
    intended = IntendedStarts()
    intended.set_window(warmup / S, cooldown / S)
    intended.begin(start, duration)
    for t in starts:
        intended.append(t)
    steady_start, steady_end, expected = _window(starts, start, warmup, cooldown, duration)
    assert intended.steady(steady_start, steady_end) == expected
    assert (len(intended), intended.first, intended.latest, intended.max) == (
        len(starts), starts[0], starts[-1], max(starts),
    )  # fmt: skip


def test_without_a_duration_only_a_cool_down_of_starts_is_held() -> None:
    intended = IntendedStarts()
    intended.set_window(0, 1.0)
    intended.begin(0, None)
    starts = range(0, 600 * S, S // 500)  # 500 req/s for ten minutes
    for t in starts:
        intended.append(t)
    assert len(intended._tail) < 1024  # about a second's starts (twice at most), not 300,000
    steady_start, steady_end, expected = _window(list(starts), 0, 0, S, None)
    assert intended.steady(steady_start, steady_end) == expected == 299_499


def test_an_empty_stage_has_no_steady_start() -> None:
    intended = IntendedStarts()
    intended.begin(5, None)
    assert intended.steady(5, 5) == 0 and len(intended) == 0 and intended.max is None


def test_misuse_is_refused() -> None:
    intended = IntendedStarts()
    with pytest.raises(RuntimeError):
        intended.append(1)
    intended.begin(0, 10 * S)
    with pytest.raises(RuntimeError):
        intended.set_window(1, 1)
    with pytest.raises(ValueError):
        intended.steady(1, 10 * S)  # not the window it counted
    with pytest.raises(ValueError):
        intended.steady(0, 5 * S)
