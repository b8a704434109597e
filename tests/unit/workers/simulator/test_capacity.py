"""What the batching model holds: stage TTFTs on virtual time, and the boundary search."""

from __future__ import annotations

import pytest

from scenarios.providers.simulate import SimulateSpec
from workers.simulator.capacity import model_capacity, stage_ttfts_ms
from workers.simulator.scheduler import BatchScheduler

SPEC = SimulateSpec(
    model="llama-3.1-8b", quant="fp8", hardware="h100", gpus=1, max_batch=4, step_overhead_ms=15
)


def test_an_idle_stage_sees_prefill_plus_one_step_and_an_overloaded_one_queues() -> None:
    cost = BatchScheduler.from_spec(SPEC).cost
    idle = stage_ttfts_ms(SPEC, 1.0, 5, 10.0, 16, 8)
    expected = (cost.seconds(0, 0, 16) + cost.seconds(1, 16, 0)) * 1000
    assert len(idle) == 5 and all(t == pytest.approx(expected, rel=1e-6) for t in idle)
    overloaded = stage_ttfts_ms(SPEC, 200.0, 200, 10.0, 16, 8)
    assert overloaded[-1] > 20 * overloaded[0]  # the queue grows with every arrival
    assert len(stage_ttfts_ms(SPEC, 10.0, 1000, 2.0, 16, 8)) == 21  # no arrival after 2 s


def test_the_first_boundary_is_found_to_its_precision() -> None:
    assert model_capacity(lambda rate: rate <= 12.34, 1.0, 100.0) == pytest.approx(12.34, rel=0.002)
    # A rate that holds again above the first failure does not count.
    islands = model_capacity(lambda rate: rate <= 12.34 or 20 <= rate <= 21, 1.0, 100.0)
    assert islands == pytest.approx(12.34, rel=0.002)
    with pytest.raises(ValueError, match="fails at 1"):
        model_capacity(lambda rate: rate <= 0.5, 1.0, 100.0)
    with pytest.raises(ValueError, match="holds at 100"):
        model_capacity(lambda rate: True, 1.0, 100.0)
