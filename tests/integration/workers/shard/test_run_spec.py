"""workers/shard/run_spec.py on real Redis: a message resolves from the run's stored parts,
which are read once per process; a part that is missing or does not match its digest
is refused with the reason, never executed."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.asyncio import Redis

from api.local.redis_server import RedisServer
from scenarios.model import Scenario
from scenarios.wire.contract import ShardSpec, run_spec_key
from scenarios.wire.shard_payload import encode_part, shard_message
from workers.shard.run_spec import PartCache, SpecUnavailable, resolve_shard

pytestmark = pytest.mark.integration


def spec(run_id: str) -> ShardSpec:
    scenario = Scenario.model_validate(
        {
            "name": "resolve",
            "providers": [
                {
                    "name": "big",
                    "kind": "openai",
                    "base_url": "http://127.0.0.1:9/v1",
                    "model": "m",
                    "extra_body": {"pad": "e" * 50_000},
                }
            ],
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 4},
                        "output_tokens": {"dist": "fixed", "value": 2},
                    }
                ],
                "tools": {"count": 3},
            },
            "load": {"concurrency": [1], "requests_per_level": 2},
            "regions": ["here"],
        }
    )
    return ShardSpec(
        run_id=run_id,
        shard_id="s0.big.here",
        stage=0,
        region="here",
        provider=scenario.providers[0],
        workload=scenario.workload,
        seed=1,
        concurrency=1,
        requests=2,
    )


def test_resolve_from_redis_once_then_from_the_cache(redis_server: RedisServer) -> None:
    run_id = f"run-{uuid.uuid4().hex[:6]}"
    whole = spec(run_id)
    provider, workload = encode_part(whole.provider), encode_part(whole.workload)
    message = shard_message(whole, provider, workload).model_dump(mode="json")

    async def go() -> None:
        redis = Redis.from_url(redis_server.url)
        try:
            key = run_spec_key(run_id)
            await redis.hset(key, mapping={provider.digest: provider.data})
            cache = PartCache()
            with pytest.raises(SpecUnavailable, match="not stored in Redis"):
                await resolve_shard(message, redis, cache)
            await redis.hset(key, mapping={workload.digest: b'{"mix": []}'})
            with pytest.raises(SpecUnavailable, match="does not match its digest"):
                await resolve_shard(message, redis, cache)
            await redis.hset(key, mapping={workload.digest: workload.data})
            assert await resolve_shard(message, redis, cache) == whole
            await redis.delete(key)  # read once: the next shard of the run needs no Redis
            assert await resolve_shard(message, redis, cache) == whole
        finally:
            await redis.delete(run_spec_key(run_id))
            await redis.aclose()

    asyncio.run(go())
