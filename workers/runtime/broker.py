"""The Celery broker transport and Redis client options that survive a Redis restart.

Why a transport of our own: with kombu's Redis transport, a worker that holds a task
acknowledged late (every shard) died for good when Redis restarted. On connection loss
Celery's consumer first calls ``Connection.collect()``, which drops the transport's
reference to its connection, and then ``Connection.close()``, which closes the channel;
closing a channel restores its unacknowledged messages, for which it builds a new Redis
client from that dropped reference: ``AttributeError: 'NoneType' object has no attribute
'hostname'``. ``close()`` runs under ``ignore_errors``, which ignores connection errors
only, so the AttributeError escaped and the worker stopped ("Unrecoverable error").
Idle workers were spared because they have nothing to restore.

:class:`Transport` keeps each channel's broker address, so that closing it (and
acknowledging, later, a message it delivered) reaches the broker, or fails with an
ordinary connection error, which Celery handles by reconnecting.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import redis as kombu_redis

from scenarios.wire.contract import REDIS_CLIENT_OPTIONS

# Every Redis client of a worker: see scenarios.wire.contract.REDIS_CLIENT_OPTIONS.
CLIENT_OPTIONS: dict[str, Any] = dict(REDIS_CLIENT_OPTIONS)

# The same for the broker connections (kombu transport options, docs/security.md).
TRANSPORT_OPTIONS: dict[str, Any] = {**CLIENT_OPTIONS, "retry_on_timeout": True}


class Channel(kombu_redis.Channel):
    """kombu's Redis channel, remembering its broker address for its whole life."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self._broker = self.connection.client

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        transport = self.connection
        if transport.client is not None:
            return dict(super()._connparams(asynchronous=asynchronous))  # type: ignore[no-untyped-call]
        # Celery dropped the reference on connection loss (see the module docstring):
        # build the client from the address this channel was opened with.
        transport.client = self._broker
        try:
            return dict(super()._connparams(asynchronous=asynchronous))  # type: ignore[no-untyped-call]
        finally:
            transport.client = None


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`Channel`."""

    Channel = Channel


# The value of Celery's ``broker_transport`` setting, registered as a kombu alias so that
# logs show ``tokenbench-redis://host:port`` rather than a class path.
TRANSPORT = "tokenbench-redis"
TRANSPORT_ALIASES[TRANSPORT] = f"{__name__}:Transport"
