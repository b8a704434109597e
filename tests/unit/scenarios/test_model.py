"""Scenario model: the load section (closed vs open loop, stage length, warm-up, replay)
and the simulate block (catalog ids, the fields its errors name)."""

from __future__ import annotations

import pytest

from scenarios.loader import ScenarioError, parse_scenario
from scenarios.model import SimulateSpec
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


# ------------------------------------------------------------------- spec options

SCENARIO = """\
name: s
providers:
  - name: sim
    kind: simulated
    simulate: {{{simulate}}}
workload:
  mix:
    - {{prompt_tokens: {{dist: fixed, value: 8}}, output_tokens: {{dist: fixed, value: 8}}}}
load: {{concurrency: [1], requests_per_level: 1}}
"""


@pytest.mark.parametrize(
    ("simulate", "path", "message"),
    [
        ("model: llama-9", "providers.0.simulate.model", "unknown model id 'llama-9'"),
        ("model: llama-3.1-8b, hardware: b200", "providers.0.simulate.hardware", "valid ids"),
        ("model: llama-3.1-8b, quant: fp7", "providers.0.simulate.quant", "unknown quantization"),
        ("model: llama-3.1-8b, kv_dtype: int2", "providers.0.simulate.kv_dtype", "unknown KV"),
        ("hardware: h200", "providers.0.simulate", "set model to use hardware"),
        ("model: llama-3.1-8b, itl_ms: 5", "providers.0.simulate", "itl_ms cannot be combined"),
        ("model: llama-3.1-405b, gpus: 8", "providers.0.simulate", "does not fit 8 × h100"),
        ("model: llama-3.1-8b, gpus: 2, hardware: m3-ultra", "providers.0.simulate", "at most 1"),
        ("model: llama-3.1-8b, context: 200000", "providers.0.simulate", "exceeds"),
        ("model: llama-3.1-8b, chunked_prefill_tokens: 16", "providers.0.simulate", "at least 55"),
    ],
)
def test_simulate_block_errors_name_the_field(simulate: str, path: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(SCENARIO.format(simulate=simulate), "s.yaml")
    problems = caught.value.problems
    assert [p.path for p in problems] == [path]
    assert message in problems[0].message


def test_catalog_ids_are_normalised_and_survive_a_json_round_trip() -> None:
    spec = SimulateSpec(model="LLAMA-3.1-405B", quant="FP8", hardware="H200", gpus=8)
    assert (spec.model, spec.quant, spec.hardware) == ("llama-3.1-405b", "fp8", "h200")
    assert SimulateSpec.model_validate_json(spec.model_dump_json()) == spec
