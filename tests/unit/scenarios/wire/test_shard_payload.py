"""Shard messages by reference: a message resolves to the spec it was made from, is
small whatever the provider carries, is sized before anything is queued, and is found
among kombu's stored messages by its task id."""

from __future__ import annotations

import json
from typing import Any

import orjson

from api.control.planner import plan_run
from scenarios.loader import validate_scenario
from scenarios.wire.contract import ShardSpec, shard_task_id
from scenarios.wire.shard_payload import (
    ENVELOPE_BYTES,
    decode_provider,
    decode_workload,
    digest_of,
    encode_part,
    message_bytes,
    message_task_id,
    of_run,
    queued_bytes,
    resolved_spec,
    shard_message,
)

BIG = "z" * 60_000


def scenario_data(providers: int = 2, regions: int = 2, extra: str = BIG) -> dict[str, Any]:
    return {
        "name": "payload",
        "providers": [
            {
                "name": f"p{i}",
                "kind": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "m",
                "extra_body": {"pad": extra},
            }
            for i in range(providers)
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": [1, 2], "requests_per_level": 2},
        "regions": [f"r{i}" for i in range(regions)],
    }


def specs(**kwargs: Any) -> list[ShardSpec]:
    scenario = validate_scenario(scenario_data(**kwargs))
    stages = plan_run("run-1", scenario, 512, workers=dict.fromkeys(scenario.regions, 1))
    return [s for stage in stages for s in stage.shards]


def test_a_message_resolves_to_the_spec_it_was_made_from() -> None:
    spec = specs()[0]
    provider, workload = encode_part(spec.provider), encode_part(spec.workload)
    message = shard_message(spec, provider, workload)
    assert message.provider_digest == digest_of(provider.data)
    again = resolved_spec(message, decode_provider(provider.data), decode_workload(workload.data))
    assert again == spec
    assert again.model_dump(mode="json") == spec.model_dump(mode="json")


def test_a_message_is_small_however_large_the_provider() -> None:
    spec = specs()[0]
    message = shard_message(spec, encode_part(spec.provider), encode_part(spec.workload))
    assert len(spec.model_dump_json()) > 60_000
    assert len(message.model_dump_json()) < 1_000
    assert BIG not in message.model_dump_json()


def test_the_same_part_has_the_same_digest_and_another_part_another() -> None:
    first, second = specs()[0], specs()[0]
    assert encode_part(first.provider) == encode_part(second.provider)
    assert encode_part(first.provider).digest != encode_part(first.workload).digest


def test_queued_bytes_count_each_message_and_each_part_once() -> None:
    few, many = specs(regions=1), specs(regions=8)
    assert len(many) == 8 * len(few)
    small, large = queued_bytes(few), queued_bytes(many)
    assert large.shards == len(many)
    assert large.messages == 8 * small.messages  # every message weighs the same here
    assert large.parts == small.parts  # two providers and a workload, stored once
    assert 2 * 60_000 < small.parts < 2 * 60_000 + 10_000
    assert large.total == large.messages + large.parts


def test_a_message_is_estimated_as_kombu_queues_it() -> None:
    # Base64 body plus the envelope: the old full specs were ~4/3 of their JSON each.
    spec = specs()[0]
    full = len(orjson.dumps([[spec.model_dump(mode="json")], {}]))
    assert message_bytes(full) == -(-full * 4 // 3) + ENVELOPE_BYTES
    assert message_bytes(3) == 4 + ENVELOPE_BYTES


def kombu_message(task_id: str) -> bytes:
    return json.dumps(
        {
            "body": "W1tdLCB7fV0=",
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {"lang": "py", "task": "tokenbench.run_shard", "id": task_id},
            "properties": {"delivery_tag": "d1", "priority": 0},
        }
    ).encode()


def test_the_task_id_of_a_queued_and_an_unacknowledged_message() -> None:
    task_id = shard_task_id("20261204-070000-abcdef", "s0.p0.r0")
    queued = kombu_message(task_id)
    assert message_task_id(queued) == task_id
    unacked = json.dumps([json.loads(queued), "", "tokenbench.region.r0"]).encode()
    assert message_task_id(unacked) == task_id
    assert message_task_id(queued.decode()) == task_id


def test_anything_else_has_no_task_id() -> None:
    for raw in (b"not json", b"[]", b"42", b'{"headers": 3}', b'{"headers": {"id": 7}}'):
        assert message_task_id(raw) is None


def test_a_task_belongs_to_its_run_only() -> None:
    run = "20261204-070000-abcdef"
    assert of_run(shard_task_id(run, "s0.p.r"), run)
    assert not of_run(shard_task_id(run + "0", "s0.p.r"), run)  # a longer run id
    assert not of_run(shard_task_id("other", "s0.p.r"), run)
    assert not of_run(None, run)
    assert not of_run(run, run)  # a task id without a shard
