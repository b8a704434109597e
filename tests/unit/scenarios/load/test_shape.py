"""The load section (closed vs open loop, stage length, warm-up, replay), and the bounds
it shares with a run's overrides."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from scenarios.limits import (
    MAX_CONCURRENCY,
    MAX_DURATION_S,
    MAX_REQUESTS_PER_LEVEL,
    MAX_RPS,
)
from scenarios.load.shape import Load, RateLoad
from scenarios.loader import ScenarioError, parse_scenario
from scenarios.overrides import Overrides
from tests.support.builders import VALID_SCENARIO

CLOSED = "  concurrency: [1, 8]\n  requests_per_level: 50\n"


def with_load(load: str, workload: str | None = None) -> str:
    text = VALID_SCENARIO.replace(CLOSED, load)
    if workload is not None:
        start = text.index("workload:")
        text = text[:start] + workload + text[text.index("load:") :]
    return text


def messages(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text)
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


def test_open_loop_rates_and_defaults() -> None:
    load = parse_scenario(with_load("  rate: {rps: 5}\n  duration_s: 20\n")).load
    assert load.rate is not None and load.rate.rps == [5.0]
    assert (load.rate.arrival, load.rate.burstiness, load.rate.max_in_flight) == (
        "poisson",
        1.0,
        None,
    )
    assert load.kind == "open" and load.levels() == [5.0]


def test_closed_loop_is_unchanged() -> None:
    load = parse_scenario(VALID_SCENARIO).load
    assert load.kind == "closed" and load.levels() == [1.0, 8.0]


@pytest.mark.parametrize(
    ("load", "fragment"),
    [
        ("  concurrency: [1]\n  rate: {rps: [2]}\n  duration_s: 5\n", "not both"),
        ("  requests_per_level: 5\n", "give concurrency"),
        ("  rate: {rps: [2]}\n", "requests_per_level, duration_s or both"),
        ("  rate: {rps: [0]}\n  duration_s: 5\n", "greater than 0"),
        ("  rate: {rps: [2], arrival: bursty}\n  duration_s: 5\n", "load.rate.arrival"),
        (
            "  rate: {rps: [2]}\n  duration_s: 5\n  warmup_s: 3\n  cooldown_s: 2\n",
            "shorter than duration_s",
        ),
    ],
)
def test_invalid_load_sections(load: str, fragment: str) -> None:
    assert any(fragment in m for m in messages(with_load(load))), messages(with_load(load))


def test_replay_brings_its_own_arrivals() -> None:
    workload = "workload:\n  replay: {path: traffic.jsonl, time_scale: 0.5}\n"
    scenario = parse_scenario(with_load("  warmup_s: 1\n", workload))
    assert scenario.workload.replay is not None and scenario.workload.replay.time_scale == 0.5
    assert any("drop concurrency" in m for m in messages(with_load(CLOSED, workload)))
    both = "workload:\n  replay: {path: t.jsonl}\n  mix: [{prompt_tokens: {dist: fixed, value: 1}, output_tokens: {dist: fixed, value: 1}}]\n"
    assert any("drop mix" in m for m in messages(with_load("", both)))


@pytest.mark.parametrize(
    ("load", "overrides"),
    [
        ({"concurrency": [0]}, {"concurrency": [0]}),
        ({"concurrency": [MAX_CONCURRENCY + 1]}, {"concurrency": [MAX_CONCURRENCY + 1]}),
        ({"rate": {"rps": [0]}}, {"rps": [0]}),
        ({"rate": {"rps": [MAX_RPS * 2]}}, {"rps": [MAX_RPS * 2]}),
        ({"requests_per_level": 0}, {"requests_per_level": 0}),
        (
            {"requests_per_level": MAX_REQUESTS_PER_LEVEL + 1},
            {"requests_per_level": MAX_REQUESTS_PER_LEVEL + 1},
        ),
        ({"duration_s": 0}, {"duration_s": 0}),
        ({"duration_s": MAX_DURATION_S + 1}, {"duration_s": MAX_DURATION_S + 1}),
    ],
)
def test_a_run_s_overrides_are_bounded_as_the_load_they_change(
    load: dict[str, Any], overrides: dict[str, Any]
) -> None:
    def refused(model: type[BaseModel], data: dict[str, Any]) -> list[str]:
        with pytest.raises(ValidationError) as caught:
            model.model_validate(data)
        return sorted(e["msg"] for e in caught.value.errors())

    assert refused(Load, load) == refused(Overrides, overrides)


def test_the_in_flight_cap_is_a_concurrency_level() -> None:
    assert RateLoad(rps=[1], max_in_flight=MAX_CONCURRENCY).max_in_flight == MAX_CONCURRENCY
    with pytest.raises(ValidationError):
        RateLoad(rps=[1], max_in_flight=0)
