"""Scraping a provider's Prometheus endpoint while a shard runs (docs/telemetry.md).

The shard that the planner marks (``ShardSpec.scrape_metrics``: one part per provider,
region and stage; every part of a simulated provider) scrapes ``metrics_url`` once when
it starts, every ``metrics_interval_s`` while its load runs and once when it ends. The
scrape shares the shard's event loop, so it is kept light: its own HTTP client (it never
takes a pooled measurement connection, nor counts against the pre-warm), one request at
a time, a deadline, at most ``MAX_METRICS_BODY_BYTES`` read, and the text parsed in a
thread (only the lines of known names, ``workers/shard/prometheus_text.py``).

Every scrape is a row, failed ones included (refused by the egress policy, unbound
token, HTTP error, timeout, body too large): telemetry never fails a shard. Rows travel
as Arrow batches on the run's metrics stream (``scenarios/wire/contract.py``), published while
the execution holds its claim, every ``publish.batch_interval_s`` and at the end; while
Redis is away they wait, up to ``MAX_BUFFERED_SCRAPES`` (the oldest beyond are dropped,
logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from scenarios.limits import MAX_METRICS_BODY_BYTES, MAX_METRICS_SCRAPE_S
from scenarios.providers.base import join_url
from scenarios.security.egress import EgressDenied, check_url
from scenarios.wire.contract import STREAM_MAXLEN, MetricsBatch, ShardSpec, metrics_stream
from scenarios.wire.server_metrics import KNOWN_NAMES, ScrapeStatus, scrapes_to_ipc
from workers.client.provider_setup import ProviderSetupError
from workers.runtime.context import WorkerContext
from workers.shard.ownership import TRANSIENT_ERRORS, Claim, ClaimLost, RedisUnavailable, retrying
from workers.shard.prometheus_text import Parsed, parse_known

log = logging.getLogger("tokenbench.worker")

# Scrape rows kept while Redis is unreachable: an hour at the default interval.
MAX_BUFFERED_SCRAPES = 3600
# Characters of a scrape's error message kept (a server's error page can be long).
MAX_ERROR_CHARS = 500
_ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
_TEXT_TYPES = frozenset({"text/plain", "application/openmetrics-text"})


class ScrapeFailed(Exception):
    """One scrape failed; the message says why (recorded on its row)."""

    def __init__(self, message: str, http_status: int | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status


@dataclass(frozen=True, slots=True)
class Target:
    """Where to scrape, and with which header."""

    url: str
    headers: dict[str, str]


def scrape_timeout_s(interval_s: float) -> float:
    """One scrape's deadline: the interval (so scrapes never pile up), at least 1 s,
    at most ``MAX_METRICS_SCRAPE_S``."""
    return min(max(interval_s, 1.0), MAX_METRICS_SCRAPE_S)


def simulator_metrics_url(base_url: str, path: str) -> str:
    """The URL of ``path`` on a simulated endpoint whose API is at ``base_url`` (…/v1)."""
    return join_url(base_url.rstrip("/").removesuffix("/v1"), path)


async def read_bounded(response: httpx.Response, limit: int = MAX_METRICS_BODY_BYTES) -> bytes:
    """The body of a streamed ``response``; ScrapeFailed once it passes ``limit`` bytes."""
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > limit:
            raise ScrapeFailed(f"the answer is larger than {limit} bytes (MAX_METRICS_BODY_BYTES)")
    return bytes(body)


def check_content_type(value: str | None) -> None:
    """ScrapeFailed unless an answer's content type is Prometheus text (or unsaid, as
    some exporters leave it): a JSON or HTML page at the URL is no metrics endpoint."""
    if value is None:
        return
    kind = value.split(";", 1)[0].strip().lower()
    if kind not in _TEXT_TYPES:
        raise ScrapeFailed(f"the answer is {kind}, not Prometheus text (text/plain)")


async def fetch(client: httpx.AsyncClient, target: Target, deadline_s: float) -> bytes:
    """The body of one scrape of ``target``; ScrapeFailed with the reason otherwise."""
    try:
        async with asyncio.timeout(deadline_s):
            request = client.build_request("GET", target.url, headers=target.headers)
            response = await client.send(request, stream=True)
            try:
                if response.status_code != 200:
                    raise ScrapeFailed(f"HTTP {response.status_code}", response.status_code)
                check_content_type(response.headers.get("content-type"))
                return await read_bounded(response)
            finally:
                await response.aclose()
    except TimeoutError:
        raise ScrapeFailed(f"no complete answer within {deadline_s:g} s") from None
    except EgressDenied as exc:
        raise ScrapeFailed(f"refused by the egress policy: {exc}") from None
    except (httpx.HTTPError, OSError) as exc:
        raise ScrapeFailed(f"{type(exc).__name__}: {exc}") from None


def parse_body(body: bytes) -> Parsed:
    """The known series of one answer (in a thread: never on the event loop)."""
    return parse_known(body.decode("utf-8", errors="replace"), KNOWN_NAMES)


async def _parsed(body: bytes) -> Parsed:
    """``parse_body`` in a thread; anything the parser did not expect is this scrape's
    error, never the shard's."""
    try:
        return await asyncio.to_thread(parse_body, body)
    except Exception as exc:  # a hostile answer must not fail the shard
        raise ScrapeFailed(f"unreadable answer: {type(exc).__name__}: {exc}") from None


