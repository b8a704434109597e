"""api/schedules/webhook.py against a real loopback receiver: delivered once on a 2xx, to
exactly the address the egress policy checked (Host kept), retried a bounded number of
times, never redirected, refused by the policy before and after DNS, and a body that
holds ids and figures only."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator

import pytest

from api.schedules.webhook import (
    EVENT,
    Delivery,
    DeliveryOutcome,
    deliver,
    regression_body,
    shown,
)
from scenarios.security.egress import EgressGuard
from scenarios.settings import EgressSettings
from tests.fakes.catcher import Catcher

LOOPBACK = EgressSettings(allow_loopback=True)
REGRESSION = {
    "provider": "api",
    "region": "eu",
    "stage": 0,
    "metric": "ttft_p50_ms",
    "title": "TTFT p50",
    "unit": "ms",
    "latest": 210.0,
    "window_mean": 20.5,
    "band_low": 18.0,
    "band_high": 23.0,
    "window_runs": 3,
    "change": 189.5,
    "relative_change": 9.2,
    "verdict": "regression: ...",
    "points": "not sent",
}


@pytest.fixture
def catcher() -> Iterator[Catcher]:
    server = Catcher().start()
    yield server
    server.stop()


async def _no_wait(_: float) -> None:
    return None


def _send(
    url: str,
    policy: EgressSettings = LOOPBACK,
    attempts: int = 3,
    guard: EgressGuard | None = None,
) -> Delivery:
    body = regression_body(
        schedule_id="sch-1", schedule_name="nightly", scenario_id="sc-1", run_id="r9",
        regressions=[REGRESSION],
    )  # fmt: skip
    return asyncio.run(
        deliver(url, body, policy, timeout_s=5.0, attempts=attempts, guard=guard, sleep=_no_wait)
    )


def test_the_body_names_the_run_and_the_figures_only() -> None:
    body = regression_body(
        schedule_id="sch-1", schedule_name=None, scenario_id="sc-1", run_id="r9",
        regressions=[REGRESSION],
    )  # fmt: skip
    assert body["event"] == EVENT and body["run_id"] == "r9"
    assert body["trend"] == "/v1/trends?schedule_id=sch-1"
    assert "points" not in body["regressions"][0]
    assert body["regressions"][0]["latest"] == 210.0


def test_a_2xx_is_delivered_once(catcher: Catcher) -> None:
    delivery = _send(f"{catcher.url}/hook")
    assert delivery.outcome == DeliveryOutcome.DELIVERED and delivery.attempts == 1
    assert len(catcher.requests) == 1
    request = catcher.requests[0]
    assert request.method == "POST" and request.path == "/hook"
    assert json.loads(request.body)["regressions"][0]["metric"] == "ttft_p50_ms"


def test_the_checked_address_is_the_one_connected_to(catcher: Catcher) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        assert host == "hooks.example"
        return ["127.0.0.1"]

    guard = EgressGuard(LOOPBACK, resolver=resolve)
    delivery = _send(f"http://hooks.example:{catcher.port}/hook", guard=guard)
    assert delivery.outcome == DeliveryOutcome.DELIVERED
    assert {k.lower(): v for k, v in catcher.requests[0].headers.items()}[
        "host"
    ] == f"hooks.example:{catcher.port}"


def test_a_name_resolving_to_a_refused_address_is_refused_after_dns(catcher: Catcher) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["169.254.169.254"]

    guard = EgressGuard(LOOPBACK, resolver=resolve)
    delivery = _send("http://hooks.example/hook", guard=guard)
    assert delivery.outcome == DeliveryOutcome.REFUSED
    assert "169.254" in str(delivery.message)
    assert catcher.requests == []


def test_the_policy_refuses_before_anything_is_sent(catcher: Catcher) -> None:
    refused = _send(f"{catcher.url}/hook", policy=EgressSettings())  # loopback not allowed
    assert refused.outcome == DeliveryOutcome.REFUSED and refused.attempts == 1
    assert "TOKENBENCH__EGRESS__ALLOW_LOOPBACK" in str(refused.message)
    metadata = _send("http://169.254.169.254/latest/meta-data")
    assert metadata.outcome == DeliveryOutcome.REFUSED
    assert catcher.requests == []


def test_server_errors_are_retried_a_bounded_number_of_times(catcher: Catcher) -> None:
    catcher.answer("/hook", {"error": "busy"}, status=503)
    delivery = _send(f"{catcher.url}/hook")
    assert delivery.outcome == DeliveryOutcome.FAILED
    assert delivery.attempts == 3 and delivery.status == 503
    assert len(catcher.requests) == 3


def test_a_refusal_is_not_retried(catcher: Catcher) -> None:
    catcher.answer("/hook", {"error": "no"}, status=404)
    delivery = _send(f"{catcher.url}/hook")
    assert (delivery.attempts, delivery.status) == (1, 404)
    assert len(catcher.requests) == 1


def test_a_redirect_is_never_followed(catcher: Catcher) -> None:
    delivery = _send(f"{catcher.url}/redirect?to={catcher.url}/elsewhere")
    assert delivery.outcome == DeliveryOutcome.FAILED
    assert delivery.message == "redirect not followed"
    assert [r.path.split("?")[0] for r in catcher.requests] == ["/redirect"]


def test_an_unreachable_receiver_fails_after_its_tries() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    delivery = _send(f"http://127.0.0.1:{port}/hook", attempts=2)
    assert delivery.outcome == DeliveryOutcome.FAILED and delivery.attempts == 2
    assert delivery.status is None and "Connect" in str(delivery.message)


def test_a_url_with_credentials_is_delivered_with_them(catcher: Catcher) -> None:
    # The URL is a credential: user and password go as Basic auth, the token in the
    # query and the hook's path as given; only the views redact it (shown()).
    url = catcher.url.replace("http://", "http://hook:pa55word@") + "/hooks/T1/s3cret?token=tk9"
    assert _send(url).outcome == DeliveryOutcome.DELIVERED
    (request,) = catcher.requests
    assert request.path == "/hooks/T1/s3cret?token=tk9"
    assert request.headers["Authorization"] == "Basic aG9vazpwYTU1d29yZA=="  # hook:pa55word


def test_a_delivery_message_never_holds_the_url_credentials() -> None:
    url = "https://hook:pa55word@hooks.example/T1/s3cret?token=tk9"
    message = shown(f"ConnectError: cannot reach {url} (pa55word)", url)
    assert message == (
        "ConnectError: cannot reach https://[redacted]@hooks.example/[redacted] ([redacted])"
    )
