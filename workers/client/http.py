"""The HTTP client the measurement loop uses: httpx's API on a transport that stamps bytes
as they arrive (``workers/client/transport/``).

httpx's own pool caps connections at 100 by default and its bookkeeping degrades with
thousands of in-flight streams; on this kind of machine an aiohttp transport under the
same httpx API cut TTFT p50 at 256 streams from 6.6 s to 0.18 s (docs/load.md). It still
timed each chunk when the reading coroutine got its turn, so at 256 streams the TTFT
error was 77/259 ms p50/p99 (benchmarks/client_accuracy.py). The ``arrival`` transport
stamps in ``data_received`` and is the default; ``aiohttp``, ``aiohttp-100`` and
``native`` stay selectable for the side-by-side benchmarks (docs/load.md).

The aiohttp session is built here rather than by ``httpx_aiohttp``: given unbounded
limits, that package leaves aiohttp's ``TCPConnector`` at *its* default of 100
connections, so stream 101 onwards queued inside the client and the queueing was timed
as TTFT (benchmarks/client_capacity.py showed a 1.4 s TTFT error at 256 streams).

Egress: a worker's client is built with an :class:`~scenarios.security.egress.EgressGuard` that
the ``arrival`` transport applies to every connection. The other transports exist for
the client benchmarks only and cannot enforce it, so asking for one with a guard is an
error rather than a silently unguarded client. No client follows redirects: a 3xx
answer is a classified error row (``workers/client/streaming.py``).
"""

from __future__ import annotations

from typing import Any, Literal

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from scenarios.security.egress import EgressGuard
from workers.client.transport import ArrivalTransport

Transport = Literal["arrival", "aiohttp", "aiohttp-100", "native"]

# No connection cap: a benchmark's concurrency is set by its load shape, not the pool.
UNBOUNDED = httpx.Limits(max_connections=None, max_keepalive_connections=None, keepalive_expiry=30)
KEEPALIVE_S = 30.0


class _NoCookies(httpx.Cookies):
    """A jar that keeps nothing. httpx parses every response's Set-Cookie through
    urllib's cookie machinery (a urllib Request built per response: 4.5 % of the worker
    loop's CPU at 1,000 streams, benchmarks/end_to_end_accuracy.py --profile); a
    benchmark's requests must not depend on cookies earlier answers set anyway."""

    def extract_cookies(self, response: httpx.Response) -> None:
        """Keep no cookie."""


class MeasuringClient(httpx.AsyncClient):
    """httpx's client without a cookie jar (requests carry only their own headers)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._cookies = _NoCookies()


def _unlimited_session() -> aiohttp.ClientSession:
    # limit=0 is aiohttp's "no limit"; called by the transport on first use, so the
    # session belongs to the event loop that sends.
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=KEEPALIVE_S)
    return aiohttp.ClientSession(connector=connector)


def make_client(
    transport: Transport = "arrival", guard: EgressGuard | None = None
) -> httpx.AsyncClient:
    """A client for streaming measurements; one per event loop, kept for its lifetime.

    ``guard`` checks every connection against the egress policy (``arrival`` only).
    ``aiohttp`` is the previous default (unbounded aiohttp pool, chunks stamped when
    read); ``aiohttp-100`` is that transport as ``httpx_aiohttp`` builds it by itself
    (aiohttp's 100-connection cap); ``native`` is plain httpx with limits lifted.
    """
    if transport == "arrival":
        return MeasuringClient(
            transport=ArrivalTransport(keepalive_expiry=KEEPALIVE_S, guard=guard),
            limits=UNBOUNDED,
            follow_redirects=False,
        )
    if guard is not None:
        raise ValueError(
            f"the {transport!r} transport is for client benchmarks only and cannot apply "
            "the egress guard; workers use 'arrival'"
        )
    if transport == "aiohttp":
        return httpx.AsyncClient(
            transport=AiohttpTransport(limits=UNBOUNDED, client=_unlimited_session),
            limits=UNBOUNDED,
            follow_redirects=False,
        )
    if transport == "aiohttp-100":
        return httpx.AsyncClient(
            transport=AiohttpTransport(limits=UNBOUNDED),
            limits=UNBOUNDED,
            follow_redirects=False,
        )
    return httpx.AsyncClient(limits=UNBOUNDED, follow_redirects=False)
