"""A Celery application that only sends tasks, as the gateway's, for tests in this process."""

from __future__ import annotations

import uuid

import kombu.pools
from celery import Celery

# kombu keeps its producer and connection pools process-wide, keyed by the broker's
# address *and transport options*: an application given an option of its own gets pools
# of its own, which closing it may close without touching those of another application
# of the same process on the same broker (a session-wide control plane, say).
_OWN_POOLS_OPTION = "tokenbench_test_sender"


def sending_app(broker_url: str) -> Celery:
    """An application sending to ``broker_url`` (never the process-wide default), with
    kombu pools no other application of the process shares."""
    app = Celery("tokenbench-test-sender", broker=broker_url, set_as_current=False)
    app.conf.broker_transport_options = {_OWN_POOLS_OPTION: uuid.uuid4().hex}
    return app


def close(app: Celery) -> None:
    """Close the application's broker connections, all of them: ``Celery.close()`` leaves
    those held by kombu's process-wide producer pools open, and the garbage collector
    would close them later, in whatever test is running then, with a ResourceWarning.
    Only this application's pools are closed (``kombu.pools.reset()`` would close every
    application's, and a session-wide one would then fail with "Acquire on closed pool")."""
    tag = str(app.conf.broker_transport_options.get(_OWN_POOLS_OPTION))
    app.close()
    for group in kombu.pools._groups:
        for key in [k for k in group if tag in repr(k)]:
            group.pop(key).force_close_all()
