"""The regression webhook: a small JSON POST to the URL a schedule names.

A webhook URL comes from an untrusted REST submitter, so it is treated as a provider
URL is (scenarios/security/egress.py): checked by the egress policy when the schedule is
accepted (no DNS: a 422 at ``webhook_url``), and again when sending, after DNS: the
name is resolved once, every address checked, and the request goes to exactly the
checked address (Host header and TLS server name stay the URL's), so a name that
resolves elsewhere the second time (DNS rebinding) cannot move it. Redirects are never
followed (a 3xx is a failed delivery), each try has a bounded deadline, tries are
bounded, and the body carries no secret: ids, provider names and figures only.

The URL itself is a credential (``user:password@``, ``?token=``, a hook's secret path):
it is sent as given (user and password as Basic auth, as httpx does), but every read
path shows only :func:`scenarios.security.redaction.public_url` of it: the REST schedule views
(and so the CLI), each delivery's message (:func:`shown`), and the SQL API's copy of the
database (analytics/query/snapshot.py rewrites the column there).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from scenarios.security.egress import EgressDenied, EgressGuard, check_url, url_host
from scenarios.security.redaction import public_url, redact
from scenarios.settings import EgressSettings

EVENT = "tokenbench.regression"
# Waits between tries: 1 s, 2 s, 4 s... at most this long.
MAX_BACKOFF_S = 8.0
# A receiver's answer is not read beyond its status: nothing of it is kept.
_RETRIED_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
_REGRESSION_FIELDS = (
    "provider", "region", "stage", "metric", "title", "unit", "latest", "window_mean",
    "band_low", "band_high", "window_runs", "change", "relative_change", "verdict",
)  # fmt: skip


class DeliveryOutcome:
    """How a notification ended."""

    DELIVERED = "delivered"  # a 2xx answer
    FAILED = "failed"  # every try failed (or the receiver refused it with a 4xx)
    REFUSED = "refused"  # the egress policy forbids the URL (now)


@dataclass(frozen=True)
class Delivery:
    """A notification's outcome: tries made, the last HTTP status, why it failed."""

    attempts: int
    status: int | None
    outcome: str
    message: str | None = None


def check_webhook_url(url: str, policy: EgressSettings) -> None:
    """Raise EgressDenied if the egress policy refuses ``url`` (no DNS lookup)."""
    check_url(url, policy, resolve=False)


def shown(message: str, url: str) -> str:
    """A delivery's message as stored and shown with the schedule: the webhook URL (and
    its password, if any) in its public form, then the usual redaction (no secrets, no
    URL query or user part; scenarios/security/redaction.py)."""
    if not url:
        return redact(message)
    try:
        password = httpx.URL(url).password or ""
    except httpx.InvalidURL:
        password = ""
    return redact(message.replace(url, public_url(url)), (password,))


def regression_body(
    *,
    schedule_id: str,
    schedule_name: str | None,
    scenario_id: str,
    run_id: str,
    regressions: list[dict[str, Any]],
) -> dict[str, Any]:
    """The JSON a webhook receives: which run regressed, where, by how much."""
    return {
        "event": EVENT,
        "schedule_id": schedule_id,
        "schedule_name": schedule_name,
        "scenario_id": scenario_id,
        "run_id": run_id,
        "trend": f"/v1/trends?schedule_id={schedule_id}",
        "regressions": [{k: r.get(k) for k in _REGRESSION_FIELDS} for r in regressions],
    }


async def _pinned_request(
    url: str, policy: EgressSettings, guard: EgressGuard
) -> tuple[httpx.URL, dict[str, str], dict[str, Any]]:
    """The URL to send to (its host replaced by the one checked address), the Host
    header and the TLS server name of the original."""
    scheme, host, port = url_host(url)
    default_port = 443 if scheme == "https" else 80
    addresses = await guard.addresses(host, port or default_port)
    address = addresses[0][1][0]
    original = httpx.URL(url)
    target = original.copy_with(host=address)
    host_header = original.netloc.decode("ascii")
    extensions: dict[str, Any] = {"sni_hostname": host} if scheme == "https" else {}
    return target, {"host": host_header}, extensions


Sleep = Callable[[float], Awaitable[None]]


async def deliver(
    url: str,
    body: dict[str, Any],
    policy: EgressSettings,
    *,
    timeout_s: float,
    attempts: int,
    guard: EgressGuard | None = None,
    sleep: Sleep = asyncio.sleep,
) -> Delivery:
    """POST ``body`` to ``url``: up to ``attempts`` tries, each within ``timeout_s``,
    retrying connection failures, timeouts, 408/425/429 and 5xx; never a redirect."""
    guard = guard or EgressGuard(policy)
    status: int | None = None
    message: str | None = None
    async with httpx.AsyncClient(
        timeout=timeout_s, follow_redirects=False, trust_env=False
    ) as client:
        for attempt in range(1, attempts + 1):
            try:
                check_url(url, policy, resolve=False)
                target, headers, extensions = await _pinned_request(url, policy, guard)
                async with asyncio.timeout(timeout_s):
                    request = client.build_request(
                        "POST", target, json=body, headers=headers, extensions=extensions
                    )
                    response = await client.send(request, stream=True)
                    await response.aclose()
            except EgressDenied as exc:
                return Delivery(attempt, None, DeliveryOutcome.REFUSED, shown(str(exc), url))
            except (httpx.HTTPError, OSError, socket.gaierror, TimeoutError) as exc:
                status, message = None, shown(f"{type(exc).__name__}: {exc}", url)
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return Delivery(attempt, status, DeliveryOutcome.DELIVERED)
                if 300 <= status < 400:
                    return Delivery(
                        attempt, status, DeliveryOutcome.FAILED, "redirect not followed"
                    )
                message = f"HTTP {status}"
                if status not in _RETRIED_STATUSES:
                    return Delivery(attempt, status, DeliveryOutcome.FAILED, message)
            if attempt < attempts:
                await sleep(min(MAX_BACKOFF_S, 2.0 ** (attempt - 1)))
    return Delivery(attempts, status, DeliveryOutcome.FAILED, message)
