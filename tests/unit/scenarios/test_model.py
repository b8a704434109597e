"""Scenario load section: closed vs open loop, stage length, warm-up, replay."""

from __future__ import annotations

import pytest

from scenarios.loader import ScenarioError, parse_scenario
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
        ("  rate: {rps: [0]}\n  duration_s: 5\n", "rates must be > 0"),
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
