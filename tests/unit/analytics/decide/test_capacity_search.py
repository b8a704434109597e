"""The capacity search's decisions: Wilson verdicts, the error budget of early looks, and
searches against endpoints whose true capacity the test knows."""

from __future__ import annotations

import math
import random

import pytest

from analytics.decide.capacity_search import (
    Probe,
    SearchState,
    interim_alpha,
    next_step,
    provider_verdict,
    region_verdict,
    wilson,
)
from scenarios.load.adaptive import FindCapacity
from scenarios.slo import SLO

SLO_500 = SLO(ttft_ms=500)


def test_wilson_matches_the_textbook_interval() -> None:
    # 8 of 10 at 95 %: the Wilson score interval is 0.490–0.943 (z = 1.96).
    low, high = wilson(8, 10, 0.95)
    assert low == pytest.approx(0.4902, abs=1e-3) and high == pytest.approx(0.9433, abs=1e-3)
    assert wilson(0, 0, 0.95) == (0.0, 1.0)
    low, high = wilson(100, 100, 0.95)
    assert high == 1.0 and low == pytest.approx(100 / (100 + 1.959964**2), abs=1e-6)


def test_verdicts_need_the_interval_clear_of_the_target() -> None:
    assert region_verdict(100, 100, 0.9, 0.95) == "pass"
    assert region_verdict(50, 100, 0.9, 0.95) == "fail"
    assert region_verdict(92, 100, 0.9, 0.95) == "undecided"  # 0.92, interval spans 0.9
    assert region_verdict(0, 0, 0.9, 0.95) == "undecided"
    assert provider_verdict(["pass", "pass"]) == "pass"
    assert provider_verdict(["pass", "undecided"]) == "undecided"
    assert provider_verdict(["pass", "fail"]) == "fail"
    assert provider_verdict(["pass"], saturated=True) == "fail"
    assert provider_verdict([]) == "undecided"


def test_early_looks_and_the_final_verdict_never_spend_more_than_alpha() -> None:
    alpha = 0.05
    spent = alpha / 2 + sum(interim_alpha(look, 0.95) for look in range(1, 60))
    assert spent <= alpha + 1e-12
    assert interim_alpha(1, 0.95) == pytest.approx(alpha / 4)


def search(
    capacity: float, throughput: float, config: FindCapacity, sync_rps: float = 2.0
) -> tuple[SearchState, list[Probe]]:
    """Run a search against an endpoint that holds exactly up to ``capacity``."""
    probes = [Probe(0, "synchronous", 1, "pass" if capacity >= sync_rps else "fail", sync_rps)]
    if config.by == "rate":
        probes.append(Probe(1, "throughput", config.throughput_concurrency, None, throughput))
    while True:
        state = next_step(config, probes)
        if state.done:
            return state, probes
        level = state.next_level
        assert level is not None and level not in [p.level for p in probes if p.role == "probe"]
        verdict = "pass" if level <= capacity else "fail"
        probes.append(Probe(len(probes), "probe", level, verdict, None))


@pytest.mark.parametrize("capacity", [2.5, 4.0, 9.7, 10.4])
def test_a_search_by_rate_brackets_the_capacity_within_its_precision(capacity: float) -> None:
    config = FindCapacity(slo=SLO_500, precision=0.05, max_stages=20)
    state, probes = search(capacity, 10.5, config)
    assert state.state == "converged"
    low, high = state.low, state.high
    assert low <= capacity < high and high <= low * 1.05
    # Bisection on a log scale from [2, 10.5]: a handful of probes, not a grid.
    assert len(probes) <= 2 + math.ceil(math.log2(math.log(10.5 / 2) / math.log(1.05))) + 2


def test_a_throughput_stage_that_underestimates_widens_the_bracket_upwards() -> None:
    config = FindCapacity(slo=SLO_500, precision=0.05, max_stages=30)
    state, _ = search(30.0, 10.5, config)
    assert state.state == "converged"
    assert state.low <= 30 < state.high


