"""Which faults a request suffers: the legacy rates keep their draws, bursts are timed
from the first request, stalls add up before the first failure that fired."""

from __future__ import annotations

import random
from typing import Any

from scenarios.providers.simulate import SimulateSpec
from workers.simulator.faults import FaultPlan


def _plan(**spec: Any) -> FaultPlan:
    model = SimulateSpec.model_validate(spec)
    return FaultPlan(model, random.Random(model.seed))


def test_legacy_rates_draw_as_before() -> None:
    plan = _plan(error_rate=0.3, error_status=429, stall_rate=0.2, stall_ms=50, cut_rate=0.1)
    rng = random.Random(0)  # the draws the simulator made before fault lists existed
    for i in range(200):
        error, stall, cut = rng.random() < 0.3, rng.random() < 0.2, rng.random() < 0.1
        faults = plan.draw(float(i))
        assert (faults.status, faults.kind) == ((429, "http_429") if error else (None, None))
        assert faults.retry_after_s == (1 if error else None)
        assert faults.stall_ms == (50 if stall and not error else 0)
        assert faults.cut == cut


def test_a_burst_fails_every_request_inside_it_from_the_first_request() -> None:
    plan = _plan(faults=[{"kind": "http_429", "burst": {"every_s": 10, "for_s": 2}}])
    outcomes = [plan.draw(100.0 + t).status for t in (0, 1.9, 2.1, 9.9, 10.0, 13)]
    assert outcomes == [429, 429, None, None, 429, None]
    assert plan.origin == 100.0


def test_an_offset_burst_spares_the_first_requests() -> None:
    plan = _plan(
        faults=[
            {"kind": "http_5xx", "status": 502, "burst": {"every_s": 10, "for_s": 2, "offset_s": 5}}
        ]
    )
    assert [plan.draw(t).status for t in (0, 4.9, 5.0, 6.9, 7.0)] == [None, None, 502, 502, None]


def test_stalls_add_up_and_come_with_the_first_failure() -> None:
    plan = _plan(
        faults=[
            {"kind": "stall", "rate": 1, "stall_ms": 100},
            {"kind": "reset", "rate": 1},
            {"kind": "http_429", "rate": 1, "retry_after_s": 2.5},
            {"kind": "stall", "rate": 1, "stall_ms": 50},
        ]
    )
    faults = plan.draw(0.0)
    assert faults.reset and faults.status is None and faults.kind == "reset" and faults.fails
    assert faults.stall_ms == 150


def test_a_429_sends_its_retry_after_in_whole_seconds() -> None:
    faults = _plan(faults=[{"kind": "http_429", "rate": 1, "retry_after_s": 2.5}]).draw(0.0)
    assert (faults.status, faults.retry_after_s, faults.kind) == (429, 3, "http_429")


def test_rates_are_seeded_draws() -> None:
    spec = {"seed": 7, "faults": [{"kind": "http_5xx", "rate": 0.25}, {"kind": "cut", "rate": 0.5}]}
    first = [(f.status, f.cut) for f in map(_plan(**spec).draw, range(500))]
    again = [(f.status, f.cut) for f in map(_plan(**spec).draw, range(500))]
    assert first == again
    failed = sum(status is not None for status, _ in first)
    assert 75 < failed < 175  # a quarter of 500, give or take four standard deviations
    other = [(f.status, f.cut) for f in map(_plan(**{**spec, "seed": 8}).draw, range(500))]
    assert other != first


def test_no_faults_is_a_healthy_request() -> None:
    faults = _plan().draw(0.0)
    assert not faults.fails and not faults.cut and faults.stall_ms == 0 and faults.kind is None
