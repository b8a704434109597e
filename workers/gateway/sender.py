"""Handing sampled requests to the regional Celery queues without touching the primary.

Enqueueing a Celery task is a blocking network round trip to the broker (and retries
when the broker is slow or gone). The request handler therefore only puts the sample on
a bounded in-process queue (``put_nowait``, microseconds); one background thread sends
the samples to each region's queue. When that queue is full the sample is dropped and
counted, and so is a sample for a region whose broker queue already holds
``max_backlog`` samples (its workers are not keeping up: sending more would only replay
stale traffic). Tasks also expire after ``ttl_s``, so a backlog is never worked off
hours later.

Samples travel in batches (``RUN_SHADOW_BATCH``, ``scenarios.wire.contract.ShadowBatch``): one
Celery message per region carries every sample the thread found waiting, plus those
that arrive within ``linger_s`` of the first, up to ``max_batch`` samples,
``max_batch_bytes`` of request bodies or a second of arrivals. Publishing a message cost
about 1 ms of the capture process's CPU whatever it carries (most of it the broker round
trip), which at 100 % sampling was most of the capture's cost per request; a batch pays
it once. Each sample keeps its arrival offset from the batch's first, and the worker
sends it that much after the first (``workers/gateway/shadow.py``): shadows see the live
traffic's gaps, not bursts, only ``linger_s`` (50 ms) later.

The backlog is counted in samples: the broker's queue length is in messages, so the
thread remembers how many samples each of its recent messages to a region carried and
counts the newest ones still queued (the workers take the oldest first). Exact for one
gateway; with several feeding a region, their messages count as the size of this
gateway's.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import redis
from celery import Celery

from scenarios.wire.contract import (
    MAX_SHADOW_BATCH,
    MAX_SHADOW_BATCH_SPAN_MS,
    RUN_SHADOW_BATCH,
    region_queue,
)

log = logging.getLogger("tokenbench.gateway")

BACKLOG_CHECK_S = 1.0
LINGER_S = 0.05
MAX_BATCH_BYTES = 1024 * 1024
# Message sizes remembered per region for the backlog count (older ones count as the mean).
MAX_REMEMBERED = 65_536


@dataclass
class SenderStats:
    """Counters of the shadow hand-off, in samples but for ``batches`` (each written by
    one thread only)."""

    offered: int = 0
    dropped_full: int = 0
    sent: int = 0
    dropped_backlog: int = 0
    send_errors: int = 0
    dropped_at_stop: int = 0
    batches: int = 0  # messages published (one per region and batch)


@dataclass(frozen=True, slots=True)
class _Offered:
    """A sample waiting for the thread."""

    sample: dict[str, Any]
    size: int
    received_ns: int


@dataclass
class _Backlog:
    """What the thread knows of one region's broker queue."""

    checked_at: float = float("-inf")
    samples: int = 0  # waiting at the last check, plus what was sent since
    sizes: deque[int] = field(default_factory=deque)  # samples per message, newest last


