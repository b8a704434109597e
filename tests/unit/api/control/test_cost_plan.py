"""The dry run's plan and cost bound: exact arithmetic per load shape, and how each
stage is bounded."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest

from api.control.cost_plan import (
    PROMPT_SLACK_TOKENS,
    DatasetCeiling,
    arrival_ceiling,
    ceiling_of,
    cost_plan,
    request_ceiling,
)
from scenarios.model import Scenario


def scenario(load: dict[str, Any], **extra: Any) -> Scenario:
    data: dict[str, Any] = {
        "name": "cost",
        "providers": [
            {
                "name": "paid",
                "kind": "simulated",
                "pricing": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
            },
            {"name": "free", "kind": "simulated"},
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 100},
                    "output_tokens": {"dist": "uniform", "min": 10, "max": 50},
                }
            ]
        },
        "load": load,
    }
    data.update(extra)
    return Scenario.model_validate(data)


# 100 planned prompt tokens: +10% +32 = 142 per request; 50 output tokens at most.
PROMPT = 142
OUTPUT = 50


def test_closed_loop_counts_exactly() -> None:
    plan = cost_plan(scenario({"concurrency": [1, 4], "requests_per_level": 10}))
    paid = next(r for r in plan.rows if r.provider == "paid")
    assert paid.requests == 20
    assert paid.prompt_tokens == 20 * PROMPT
    assert paid.output_tokens == 20 * OUTPUT
    expected = Fraction(20 * PROMPT * 1 + 20 * OUTPUT * 2, 10**6)
    assert Fraction(paid.cost_bound_usd or 0) >= expected
    assert paid.cost_bound_usd == pytest.approx(float(expected), rel=1e-15)
    free = next(r for r in plan.rows if r.provider == "free")
    assert not free.priced and free.cost_bound_usd is None
    assert plan.cost_bound_usd == paid.cost_bound_usd
    assert plan.shards == 4  # 2 providers × 2 stages
    assert [s.bounded_by for s in plan.stages] == ["requests_per_level"] * 2
    assert plan.unbounded == []


def test_regions_multiply_rows() -> None:
    plan = cost_plan(scenario({"concurrency": [2], "requests_per_level": 5}, regions=["eu", "us"]))
    assert [(r.provider, r.region) for r in plan.rows] == [
        ("paid", "eu"),
        ("paid", "us"),
        ("free", "eu"),
        ("free", "us"),
    ]
    assert plan.requests == 20
    assert plan.cost_bound_usd == pytest.approx(2 * (5 * PROMPT + 5 * OUTPUT * 2) / 1e6)


def test_open_loop_duration_ceiling_is_stated() -> None:
    plan = cost_plan(scenario({"rate": {"rps": [10], "arrival": "constant"}, "duration_s": 3}))
    (stage,) = plan.stages
    assert stage.requests == 31  # ⌈10 × 3⌉ + 1
    assert "ceiling" in stage.bounded_by
    poisson = cost_plan(scenario({"rate": {"rps": [10]}, "duration_s": 3}))
    assert poisson.stages[0].requests == math.ceil(30 + 10 * math.sqrt(30) + 10)


def test_request_count_caps_the_duration_ceiling() -> None:
    plan = cost_plan(scenario({"rate": {"rps": [10]}, "duration_s": 3, "requests_per_level": 7}))
    assert plan.stages[0].requests == 7
    assert plan.stages[0].bounded_by == "requests_per_level"


def test_closed_loop_over_duration_is_unbounded() -> None:
    plan = cost_plan(scenario({"concurrency": [2], "duration_s": 5}))
    assert plan.cost_bound_usd is None
    assert "requests_per_level" in plan.unbounded[0]
    assert plan.duration_estimate_s == 5


def test_unpriced_closed_loop_over_duration_is_not_flagged() -> None:
    data = scenario({"concurrency": [2], "duration_s": 5}).model_dump(mode="json")
    data["providers"] = [{"name": "free", "kind": "simulated"}]
    plan = cost_plan(Scenario.model_validate(data))
    assert plan.unbounded == [] and not plan.priced


def test_sweep_at_its_stage_bound() -> None:
    plan = cost_plan(scenario({"sweep": {"points": 3}, "requests_per_level": 20}))
    assert len(plan.stages) == 5  # synchronous, throughput, 3 points
    paid = next(r for r in plan.rows if r.provider == "paid")
    assert paid.requests == 100
    assert all("sweep" in s.bounded_by for s in plan.stages)


def test_sessions_count_the_conversation_so_far() -> None:
    plan = cost_plan(
        scenario(
            {"concurrency": [1], "sessions_per_level": 2},
            workload={
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 100},
                        "output_tokens": {"dist": "fixed", "value": 50},
                    }
                ],
                "sessions": {"turns": 3},
            },
        )
    )
    paid = next(r for r in plan.rows if r.provider == "paid")
    per_session = PROMPT + (2 * PROMPT + 50) + (3 * PROMPT + 2 * 50)
    assert paid.requests == 6
    assert paid.prompt_tokens == 2 * per_session
    assert paid.output_tokens == 2 * 3 * 50


def test_tools_and_prefix_add_to_the_prompt() -> None:
    base = scenario({"concurrency": [1], "requests_per_level": 1}).workload
    with_prefix = base.model_copy(update={"shared_prefix_tokens": 1000})
    assert request_ceiling(with_prefix, {}) == (math.ceil(1100 * 1.1) + PROMPT_SLACK_TOKENS, 50)


def test_dataset_rows_bound_the_prompt() -> None:
    content = b'{"prompt": "hello there", "max_tokens": 7}\n{"prompt": "a longer one, yes"}\n'
    ceiling = ceiling_of(content)
    assert ceiling == DatasetCeiling(max(len(x) for x in content.splitlines()), 7, False)


def test_missing_dataset_is_unbounded() -> None:
    plan = cost_plan(
        scenario(
            {"concurrency": [1], "requests_per_level": 3},
            workload={
                "prompts": {"dataset": "ds-" + "0" * 64},
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 1},
                        "output_tokens": {"dist": "fixed", "value": 5},
                    }
                ],
            },
        )
    )
    assert plan.cost_bound_usd is None and "not stored" in plan.unbounded[0]


def test_arrival_ceiling_grows_with_burstiness() -> None:
    assert arrival_ceiling(1, 10, "gamma", 0.25) > arrival_ceiling(1, 10, "poisson")


def test_budget_cap_in_plan() -> None:
    plan = cost_plan(
        scenario({"concurrency": [1], "requests_per_level": 1}, budget={"max_cost_usd": 0.5})
    )
    assert plan.max_cost_usd == 0.5
    assert plan.to_json()["max_cost_usd"] == 0.5


def test_a_cached_input_price_and_a_target_hit_rate_never_lower_the_bound() -> None:
    load = {"concurrency": [2], "requests_per_level": 10}
    plain = cost_plan(scenario(load))
    cached = scenario(load)
    data = cached.model_dump(mode="json", exclude_none=True)
    data["providers"][0]["pricing"]["cached_input_per_mtok"] = 0.1
    data["workload"]["prefix_cache"] = {"target_hit_rate": 0.9}
    with_cache = cost_plan(Scenario.model_validate(data))
    # No hit is promised: every prompt token at the full input price, as without a cache.
    assert with_cache.cost_bound_usd == plain.cost_bound_usd
    paid = next(r for r in with_cache.rows if r.provider == "paid")
    assert paid.cost_bound_usd == pytest.approx((10 * PROMPT * 1.0 + 10 * OUTPUT * 2.0) / 1e6)
