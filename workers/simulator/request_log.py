"""The simulated endpoint's log of the chat requests it received and how it answered.

Bounded: the newest ``capacity`` entries are kept, the oldest dropped (``GET
/tokenbench/requests`` says how many from ``oldest``). Each entry: a sequence number
from 1, the wall-clock instant it was received (epoch ns: entries of several endpoints
on one machine are ordered by it), the request id and prompt hash the client sent
(``workers/client/request_ids.py``), the answer's HTTP status (0 for a reset connection), its
outcome (``ok``, ``http_429``, ``http_5xx``, ``http_4xx``, ``reset``, ``cut``,
``unfinished`` or ``bad_request``) and the stall before it.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

import orjson

from scenarios.limits import MAX_REQUEST_LOG_PAGE

_FIELDS = ("seq", "received_at_ns", "request_id", "prompt_hash", "status", "outcome", "stall_ms")


class RequestLog:
    """The newest ``capacity`` entries (none at 0)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: deque[tuple[Any, ...]] = deque(maxlen=capacity or 1)
        self.last = 0  # the sequence number of the newest entry
        self.started_at_ns: int | None = None  # the fault clock's start (first request)

    def add(
        self,
        received_at_ns: int,
        request_id: str | None,
        prompt_hash: str | None,
        status: int,
        outcome: str,
        stall_ms: float = 0.0,
    ) -> None:
        """Log one answered request."""
        if self.started_at_ns is None:
            self.started_at_ns = received_at_ns
        self.last += 1  # counted even when nothing is kept: a reader sees it missed them
        if self.capacity == 0:
            return
        entry = (self.last, received_at_ns, request_id, prompt_hash, status, outcome, stall_ms)
        self._entries.append(entry)

    @property
    def oldest(self) -> int:
        """Sequence number of the oldest entry kept (last + 1 when empty)."""
        return self._entries[0][0] if self._entries and self.capacity else self.last + 1

    def page(self, after: int, limit: int = MAX_REQUEST_LOG_PAGE) -> dict[str, Any]:
        """Entries with a sequence number above ``after``, oldest first, at most
        ``limit``; ``last`` and ``oldest`` tell a reader what it missed and what is left."""
        limit = max(1, min(limit, MAX_REQUEST_LOG_PAGE))
        entries: list[dict[str, Any]] = []
        if self.capacity and self._entries:
            # Read from the newest end: a reader that keeps up asks for the last few.
            newer = self.last - max(after, self.oldest - 1)
            if newer > 0:
                tail = list(itertools.islice(reversed(self._entries), newer))
                tail.reverse()
                entries = [dict(zip(_FIELDS, e, strict=True)) for e in tail[:limit]]
        return {
            "entries": entries,
            "last": self.last,
            "oldest": self.oldest,
            "capacity": self.capacity,
            "started_at_ns": self.started_at_ns,
        }

    def page_json(self, after: int, limit: int = MAX_REQUEST_LOG_PAGE) -> bytes:
        """:meth:`page` as JSON."""
        return orjson.dumps(self.page(after, limit))
