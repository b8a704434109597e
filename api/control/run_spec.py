"""The control plane's side of shard messages by reference (``scenarios/wire/shard_payload.py``).

Before a shard's task is sent, its provider and workload are made present in the run's
spec hash in Redis (set again if Redis lost them, as datasets are) and the TTL of the
hash is refreshed; the task carries their digests only. Parts are encoded once per run
and object (the planner shares one provider object among a run's shards), so sending
300 shards does not serialise a large ``extra_body`` 300 times. The hash is deleted when
the run closes.

A run's queued bytes are bounded when it is submitted (``check_queued_bytes``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from redis.asyncio import Redis
from redis.typing import EncodableT

from scenarios.loader import Problem, ScenarioError
from scenarios.providers.kinds import Provider
from scenarios.settings import env_name
from scenarios.wire.contract import RUN_SPEC_TTL_S, ShardMessage, ShardSpec, run_spec_key
from scenarios.wire.shard_payload import (
    QueuedBytes,
    SpecPart,
    encode_part,
    queued_bytes,
    shard_message,
)
from scenarios.workload.spec import Workload


class RunSpecParts:
    """Encoded providers and workloads of the open runs, by run and object."""

    def __init__(self) -> None:
        # run id -> id(object) -> (object, its part); the object is kept so that its id
        # stays its own while the run is open.
        self._runs: dict[str, dict[int, tuple[Provider | Workload, SpecPart]]] = {}

    def part(self, run_id: str, model: Provider | Workload) -> SpecPart:
        """The encoded ``model`` of run ``run_id`` (encoded on first use)."""
        parts = self._runs.setdefault(run_id, {})
        entry = parts.get(id(model))
        if entry is None:
            entry = (model, encode_part(model))
            parts[id(model)] = entry
        return entry[1]

    async def message(self, redis: Redis, spec: ShardSpec) -> ShardMessage:
        """The message of ``spec``, once its parts are stored (one round trip when they
        already are)."""
        provider = self.part(spec.run_id, spec.provider)
        workload = self.part(spec.run_id, spec.workload)
        await store_parts(redis, spec.run_id, (provider, workload))
        return shard_message(spec, provider, workload)

    def forget(self, run_id: str) -> None:
        """Drop a closed run's encoded parts."""
        self._runs.pop(run_id, None)


async def store_parts(redis: Redis, run_id: str, parts: tuple[SpecPart, ...]) -> None:
    """Make sure ``parts`` are in the run's spec hash and refresh its TTL."""
    key = run_spec_key(run_id)
    async with redis.pipeline(transaction=False) as pipe:
        for part in parts:
            pipe.hexists(key, part.digest)
        pipe.expire(key, RUN_SPEC_TTL_S)
        present: list[Any] = await pipe.execute()
    missing: dict[EncodableT, EncodableT] = {
        p.digest: p.data for p, here in zip(parts, present, strict=False) if not here
    }
    if missing:
        await redis.hset(key, mapping=missing)
        await redis.expire(key, RUN_SPEC_TTL_S)


async def refresh_parts(redis: Redis, run_id: str) -> None:
    """Keep an open run's stored parts from expiring (a shard may wait in its queue for
    a worker longer than the TTL)."""
    await redis.expire(run_spec_key(run_id), RUN_SPEC_TTL_S)


def check_queued_bytes(specs: Iterable[ShardSpec], bound: int) -> QueuedBytes:
    """Refuse (ScenarioError, a 422 over REST) a run whose shard messages and stored
    parts would take more than ``bound`` bytes of Redis if all were queued at once."""
    size = queued_bytes(specs)
    if size.total <= bound:
        return size
    # Point at what weighs most: many shards (load) or large providers/workload.
    path = "load" if size.messages >= size.parts else "providers"
    message = (
        f"the run would queue about {_mib(size.total)} in Redis ({size.shards} shard "
        f"messages: {_mib(size.messages)}; providers and workload stored once: "
        f"{_mib(size.parts)}), more than the {_mib(bound)} a run may queue "
        f"({env_name('control.max_queued_bytes')}): use fewer stages, providers or "
        "regions, or a smaller extra_body, tools or workload"
    )
    raise ScenarioError([Problem(path, message)])


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"
