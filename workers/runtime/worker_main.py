"""Starting a regional worker: a Celery worker consuming one region's queue, plus a heartbeat.

The heartbeat is an expiring Redis key per worker; the control plane counts live keys
to know which regions can take work. Its client reconnects by itself after a Redis
restart (the key is simply written again).

Stopping: SIGTERM and Ctrl-C (SIGINT) both start Celery's warm shutdown; the running
shards then stop sending, publish what they recorded and end (``workers/shard/execute.py``), so
the worker exits within about a second plus its in-flight requests, with exit code 0,
and the control plane re-dispatches those shards elsewhere. SIGQUIT is a cold shutdown.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
import uuid
from typing import Any

import redis
from celery.signals import worker_ready, worker_shutdown, worker_shutting_down
from redis.backoff import NoBackoff
from redis.retry import Retry

from scenarios.settings import env_name, get_settings
from scenarios.wire.contract import heartbeat_key, heartbeat_pattern, region_queue
from workers.runtime.broker import CLIENT_OPTIONS
from workers.runtime.celery_app import app
from workers.runtime.context import stop_simulators
from workers.runtime.event_loop import shutting_down


class Heartbeat:
    """Refreshes this worker's heartbeat key until stopped."""

    def __init__(self, url: str, region: str, name: str, concurrency: int, period_s: float) -> None:
        # No retries inside a beat: after an outage the next beat, a period later,
        # reconnects (retrying with backoff would delay the first beat by seconds).
        self.client = redis.Redis.from_url(url, **CLIENT_OPTIONS, retry=Retry(NoBackoff(), 0))
        self.key = heartbeat_key(region, name)
        self.period_s = period_s
        self.payload = json.dumps(
            {"region": region, "worker": name, "pid": os.getpid(), "concurrency": concurrency}
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tokenbench-heartbeat", daemon=True)

    def start(self) -> None:
        """Begin beating (first beat immediately)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop and remove the key, so the region's live count drops at once."""
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(redis.RedisError):  # else the key expires by itself
            self.client.delete(self.key)

    def _run(self) -> None:
        ttl = max(1, round(self.period_s * 3))
        while not self._stop.is_set():
            # Broker briefly unreachable: the key expiring is the right signal.
            with contextlib.suppress(redis.RedisError):
                self.client.set(self.key, self.payload, ex=ttl)
            self._stop.wait(self.period_s)


def start_worker(region: str, concurrency: int = 8, loglevel: str = "WARNING") -> None:
    """Run a Celery worker for ``region`` in this process until it is stopped;
    ``concurrency`` is the number of shards it runs at once (on one event loop)."""
    os.environ[env_name("worker.region")] = region
    get_settings.cache_clear()
    settings = get_settings()
    if settings.redis.url is None:
        raise SystemExit(f"set {env_name('redis.url')} to the broker a worker should use")
    name = f"{region}-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
    # Events and records carry this name, so the control plane can tell from the
    # heartbeat whether the worker running a shard is still alive.
    os.environ["TOKENBENCH_WORKER_NAME"] = name
    beat = Heartbeat(settings.redis.url, region, name, concurrency, settings.worker.heartbeat_s)

    @worker_ready.connect(weak=False)  # type: ignore[untyped-decorator]
    def _ready(**_: Any) -> None:
        beat.start()
        _say_ready()
        parent = os.environ.get("TOKENBENCH_PARENT_PID")
        if parent:
            _exit_with_parent(int(parent))

    @worker_shutting_down.connect(weak=False)  # type: ignore[untyped-decorator]
    def _shutting_down(**_: Any) -> None:
        shutting_down.set()  # running shards stop at their next progress tick

    @worker_shutdown.connect(weak=False)  # type: ignore[untyped-decorator]
    def _shutdown(**_: Any) -> None:
        beat.stop()
        stop_simulators()

    app.worker_main(
        [
            "worker",
            "--queues",
            region_queue(region),
            "--concurrency",
            str(concurrency),
            "--hostname",
            name,
            "--loglevel",
            loglevel,
            # Threads, not forked children: every shard of this process runs on its one
            # event loop and shares its HTTP connection pool; a thread only waits.
            "--pool",
            "threads",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
    )


def _say_ready() -> None:
    """Under ``tokenbench worker --processes N``: tell the supervisor this process is
    consuming, so that a later death is restarted (workers/runtime/worker_processes.py)."""
    ready_fd = os.environ.get("TOKENBENCH_READY_FD")
    if ready_fd:
        with contextlib.suppress(OSError):  # the supervisor is gone: nobody to tell
            os.write(int(ready_fd), f"{os.getpid()}\n".encode())
            os.close(int(ready_fd))


def _exit_with_parent(parent_pid: int) -> None:
    """Embedded workers: cold-shut down when the `tokenbench run` that started us is gone."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGQUIT)

    threading.Thread(target=watch, name="tokenbench-parent-watch", daemon=True).start()


def live_workers(client: redis.Redis, region: str) -> int:
    """Number of workers of ``region`` whose heartbeat is current."""
    return sum(1 for _ in client.scan_iter(match=heartbeat_pattern(region), count=100))


__all__ = ["Heartbeat", "live_workers", "start_worker"]
