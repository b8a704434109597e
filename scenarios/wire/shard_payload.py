"""Shard messages by reference: what a ``RUN_SHARD`` task carries, and what it weighs.

A provider's ``extra_body`` and tools, and a workload, may be large (YAML anchors let a
77 KB body repeat a 200 KB ``extra_body`` in every provider), and every shard of a run
carries one provider and the workload. Messages therefore carry only their SHA-256
digests (:class:`scenarios.wire.contract.ShardMessage`); the parts themselves are stored once
per run in Redis (:func:`scenarios.wire.contract.run_spec_key`). A digest names exactly the bytes
stored, so the worker checks what it reads before it trusts it.

Pure functions: the control plane encodes and sizes, the worker decodes; both sides
touch Redis elsewhere (``api/control/run_spec.py``, ``workers/shard/run_spec.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import orjson
from pydantic import TypeAdapter

from scenarios.providers.kinds import Provider
from scenarios.wire.contract import ShardMessage, ShardSpec, shard_task_id
from scenarios.workload.spec import Workload

# Celery's envelope around a task's arguments in the Redis list (headers with a repr of
# the arguments cut at 1 KiB, properties, delivery info), beyond the body itself.
ENVELOPE_BYTES: Final = 2048
# The body travels base64-encoded: 4 bytes for every 3.
BASE64_NUMERATOR: Final = 4
BASE64_DENOMINATOR: Final = 3

_PROVIDER: Final = TypeAdapter[Provider](Provider)


@dataclass(frozen=True, slots=True)
class SpecPart:
    """A provider or workload as stored: its JSON bytes and their SHA-256 digest."""

    digest: str
    data: bytes


def digest_of(data: bytes) -> str:
    """The hex SHA-256 digest naming ``data``."""
    return hashlib.sha256(data).hexdigest()


def encode_part(part: Provider | Workload) -> SpecPart:
    """The stored form of a provider or workload."""
    data = part.model_dump_json().encode()
    return SpecPart(digest_of(data), data)


def shard_message(spec: ShardSpec, provider: SpecPart, workload: SpecPart) -> ShardMessage:
    """The message of ``spec``, given its encoded provider and workload."""
    fields = spec.model_dump(exclude={"provider", "workload"})
    return ShardMessage(**fields, provider_digest=provider.digest, workload_digest=workload.digest)


def decode_provider(data: bytes) -> Provider:
    """A provider read back from its stored bytes."""
    return _PROVIDER.validate_json(data)


def decode_workload(data: bytes) -> Workload:
    """A workload read back from its stored bytes."""
    return Workload.model_validate_json(data)


def resolved_spec(message: ShardMessage, provider: Provider, workload: Workload) -> ShardSpec:
    """The :class:`ShardSpec` a message stands for, once its parts are read."""
    fields = message.model_dump(exclude={"provider_digest", "workload_digest"})
    return ShardSpec(**fields, provider=provider, workload=workload)


def message_bytes(payload_bytes: int) -> int:
    """Bytes one queued task takes in Redis for a body of ``payload_bytes`` (JSON)."""
    encoded = -(-payload_bytes * BASE64_NUMERATOR // BASE64_DENOMINATOR)
    return encoded + ENVELOPE_BYTES


@dataclass(frozen=True, slots=True)
class QueuedBytes:
    """What a run's shards would put in Redis: their messages and the parts stored once."""

    shards: int
    messages: int
    parts: int

    @property
    def total(self) -> int:
        """Messages and stored parts together."""
        return self.messages + self.parts


def queued_bytes(specs: Iterable[ShardSpec]) -> QueuedBytes:
    """Estimate the Redis bytes of every message of ``specs`` queued at once (an upper
    bound: a run's stages are queued one after the other) and of their stored parts.
    Each distinct provider or workload object is encoded once."""
    encoded: dict[int, tuple[Provider | Workload, SpecPart]] = {}
    stored: dict[str, int] = {}

    def part(model: Provider | Workload) -> SpecPart:
        # Keyed by identity (the planner shares one object among shards); the object is
        # kept in the entry so that its id cannot be reused while we look.
        entry = encoded.get(id(model))
        if entry is None:
            entry = (model, encode_part(model))
            encoded[id(model)] = entry
        stored[entry[1].digest] = len(entry[1].data)
        return entry[1]

    shards = messages = 0
    for spec in specs:
        message = shard_message(spec, part(spec.provider), part(spec.workload))
        messages += message_bytes(len(orjson.dumps([[message.model_dump(mode="json")], {}])))
        shards += 1
    return QueuedBytes(shards, messages, sum(stored.values()))


def message_task_id(raw: bytes | str) -> str | None:
    """The task id of a kombu message as its Redis transport stores it (a JSON object
    whose ``headers.id`` is Celery's task id; an unacknowledged one is stored as
    ``[message, exchange, routing_key]``); None for anything else."""
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if isinstance(message, list) and message:
        message = message[0]
    if not isinstance(message, dict):
        return None
    headers = message.get("headers")
    task_id = headers.get("id") if isinstance(headers, dict) else None
    return task_id if isinstance(task_id, str) else None


def of_run(task_id: str | None, run_id: str) -> bool:
    """Whether ``task_id`` is a shard task of run ``run_id`` (``shard_task_id``)."""
    return task_id is not None and task_id.startswith(shard_task_id(run_id, ""))
