"""Handing sampled requests to the regional Celery queues without touching the primary.

Enqueueing a Celery task is a blocking network round trip to the broker (and retries
when the broker is slow or gone). The request handler therefore only puts the task on
a bounded in-process queue (``put_nowait``, microseconds); one background thread sends
it to each region's queue. When that queue is full the sample is dropped and counted,
and so is a sample for a region whose broker queue already holds ``max_backlog`` tasks
(its workers are not keeping up: sending more would only replay stale traffic). Tasks
also expire after ``ttl_s``, so a backlog is never worked off hours later.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis
from celery import Celery

from scenarios.wire import RUN_SHADOW, region_queue

log = logging.getLogger("tokenbench.gateway")

BACKLOG_CHECK_S = 1.0


@dataclass
class SenderStats:
    """Counters of the shadow hand-off (each written by one thread only)."""

    offered: int = 0
    dropped_full: int = 0
    sent: int = 0
    dropped_backlog: int = 0
    send_errors: int = 0
    dropped_at_stop: int = 0


@dataclass
class ShadowSender:
    """Bounded queue of sampled requests and the thread that enqueues their tasks."""

    celery: Celery
    broker_url: str
    regions: list[str]
    max_pending: int
    max_backlog: int
    ttl_s: float
    stats: SenderStats = field(default_factory=SenderStats)

    def __post_init__(self) -> None:
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=self.max_pending)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shadow-sender", daemon=True)
        self._backlog: dict[str, tuple[float, int]] = {}
        self._redis: redis.Redis | None = None

    def start(self) -> None:
        """Start the sending thread."""
        self._thread.start()

    def offer(self, payload: dict[str, Any]) -> bool:
        """Queue a sampled request's task payload; False (and counted) when full."""
        self.stats.offered += 1
        try:
            self._queue.put_nowait(payload)
        except queue.Full:
            self.stats.dropped_full += 1
            return False
        return True

    @property
    def pending(self) -> int:
        """Samples waiting for the sending thread."""
        return self._queue.qsize()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Send what is queued for up to ``timeout_s``, then stop (the rest is counted)."""
        deadline = time.monotonic() + timeout_s
        while not self._queue.empty() and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        self._thread.join(max(0.0, deadline - time.monotonic()) + 1.0)
        self.stats.dropped_at_stop += self._queue.qsize()
        if self._redis is not None:
            self._redis.close()

    def _run(self) -> None:
        # One producer (and broker connection) for the thread's life rather than one
        # from the pool per task: a third of send_task's CPU (kombu builds a client
        # per acquire). Released and replaced after any error.
        producer: Any = None
        while not self._stop.is_set():
            try:
                payload = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            for region in self.regions:
                if self._over_backlog(region):
                    self.stats.dropped_backlog += 1
                    continue
                try:
                    if producer is None:
                        producer = self.celery.producer_pool.acquire(block=True)
                    self.celery.send_task(
                        RUN_SHADOW,
                        args=[payload],
                        queue=region_queue(region),
                        expires=self.ttl_s,
                        producer=producer,
                        # No repr of the arguments in the message: it would copy the
                        # client's messages into worker logs, and costs a third of the CPU.
                        argsrepr="",
                        kwargsrepr="",
                    )
                    self.stats.sent += 1
                except Exception as exc:  # a broken broker must not stop the sender
                    self.stats.send_errors += 1
                    log.warning("shadow task for %s not sent: %s", region, type(exc).__name__)
                    _release(producer)
                    producer = None
        _release(producer)

    def _over_backlog(self, region: str) -> bool:
        checked = self._backlog.get(region)
        now = time.monotonic()
        if checked is None or now - checked[0] >= BACKLOG_CHECK_S:
            try:
                if self._redis is None:
                    self._redis = redis.Redis.from_url(self.broker_url)
                # Celery's Redis transport keeps a queue as a list under the queue's name.
                depth = int(self._redis.llen(region_queue(region)))
            except redis.RedisError:
                depth = 0  # unknown: let send_task find out and count the failure
            checked = (now, depth)
            self._backlog[region] = checked
        return checked[1] >= self.max_backlog


def _release(producer: Any) -> None:
    """Give ``producer`` back to its pool (None: nothing to do)."""
    if producer is not None:
        try:
            producer.release()
        except Exception as exc:  # a broken connection is dropped by the pool anyway
            log.debug("producer not released: %s", type(exc).__name__)