def test_a_capacity_below_one_stream_is_unattainable_at_once() -> None:
    config = FindCapacity(slo=SLO_500)
    state, probes = search(1.0, 10.5, config)
    assert state.state == "unattainable" and len(probes) == 2


def test_a_capacity_below_the_synchronous_rate_is_searched_downwards() -> None:
    config = FindCapacity(slo=SLO_500, precision=0.05, max_stages=30)
    probes = [
        Probe(0, "synchronous", 1, "pass", 2.0),
        Probe(1, "throughput", 256, None, 10.0),
    ]
    while not (state := next_step(config, probes)).done:
        assert state.next_level is not None
        verdict = "pass" if state.next_level <= 0.7 else "fail"
        probes.append(Probe(len(probes), "probe", state.next_level, verdict, None))
    assert state.state == "converged" and state.low is not None and state.high is not None
    assert state.low <= 0.7 < state.high


def test_the_stage_budget_ends_a_search_with_its_bracket() -> None:
    config = FindCapacity(slo=SLO_500, precision=0.001, max_stages=5)
    state, probes = search(7.3, 10.5, config)
    assert state.state == "max_stages" and len(probes) == 5
    assert state.low is not None and state.low <= 7.3


def test_a_search_reaching_max_rps_says_so() -> None:
    config = FindCapacity(slo=SLO_500, max_rps=12.0, max_stages=30)
    state, _ = search(1000.0, 10.5, config)
    assert state.state == "at_max" and state.low == 12.0


def test_a_pass_above_a_failure_is_noise_and_does_not_raise_the_bracket() -> None:
    config = FindCapacity(slo=SLO_500, precision=0.05)
    probes = [
        Probe(0, "synchronous", 1, "pass", 2.0),
        Probe(1, "throughput", 256, None, 10.0),
        Probe(2, "probe", 6.0, "fail", None),
        Probe(3, "probe", 8.0, "pass", None),
        Probe(4, "probe", 4.0, "pass", None),
    ]
    state = next_step(config, probes)
    assert (state.low, state.high) == (4.0, 6.0)
    assert state.next_level is not None and 4.0 < state.next_level < 6.0


def test_undecided_counts_as_not_holding() -> None:
    config = FindCapacity(slo=SLO_500)
    probes = [
        Probe(0, "synchronous", 1, "pass", 2.0),
        Probe(1, "throughput", 256, None, 10.0),
        Probe(2, "probe", 4.5, "undecided", None),
    ]
    assert next_step(config, probes).high == 4.5


@pytest.mark.parametrize("capacity", [1, 7, 23, 200])
def test_a_search_by_concurrency_doubles_then_bisects_integers(capacity: int) -> None:
    config = FindCapacity(slo=SLO_500, by="concurrency", throughput_concurrency=128)
    state, probes = search(capacity, 0.0, config, sync_rps=1.0)
    levels = [p.level for p in probes]
    assert all(level == int(level) for level in levels)
    if capacity >= 128:
        assert state.state == "at_max" and state.low == 128
    else:
        assert state.state == "converged"
        assert state.low == capacity and state.high == capacity + 1


def test_a_search_needs_its_synchronous_stage_to_have_measured() -> None:
    config = FindCapacity(slo=SLO_500)
    probes = [Probe(0, "synchronous", 1, "undecided", None)]
    assert next_step(config, probes).state == "failed"
    with pytest.raises(ValueError, match="synchronous"):
        next_step(config, [])


def test_random_endpoints_always_end_with_a_bracket_around_their_capacity() -> None:
    rng = random.Random(1)
    for _ in range(2000):
        sync = rng.uniform(0.5, 10)
        throughput = sync * rng.uniform(0.5, 50)
        capacity = rng.uniform(sync, 3 * throughput)
        config = FindCapacity(
            slo=SLO_500, precision=rng.choice([0.01, 0.05, 0.1, 0.2]), max_stages=40
        )
        state, probes = search(capacity, throughput, config, sync_rps=sync)
        assert state.state in ("converged", "at_max"), (sync, throughput, capacity, state)
        if state.state == "converged":
            assert state.low <= capacity < state.high
        assert len(probes) <= 25
