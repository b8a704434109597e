"""An httpx transport that stamps response bytes when they arrived, not when they are read.

With httpx's API over aiohttp (or httpcore), a chunk is timed when the coroutine that
iterates ``response.aiter_raw()`` gets its turn. When many streams' bytes arrive
together, that coroutine runs after every other stream's parsing and decoding, so the
stamp carries the client's own queueing: 77/259 ms TTFT error p50/p99 at 256 streams
(benchmarks/client_accuracy.py). Stamping in ``asyncio.Protocol.data_received`` only
moves the problem: bytes still wait in the kernel while the loop is busy (a burst of
256 requests being built keeps it busy for tens of ms), and measured p99 stayed at
~40 ms. So this transport reads its sockets itself (``loop.add_reader`` + ``recvmsg``)
and asks Linux for the receive time of the bytes (``SO_TIMESTAMPNS``, the moment the
kernel queued them on the socket), converted to the ``perf_counter_ns`` clock of every
other stamp. Elsewhere the stamp is the read time, as early as Python sees the bytes.
The stamp travels with the bytes to the reader: ``arrival_of(response).last``.

One limit remains: bytes left unread are merged by the kernel with the connection's next
segment, under the later stamp, so a loop blocked for longer than a stream's ITL would
stamp a token with the arrival of the one after it. ``ArrivalTransport.sweep`` reads
waiting sockets from inside the client's busy paths (every body chunk handed over, every
request sent), at most every millisecond, which keeps such waits short. Measured at 256
streams on a shared 2-core machine: TTFT error p50 0.5-2 ms, p99 2-15 ms depending on the
machine's other load, where the aiohttp transport gave 23-50 / 119-205 ms (docs/load.md).

    ArrivalTransport      httpx.AsyncBaseTransport: connections pooled per origin without
                          a cap (the load shape sets concurrency, never the pool), TLS
      Connection         one HTTP/1.1 keep-alive socket; httptools' response parser
                          (llhttp: chunked decoding, lengths, keep-alive)
        ArrivalStream     the response body: (stamp, bytes) pairs, as httpx byte chunks

A request that carries a :class:`Phases` in its extensions (``PHASES_EXTENSION``) gets
its connection phases stamped: DNS, TCP connect and TLS when it opened its connection,
the moment its last byte went to the kernel, and whether its connection was new.

Errors are raised as httpx exceptions so ``workers.client.errors`` classifies them as it
does any httpx transport's: refused/unresolvable/TLS failure → ``ConnectError``, connect
deadline → ``ConnectTimeout``, server silent for the read timeout → ``ReadTimeout``,
stream cut or malformed → ``RemoteProtocolError`` / ``ReadError``.

The read timeout is the longest silence of the server while a response is due (from the
request written to the response's last byte), whether or not anyone is reading — the
stall the measurement definitions mean. HTTP/1.1 only; no proxies of its own (httpx's
environment proxy mounts take precedence); no DNS cache (connections are long-lived and
reused).

Egress: given an :class:`~scenarios.security.egress.EgressGuard`, every connection the transport
opens is checked at the address it connects to: the guard resolves the name once,
refuses the host if any address is forbidden (``EgressRefused``, a ConnectError, before
any connect) and hands back exactly the checked addresses. The Host header and the TLS
server name stay the URL's host. The transport never follows redirects (httpx's client
does that, and worker clients are built with ``follow_redirects=False``).
"""

from workers.client.transport.arrival import ARRIVAL_EXTENSION, ArrivalStream, arrival_of
from workers.client.transport.phases import PHASES_EXTENSION, Phases
from workers.client.transport.pool import ArrivalTransport, EgressRefused

__all__ = [
    "ARRIVAL_EXTENSION",
    "PHASES_EXTENSION",
    "ArrivalStream",
    "ArrivalTransport",
    "EgressRefused",
    "Phases",
    "arrival_of",
]
