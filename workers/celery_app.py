"""The Celery application: broker from settings, one queue per region, at-least-once.

Configured lazily (on first use of ``app.conf``) from :func:`get_settings`, so importing
this module reads no environment. Delivery settings favour never losing a shard: acks
after the task ends, requeue when the worker dies, one message prefetched at a time, a
visibility timeout longer than any shard.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from scenarios.settings import get_settings
from scenarios.wire import region_queue

app = Celery("tokenbench", set_as_current=False)


@app.on_configure.connect  # type: ignore[untyped-decorator]
def _configure(sender: Celery, **_: Any) -> None:
    settings = get_settings()
    sender.conf.update(
        broker_url=settings.redis.url,
        broker_connection_retry_on_startup=True,
        # Longer than any shard: the control plane re-dispatches shards of dead workers
        # itself (heartbeats), so broker redelivery is only the last resort.
        broker_transport_options={"visibility_timeout": settings.control.visibility_timeout_s},
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
