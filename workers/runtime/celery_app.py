"""The Celery application: broker from settings, one queue per region, at-least-once.

Configured lazily (on first use of ``app.conf``) from :func:`get_settings`, so importing
this module reads no environment. Delivery settings favour never losing a shard: acks
after the task ends, requeue when the worker dies, one message prefetched at a time, a
visibility timeout longer than any shard. Connection settings favour never losing a
worker: the broker transport survives a Redis restart (``workers/runtime/broker.py``), and a
worker retries the broker forever rather than exiting after a number of attempts.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from scenarios.settings import get_settings
from scenarios.wire.contract import region_queue
from workers.runtime.broker import TRANSPORT, TRANSPORT_OPTIONS

app = Celery("tokenbench", set_as_current=False)


@app.on_configure.connect  # type: ignore[untyped-decorator]
def _configure(sender: Celery, **_: Any) -> None:
    settings = get_settings()
    sender.conf.update(
        broker_url=settings.redis.url,
        broker_transport=TRANSPORT,
        broker_connection_retry_on_startup=True,
        broker_connection_retry=True,
        # None is "forever" (0 would mean "never retry"): a worker outlives any outage.
        broker_connection_max_retries=None,
        broker_transport_options={
            # Longer than any shard: the control plane re-dispatches shards of dead
            # workers itself (heartbeats), so broker redelivery is only the last resort.
            "visibility_timeout": settings.control.visibility_timeout_s,
            **TRANSPORT_OPTIONS,
        },
        # A running shard keeps running through a broker outage (its records wait in
        # memory, workers/shard/publisher.py); cancelling it would only waste the work done.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_default_queue=region_queue(settings.worker.region),
        imports=["workers.tasks"],
    )
