"""The simulate block: catalog ids, and the fields its errors name."""

from __future__ import annotations

import pytest

from scenarios.loader import ScenarioError, parse_scenario
from scenarios.providers.simulate import SimulateSpec

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
