"""The control plane's side of shard messages: the queued-bytes bound refuses a run that
would fill Redis, naming the setting; parts are encoded once per run and object."""

from __future__ import annotations

import pytest

from api.control.planner import plan_run
from api.control.run_spec import RunSpecParts, check_queued_bytes
from scenarios.loader import ScenarioError, validate_scenario
from scenarios.wire.contract import ShardSpec
from scenarios.wire.shard_payload import encode_part, queued_bytes


def specs(regions: int, pad: int = 60_000) -> list[ShardSpec]:
    scenario = validate_scenario(
        {
            "name": "bound",
            "providers": [
                {
                    "name": f"p{i}",
                    "kind": "openai",
                    "base_url": "http://127.0.0.1:9/v1",
                    "model": "m",
                    "extra_body": {"pad": "q" * pad},
                }
                for i in range(4)
            ],
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 4},
                        "output_tokens": {"dist": "fixed", "value": 2},
                    }
                ]
            },
            "load": {"concurrency": [1], "requests_per_level": 2},
            "regions": [f"r{i}" for i in range(regions)],
        }
    )
    stages = plan_run("run-1", scenario, 512, workers=dict.fromkeys(scenario.regions, 1))
    return [s for stage in stages for s in stage.shards]


def test_a_run_within_the_bound_is_sized() -> None:
    size = check_queued_bytes(specs(2), 64 * 2**20)
    assert size == queued_bytes(specs(2))


def test_large_stored_parts_are_refused_at_providers() -> None:
    with pytest.raises(ScenarioError) as refused:
        check_queued_bytes(specs(1), 100_000)  # four 60 KB providers
    (problem,) = refused.value.problems
    assert problem.path == "providers"
    assert "TOKENBENCH__CONTROL__MAX_QUEUED_BYTES" in problem.message
    assert "more than the 0.1 MiB a run may queue" in problem.message


def test_many_shard_messages_are_refused_at_load() -> None:
    many = specs(32, pad=10)
    size = queued_bytes(many)
    assert size.messages > size.parts
    with pytest.raises(ScenarioError) as refused:
        check_queued_bytes(many, size.total - 1)
    assert refused.value.problems[0].path == "load"
    assert f"{size.shards} shard messages" in refused.value.problems[0].message


def test_parts_are_encoded_once_per_run_and_object() -> None:
    spec = specs(1)[0]
    parts = RunSpecParts()
    first = parts.part("run-1", spec.provider)
    assert parts.part("run-1", spec.provider) is first
    assert first == encode_part(spec.provider)
    parts.forget("run-1")
    assert parts.part("run-1", spec.provider) is not first