@dataclass
class ShadowSender:
    """Bounded queue of sampled requests and the thread that enqueues them in batches."""

    celery: Celery
    broker_url: str
    run_id: str
    providers: list[dict[str, Any]]
    regions: list[str]
    max_pending: int
    max_backlog: int
    ttl_s: float
    linger_s: float = LINGER_S
    max_batch: int = MAX_SHADOW_BATCH
    max_batch_bytes: int = MAX_BATCH_BYTES
    stats: SenderStats = field(default_factory=SenderStats)

    def __post_init__(self) -> None:
        self._queue: queue.Queue[_Offered] = queue.Queue(maxsize=self.max_pending)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shadow-sender", daemon=True)
        remembered = max(1, min(self.max_backlog, MAX_REMEMBERED))
        self._backlog = {r: _Backlog(sizes=deque(maxlen=remembered)) for r in self.regions}
        self._redis: redis.Redis | None = None
        self._holding = 0  # samples taken off the queue, not yet sent or dropped
        self._carry: _Offered | None = None  # the first of the next batch

    def start(self) -> None:
        """Start the sending thread."""
        self._thread.start()

    def offer(self, sample: dict[str, Any], size: int, received_ns: int) -> bool:
        """Queue a sampled request (``ShadowSample`` fields but the offset; ``size``: its
        body's bytes; ``received_ns``: its arrival, a monotonic stamp); False (and
        counted) when full."""
        self.stats.offered += 1
        try:
            self._queue.put_nowait(_Offered(sample, size, received_ns))
        except queue.Full:
            self.stats.dropped_full += 1
            return False
        return True

    @property
    def pending(self) -> int:
        """Samples waiting for the sending thread."""
        return self._queue.qsize() + (self._carry is not None)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Send what is queued for up to ``timeout_s``, then stop (the rest is counted)."""
        deadline = time.monotonic() + timeout_s
        while self.pending and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()) + 1.0)
        stuck = self._holding if self._thread.is_alive() else 0
        self.stats.dropped_at_stop += self.pending + stuck
        if self._redis is not None:
            self._redis.close()

    def _take(self) -> list[dict[str, Any]]:
        """The next batch: what waits now, then what arrives within ``linger_s`` of the
        first sample, each with its arrival offset, up to ``max_batch`` samples,
        ``max_batch_bytes`` of bodies (a larger sample goes alone) and
        ``MAX_SHADOW_BATCH_SPAN_MS`` of arrivals. Empty when nothing came for 0.2 s."""
        first = self._next(0.2)
        if first is None:
            return []
        first.sample["offset_ms"] = 0.0
        batch, total = [first.sample], first.size
        self._holding = 1
        deadline = time.monotonic() + self.linger_s
        while len(batch) < self.max_batch and not self._stop.is_set():
            got = self._next(deadline - time.monotonic())
            if got is None:
                break
            offset_ms = max(0.0, (got.received_ns - first.received_ns) / 1e6)
            if total + got.size > self.max_batch_bytes or offset_ms > MAX_SHADOW_BATCH_SPAN_MS:
                self._carry = got  # it starts the next batch, in arrival order
                break
            got.sample["offset_ms"] = offset_ms
            batch.append(got.sample)
            total += got.size
            self._holding = len(batch)
        return batch

    def _next(self, timeout_s: float) -> _Offered | None:
        """The carried sample, else the queue's next (waiting up to ``timeout_s``)."""
        if self._carry is not None:
            carried, self._carry = self._carry, None
            return carried
        try:
            if timeout_s <= 0:
                return self._queue.get_nowait()
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def _run(self) -> None:
        # One producer (and broker connection) for the thread's life rather than one
        # from the pool per message: a third of send_task's CPU (kombu builds a client
        # per acquire). Released and replaced after any error.
        producer: Any = None
        while not self._stop.is_set():
            batch = self._take()
            if not batch:
                continue
            message = {"run_id": self.run_id, "providers": self.providers, "samples": batch}
            for region in self.regions:
                if self._over_backlog(region):
                    self.stats.dropped_backlog += len(batch)
                    continue
                try:
                    if producer is None:
                        producer = self.celery.producer_pool.acquire(block=True)
                    self.celery.send_task(
                        RUN_SHADOW_BATCH,
                        args=[message],
                        queue=region_queue(region),
                        expires=self.ttl_s,
                        producer=producer,
                        # No repr of the arguments in the message: it would copy the
                        # client's messages into worker logs, and costs a third of the CPU.
                        argsrepr="",
                        kwargsrepr="",
                    )
                    self._sent(region, len(batch))
                except Exception as exc:  # a broken broker must not stop the sender
                    self.stats.send_errors += len(batch)
                    log.warning("shadow batch for %s not sent: %s", region, type(exc).__name__)
                    _release(producer)
                    producer = None
            self._holding = 0
        _release(producer)

    def _sent(self, region: str, samples: int) -> None:
        self.stats.sent += samples
        self.stats.batches += 1
        backlog = self._backlog[region]
        backlog.sizes.append(samples)
        backlog.samples += samples

    def _over_backlog(self, region: str) -> bool:
        backlog = self._backlog[region]
        now = time.monotonic()
        if now - backlog.checked_at >= BACKLOG_CHECK_S:
            try:
                if self._redis is None:
                    self._redis = redis.Redis.from_url(self.broker_url)
                # Celery's Redis transport keeps a queue as a list under the queue's name.
                messages = int(self._redis.llen(region_queue(region)))
            except redis.RedisError:
                messages = 0  # unknown: let send_task find out and count the failure
            backlog.checked_at = now
            backlog.samples = waiting_samples(messages, backlog.sizes)
        return backlog.samples >= self.max_backlog


def waiting_samples(messages: int, sizes: deque[int]) -> int:
    """Samples in a queue of ``messages`` messages, given the sizes of the messages this
    gateway sent, newest last: the newest are the ones still queued; messages beyond
    what is remembered count as the mean size."""
    known = min(messages, len(sizes))
    newest = sum(itertools.islice(reversed(sizes), known))
    mean = sum(sizes) / len(sizes) if sizes else 1.0
    return newest + round((messages - known) * mean)


def _release(producer: Any) -> None:
    """Give ``producer`` back to its pool (None: nothing to do)."""
    if producer is not None:
        try:
            producer.release()
        except Exception as exc:  # a broken connection is dropped by the pool anyway
            log.debug("producer not released: %s", type(exc).__name__)
