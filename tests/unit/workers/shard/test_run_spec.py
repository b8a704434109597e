"""The worker's side of shard messages: a whole spec (an older message) is used as it
is; cached parts resolve without Redis; the cache keeps the most recently used."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from redis.asyncio import Redis

from scenarios.wire.contract import ShardSpec
from scenarios.wire.shard_payload import encode_part, shard_message
from scenarios.workload.spec import Workload
from workers.shard.run_spec import PartCache, resolve_shard


def spec() -> ShardSpec:
    data: dict[str, Any] = {
        "run_id": "run-1",
        "shard_id": "s0.sim.local",
        "stage": 0,
        "region": "local",
        "provider": {"name": "sim", "kind": "simulated"},
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "seed": 7,
        "concurrency": 1,
        "requests": 2,
    }
    return ShardSpec.model_validate(data)


NO_REDIS = cast(Redis, None)  # a call on it would raise: nothing may reach Redis


def test_a_whole_spec_is_used_as_it_is() -> None:
    whole = spec()
    resolved = asyncio.run(resolve_shard(whole.model_dump(mode="json"), NO_REDIS, PartCache()))
    assert resolved == whole


def test_cached_parts_resolve_without_redis() -> None:
    whole = spec()
    provider, workload = encode_part(whole.provider), encode_part(whole.workload)
    cache = PartCache()
    cache.put(provider.digest, whole.provider)
    cache.put(workload.digest, whole.workload)
    message = shard_message(whole, provider, workload).model_dump(mode="json")
    assert asyncio.run(resolve_shard(message, NO_REDIS, cache)) == whole


def test_the_cache_drops_the_least_recently_used() -> None:
    cache = PartCache(entries=2)
    parts = [Workload.model_validate({"mix": spec().workload.model_dump()["mix"]}) for _ in "abc"]
    cache.put("a", parts[0])
    cache.put("b", parts[1])
    assert cache.get("a") is parts[0]  # now b is the least recently used
    cache.put("c", parts[2])
    assert cache.get("b") is None
    assert cache.get("a") is parts[0] and cache.get("c") is parts[2]