class MetricsScraper:
    """The scrapes of one shard attempt: an async context around the shard's load."""

    def __init__(
        self,
        spec: ShardSpec,
        context: WorkerContext,
        attempt: int,
        claim: Claim | None,
        url: str,
        interval_s: float,
        token_env: str | None = None,
    ) -> None:
        self.spec = spec
        self.context = context
        self.attempt = attempt
        self.claim = claim
        self.url = url
        self.interval_s = interval_s
        self.token_env = token_env
        self.scrapes = 0
        self.published = 0
        self._rows: list[dict[str, object]] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_publish = time.monotonic()

    @property
    def pending(self) -> list[dict[str, object]]:
        """Scrape rows not published (yet, or ever: Redis stayed away)."""
        return list(self._rows)

    @classmethod
    def for_shard(
        cls,
        spec: ShardSpec,
        context: WorkerContext,
        attempt: int,
        claim: Claim | None,
        endpoint: str | None,
    ) -> MetricsScraper | None:
        """The scraper of a shard the planner marked, or None (nothing to scrape)."""
        provider: Any = spec.provider
        url = getattr(provider, "metrics_url", None)
        if not spec.scrape_metrics or url is None:
            return None
        if url.startswith("/"):  # a path of the simulated endpoint the worker started
            if endpoint is None:
                return None
            url = simulator_metrics_url(endpoint, url)
        interval = float(provider.metrics_interval_s)
        token = getattr(provider, "metrics_api_key_env", None)
        return cls(spec, context, attempt, claim, url, interval, token)

    async def __aenter__(self) -> MetricsScraper:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._task is not None:
            try:
                await self._task
            except Exception:  # telemetry never fails the shard: logged, the rest kept
                log.exception("shard %s: server telemetry stopped", self.spec.shard_id)
        if exc_type is not None and issubclass(exc_type, ClaimLost | RedisUnavailable):
            return  # nothing more can be published
        try:
            await retrying(
                self._publish, self.context.settings.control.redis_patience_s, "publishing scrapes"
            )
        except (ClaimLost, RedisUnavailable) as failure:
            log.warning("shard %s: %d scrapes not published: %s", self.spec.shard_id,
                        len(self._rows), failure)  # fmt: skip

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        target = await self._target()
        if target is None:
            return  # refused: its one error row says why
        client = self.context.metrics_http or self.context.http
        timeout = scrape_timeout_s(self.interval_s)
        next_at = time.monotonic()
        while True:
            stopping = self._stop.is_set()
            await self._scrape(client, target, timeout)
            await self._publish_due()
            if stopping:
                return
            next_at = max(next_at + self.interval_s, time.monotonic())
            with contextlib.suppress(TimeoutError):
                # Stopping wakes it early for the last scrape, at the end of the load.
                await asyncio.wait_for(self._stop.wait(), next_at - time.monotonic())

    async def _target(self) -> Target | None:
        """The URL and header, once the URL passed the egress policy after DNS and the
        token may go to its host; else one error row and None."""
        started = time.time_ns()
        try:
            policy = self.context.settings.egress
            if self.spec.provider.kind != "simulated":  # the worker trusts its own
                await asyncio.to_thread(check_url, self.url, policy, True)
            headers = {"accept": _ACCEPT, "accept-encoding": "identity"}
            if self.token_env is not None:
                token = self.context.secrets.get(self.token_env, self.url, self.spec.provider.name)
                headers["authorization"] = f"Bearer {token}"
        except EgressDenied as exc:
            self._record(started, 0, error=ScrapeFailed(f"refused by the egress policy: {exc}"))
            return None
        except ProviderSetupError as exc:
            self._record(started, 0, error=ScrapeFailed(str(exc)))
            return None
        return Target(self.url, headers)

    async def _scrape(self, client: httpx.AsyncClient, target: Target, deadline_s: float) -> None:
        started = time.time_ns()
        clock = time.perf_counter_ns()
        try:
            body = await fetch(client, target, deadline_s)
            parsed = await _parsed(body)
        except ScrapeFailed as exc:
            self._record(started, time.perf_counter_ns() - clock, error=exc)
            return
        self._record(started, time.perf_counter_ns() - clock, parsed=parsed, body_bytes=len(body))

    def _record(
        self,
        started_ns: int,
        duration_ns: int,
        *,
        parsed: Parsed | None = None,
        body_bytes: int | None = None,
        error: ScrapeFailed | None = None,
    ) -> None:
        spec = self.spec
        self._rows.append(
            {
                "run_id": spec.run_id,
                "stage": spec.stage,
                "provider": spec.provider.name,
                "region": self.context.region,
                "shard_id": spec.shard_id,
                "attempt": self.attempt,
                "worker": self.context.worker_name,
                "scrape_seq": self.scrapes,
                "scraped_at": started_ns,
                "duration_ns": duration_ns,
                "status": (ScrapeStatus.OK if error is None else ScrapeStatus.ERROR).value,
                "http_status": 200 if error is None else error.http_status,
                "error_message": None if error is None else str(error)[:MAX_ERROR_CHARS],
                "body_bytes": body_bytes,
                "series_dropped": None if parsed is None else parsed.dropped,
                "samples": [] if parsed is None else parsed.samples,
            }
        )
        self.scrapes += 1
        if len(self._rows) > MAX_BUFFERED_SCRAPES:
            del self._rows[: len(self._rows) - MAX_BUFFERED_SCRAPES]
            log.warning("shard %s: scrapes buffered beyond %d, oldest dropped",
                        spec.shard_id, MAX_BUFFERED_SCRAPES)  # fmt: skip

    # ------------------------------------------------------------------ publishing

    async def _publish_due(self) -> None:
        interval = self.context.settings.publish.batch_interval_s
        if time.monotonic() - self._last_publish < interval:
            return
        try:
            await self._publish()
        except TRANSIENT_ERRORS as exc:  # kept; the next one or the last retries
            log.debug("shard %s: scrapes not published yet: %s", self.spec.shard_id, exc)
        except ClaimLost:
            self._stop.set()  # superseded: the load stops too (workers/shard/execute.py)

    async def _publish(self) -> None:
        """Publish the buffered rows as one batch (no-op when none)."""
        self._last_publish = time.monotonic()
        if not self._rows:
            return
        rows = list(self._rows)
        batch = MetricsBatch(self.spec.shard_id, self.attempt, len(rows), scrapes_to_ipc(rows))
        stream = metrics_stream(self.spec.run_id)
        if self.claim is None:
            await self.context.redis.xadd(
                stream, batch.fields(), maxlen=STREAM_MAXLEN, approximate=True
            )
        else:
            await self.claim.xadd(stream, batch.fields(), STREAM_MAXLEN)
        del self._rows[: len(rows)]
        self.published += len(rows)
