"""A Celery application that only sends tasks, as the gateway's, for tests in this process."""

from __future__ import annotations

import kombu.pools
from celery import Celery


def sending_app(broker_url: str) -> Celery:
    """An application sending to ``broker_url`` (never the process-wide default)."""
    return Celery("tokenbench-test-sender", broker=broker_url, set_as_current=False)


def close(app: Celery) -> None:
    """Close the application's broker connections, all of them: ``Celery.close()`` leaves
    those held by kombu's process-wide producer pools open, and the garbage collector
    would close them later, in whatever test is running then, with a ResourceWarning."""
    app.close()
    kombu.pools.reset()
