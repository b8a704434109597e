"""Deterministic request plans and length distributions."""

from __future__ import annotations

import random
import statistics

from scenarios.model import (
    FixedLength,
    LognormalLength,
    MixClass,
    NormalLength,
    UniformLength,
    Workload,
)
from workers.prompts import plan_request, sample_length


def test_plans_are_deterministic_per_seed_stage_and_seq() -> None:
    workload = Workload(
        mix=[
            MixClass(
                prompt_tokens=FixedLength(dist="fixed", value=50),
                output_tokens=UniformLength(dist="uniform", min=1, max=100),
            )
        ]
    )
    a = plan_request(workload, 7, 1, 3)
    assert a == plan_request(workload, 7, 1, 3)
    assert a != plan_request(workload, 7, 1, 4)
    assert len(a.prompt.split()) == 50


def test_lognormal_mean_and_bounds() -> None:
    rng = random.Random(1)
    dist = LognormalLength(dist="lognormal", mean=2000, sigma=0.5, min=64, max=100_000)
    draws = [sample_length(dist, rng) for _ in range(20_000)]
    assert abs(statistics.fmean(draws) - 2000) / 2000 < 0.03
    clipped = LognormalLength(dist="lognormal", mean=2000, sigma=0.5, min=1500, max=2500)
    assert all(1500 <= sample_length(clipped, rng) <= 2500 for _ in range(1000))


def test_normal_is_clipped_to_at_least_min() -> None:
    rng = random.Random(2)
    dist = NormalLength(dist="normal", mean=5, std=20, min=1, max=30)
    assert all(1 <= sample_length(dist, rng) <= 30 for _ in range(1000))


def test_mix_weights_are_respected() -> None:
    small = MixClass(
        weight=3,
        prompt_tokens=FixedLength(dist="fixed", value=1),
        output_tokens=FixedLength(dist="fixed", value=1),
    )
    large = MixClass(
        weight=1,
        prompt_tokens=FixedLength(dist="fixed", value=9),
        output_tokens=FixedLength(dist="fixed", value=1),
    )
    workload = Workload(mix=[small, large])
    share = sum(plan_request(workload, 0, 0, i).prompt_tokens == 1 for i in range(4000)) / 4000
    assert 0.72 < share < 0.78
