"""The worker's side of shard messages by reference (``scenarios/wire/shard_payload.py``).

A ``RUN_SHARD`` message carries the digests of its provider and workload; they are read
from the run's spec hash in Redis, checked against their digests, decoded, and kept
in a small per-process cache (a run's shards share them, so a worker reads each once).
The rest of the worker sees the same :class:`ShardSpec` as before. A message that still
carries its provider and workload (sent before this format) is used as it is.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Final

from redis.asyncio import Redis

from scenarios.providers.kinds import Provider
from scenarios.wire.contract import ShardMessage, ShardSpec, run_spec_key
from scenarios.wire.shard_payload import decode_provider, decode_workload, digest_of, resolved_spec
from scenarios.workload.spec import Workload

# Decoded parts kept per process: a few runs' providers and workloads.
CACHE_ENTRIES: Final = 64


class SpecUnavailable(RuntimeError):
    """A message's provider or workload is not (or no longer) stored for its run."""


class PartCache:
    """Decoded providers and workloads by digest, least recently used dropped first."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self.entries = entries
        self._parts: OrderedDict[str, Provider | Workload] = OrderedDict()

    def get(self, digest: str) -> Provider | Workload | None:
        """The decoded part named ``digest``, if cached."""
        part = self._parts.get(digest)
        if part is not None:
            self._parts.move_to_end(digest)
        return part

    def put(self, digest: str, part: Provider | Workload) -> None:
        """Keep ``part`` under ``digest``."""
        self._parts[digest] = part
        self._parts.move_to_end(digest)
        while len(self._parts) > self.entries:
            self._parts.popitem(last=False)


_cache = PartCache()


async def resolve_shard(
    payload: dict[str, Any], redis: Redis, cache: PartCache = _cache
) -> ShardSpec:
    """The :class:`ShardSpec` a ``RUN_SHARD`` task's argument stands for."""
    if "provider" in payload:  # a whole spec, as messages were before references
        return ShardSpec.model_validate(payload)
    message = ShardMessage.model_validate(payload)
    provider = cache.get(message.provider_digest)
    workload = cache.get(message.workload_digest)
    if provider is None or workload is None:
        key = run_spec_key(message.run_id)
        provider_data, workload_data = await redis.hmget(
            key, [message.provider_digest, message.workload_digest]
        )
        if provider is None:
            provider = decode_provider(_checked(provider_data, message.provider_digest, message))
            cache.put(message.provider_digest, provider)
        if workload is None:
            workload = decode_workload(_checked(workload_data, message.workload_digest, message))
            cache.put(message.workload_digest, workload)
    if isinstance(provider, Workload) or not isinstance(workload, Workload):
        raise SpecUnavailable(f"shard {message.run_id}/{message.shard_id}: digests swapped")
    return resolved_spec(message, provider, workload)


def _checked(data: bytes | str | None, digest: str, message: ShardMessage) -> bytes:
    """``data`` if it is the part named ``digest``."""
    name = f"shard {message.run_id}/{message.shard_id}"
    if data is None:
        raise SpecUnavailable(
            f"{name}: its provider or workload ({digest[:12]}) is not stored in Redis "
            "(the run closed, or Redis lost it: the control plane sends the shard again)"
        )
    if isinstance(data, str):  # a client decoding answers: our parts are ASCII JSON
        data = data.encode()
    if digest_of(data) != digest:
        raise SpecUnavailable(f"{name}: the stored part does not match its digest {digest[:12]}")
    return data
