"""The connection phases of one request, as the arrival transport saw them.

The caller puts a :class:`Phases` in the request's extensions (``PHASES_EXTENSION``);
the transport fills it in as the request goes: the name resolved (DNS), the TCP connect,
the TLS handshake (each a start and an end ``perf_counter_ns`` stamp, left None when the
request did not open a connection, or when there was no such phase: no lookup for an IP
address, no TLS for http), the moment the last byte of the request was handed to the
kernel (``request_written``: as the send call that handed it over began, so it is never
after the first byte of the answer), and whether this request opened its connection
(``connection_new``: False on a reused keep-alive or pre-warmed connection). A phase
that failed keeps its start and no end. Only this transport fills it: with another one
everything stays None (unknown), docs/metrics.md, "Connection phases".
"""

from __future__ import annotations

from dataclasses import dataclass

PHASES_EXTENSION = "tokenbench.phases"


@dataclass(slots=True)
class Phases:
    """Stamps of one request's connection phases (``perf_counter_ns``); None: no such
    phase, or not seen."""

    dns_start: int | None = None
    dns_end: int | None = None
    connect_start: int | None = None
    connect_end: int | None = None
    tls_start: int | None = None
    tls_end: int | None = None
    request_written: int | None = None
    connection_new: bool | None = None
