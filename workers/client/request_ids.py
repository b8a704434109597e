"""How a request is found again in an upstream's log (docs/failover.md, "Attribution").

When a scenario declares ``upstreams``, the client sends each request's id in the
``x-tokenbench-request`` header and in the chat body's ``user`` field (which gateways
usually pass on), and records it with a hash of the prompt's messages. The simulated
upstream logs what it received: the header, else a ``user`` that is one of these ids,
and the same hash, so a gateway that forwards neither is still matched by prompt where
the prompt is unique in the run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

REQUEST_ID_HEADER = "x-tokenbench-request"
ID_PREFIX = "tokenbench."
# An id as the upstream keeps it: the prefix, then the shard, attempt and sequence.
MAX_ID_CHARS = 160


def request_id(shard_id: str, attempt: int, seq: int) -> str:
    """The id of request ``seq`` of a shard attempt: unique in its run."""
    return f"{ID_PREFIX}{shard_id}.{attempt}.{seq}"


def is_request_id(value: object) -> bool:
    """True for a string that is one of these ids (a body's ``user`` may be anything)."""
    return isinstance(value, str) and value.startswith(ID_PREFIX) and len(value) <= MAX_ID_CHARS


def prompt_hash(messages: Iterable[tuple[str, str]]) -> str:
    """Hash of a conversation's roles and texts: the same on the client, which knows the
    messages it planned, and at the upstream, which reads them from the JSON it got
    (however a gateway re-encoded it)."""
    digest = hashlib.sha256()
    for role, text in messages:
        digest.update(role.encode())
        digest.update(b"\x1f")
        digest.update(text.encode())
        digest.update(b"\x1e")
    return digest.hexdigest()[:32]
