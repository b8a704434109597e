"""The default client (httpx on the arrival transport) against the real simulator process.

Checks what the unit tests cannot: the whole measurement path — ``make_client()``, the
OpenAI chat adapter, ``measure_request`` reading arrival stamps — on a uvloop loop as in
a worker, against the simulator in its own process: stamps in order, connections kept
alive and reused, and the simulator's faults classified as docs/metrics.md says. Timing
tolerances are medians with the slack tests/integration/test_accuracy.py allows.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from api.local.redis_server import free_port
from scenarios.providers.simulate import SimulateSpec
from tests.conftest import REPO
from workers.client.adapters import openai_chat
from workers.client.errors import ErrorClass
from workers.client.http import make_client
from workers.client.result import RequestResult
from workers.client.streaming import Limits, json_headers
from workers.client.transport import ArrivalTransport
from workers.load.closed_loop import ClosedLoop, RequestSource
from workers.prompts.plan import PlannedRequest
from workers.runtime.event_loop import new_loop
from workers.simulator.process import READY_PREFIX

# serial: it measures timing (or memory); nothing may run beside it (tests/support/tiers.py).
pytestmark = [pytest.mark.integration, pytest.mark.serial]

LIMITS = Limits(timeout_s=30.0, stall_timeout_s=10.0, connect_timeout_s=5.0)


@pytest.fixture
def simulator() -> Iterator[Callable[..., str]]:
    """Factory: start the simulator process with a spec; returns its /v1 URL."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(**spec: Any) -> str:
        args = [sys.executable, "-m", "workers.simulator"]
        args += ["--spec-json", SimulateSpec(**spec).model_dump_json()]
        process = subprocess.Popen(args, stdout=subprocess.PIPE, cwd=REPO)
        processes.append(process)
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()
        assert line.startswith(READY_PREFIX), line
        return f"http://127.0.0.1:{int(line.removeprefix(READY_PREFIX))}/v1"

    yield start
    for process in processes:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def adapter(base_url: str, limits: Limits = LIMITS) -> Any:
    """The real OpenAI chat adapter (as tests/fakes/load_harness.py builds it)."""
    return openai_chat.chat_adapter(
        url=base_url + "/chat/completions",
        model="m",
        headers=json_headers(None),
        limits=limits,
        retry=None,
    )


def closed_loop(
    base_url: str, streams: int, requests: int, output_tokens: int, limits: Limits = LIMITS
) -> tuple[list[RequestResult], int]:
    """Results of a closed loop with the default client, and how many connections it opened."""

    def plan(seq: int) -> PlannedRequest:
        return PlannedRequest(seq=seq, prompt_tokens=8, output_tokens=output_tokens, prompt="hi")

    async def main() -> tuple[list[RequestResult], int]:
        chat = adapter(base_url, limits)
        results: list[RequestResult] = []
        opened = 0
        async with make_client() as http:
            transport = http._transport
            assert isinstance(transport, ArrivalTransport)  # the default client
            connect = transport._connect

            async def counting(*args: Any) -> Any:
                nonlocal opened
                opened += 1
                return await connect(*args)

            transport._connect = counting  # type: ignore[method-assign]

            async def send(request: PlannedRequest, intended: int) -> RequestResult:
                return await chat.measure(http, request, intended)

            source = RequestSource(plan, 0, requests, None)
            await ClosedLoop(streams, source).run(send, lambda _, r: results.append(r))
        return results, opened

    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(main())


def test_streams_are_stamped_in_order_on_reused_connections(
    simulator: Callable[..., str],
) -> None:
    url = simulator(ttft_ms=50, itl_ms=10)
    results, opened = closed_loop(url, streams=8, requests=48, output_tokens=12)
    assert len(results) == 48 and all(r.ok for r in results), [r.failure for r in results]
    for r in results:
        assert r.first_byte is not None and r.first_token is not None and r.end is not None
        # role chunk first, then tokens; the body ends with (or after) the last token. A
        # client descheduled past the 50 ms TTFT reads the role chunk and the first token
        # in one read, which carries one kernel stamp: then first_byte == first_token.
        assert r.sent < r.first_byte <= r.first_token <= r.last_token <= r.end
        assert len(r.token_stamps) == 12 and r.completion_tokens == 12
        assert r.token_count_source == "usage"
    assert opened == 8  # one keep-alive connection per virtual user, reused 6 times
    ttft = np.array([(r.first_token - r.sent) / 1e6 for r in results if r.first_token])
    itl = np.concatenate([np.array(r.itl_gaps()) / 1e6 for r in results])
    assert float(np.min(ttft)) >= 50 - 1.5  # timers may fire up to 1 ms early
    assert abs(float(np.median(ttft)) - 50) < 15, np.median(ttft)
    assert abs(float(np.median(itl)) - 10) < 2.0, np.median(itl)


@pytest.mark.parametrize(
    ("spec", "error_class"),
    [
        ({"cut_rate": 1.0}, ErrorClass.PROTOCOL),
        ({"error_rate": 1.0, "error_status": 503}, ErrorClass.HTTP_5XX),
        ({"error_rate": 1.0, "error_status": 429}, ErrorClass.HTTP_429),
        ({"stall_rate": 1.0, "stall_ms": 3000}, ErrorClass.TIMEOUT),
    ],
    ids=["cut", "5xx", "429", "stall"],
)
def test_simulated_faults_are_classified(
    simulator: Callable[..., str], spec: dict[str, Any], error_class: ErrorClass
) -> None:
    url = simulator(ttft_ms=20, itl_ms=5, **spec)
    stall = Limits(timeout_s=30.0, stall_timeout_s=0.3, connect_timeout_s=5.0)
    results, _ = closed_loop(url, streams=2, requests=4, output_tokens=10, limits=stall)
    assert [r.failure.error_class if r.failure else None for r in results] == [error_class] * 4
    for r in results:
        assert r.end is not None and r.end >= r.sent


def test_refused_connection_is_classified_connect() -> None:
    results, _ = closed_loop(f"http://127.0.0.1:{free_port()}/v1", 1, 2, 4)
    assert [r.failure.error_class if r.failure else None for r in results] == [
        ErrorClass.CONNECT
    ] * 2


@pytest.mark.parametrize("spec", [{}, {"error_rate": 1.0, "error_status": 503}], ids=["ok", "503"])
def test_measured_requests_leave_no_cyclic_garbage(
    simulator: Callable[..., str], spec: dict[str, Any]
) -> None:
    # A streamed httpx response and its body refer to each other; a measured request
    # breaks that cycle once the response is closed, so reference counting frees each
    # request's response, request, headers and buffers when it ends, and the collector's
    # pauses do not grow with the number of requests (docs/load.md).
    url = simulator(ttft_ms=5, itl_ms=1, **spec)
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector would free stays in gc.garbage
    try:
        results, _ = closed_loop(url, streams=4, requests=40, output_tokens=4)
        gc.collect()
        leaked = Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    assert len(results) == 40
    assert {r.ok for r in results} == {not spec}
    assert leaked["Response"] == 0 and leaked["ArrivalStream"] == 0, leaked.most_common(10)


def test_phases_and_ids_new_connections_only_for_each_first_request(
    simulator: Callable[..., str],
) -> None:
    url = simulator(ttft_ms=30, itl_ms=5)
    results, opened = closed_loop(url, streams=4, requests=20, output_tokens=4)
    assert len(results) == 20 and all(r.ok for r in results), [r.failure for r in results]
    assert opened == 4
    by_send = sorted(results, key=lambda r: r.sent)
    # Every virtual user's first request opened a connection (all four were sent before
    # any answer ended); every later one reused a connection and had no phases.
    assert [r.phases.connection_new for r in by_send] == [True] * 4 + [False] * 16
    for r in by_send[:4]:
        assert r.phases.dns_start is None and r.phases.tls_start is None  # 127.0.0.1 over http
        assert r.phases.connect_start is not None and r.phases.connect_end is not None
        assert r.phases.request_written is not None and r.first_byte is not None
        assert (
            r.sent
            <= r.phases.connect_start
            <= r.phases.connect_end
            <= r.phases.request_written
            <= r.first_byte
        )
    for r in by_send[4:]:
        assert (
            r.phases.dns_start,
            r.phases.connect_start,
            r.phases.connect_end,
            r.phases.tls_start,
        ) == (None,) * 4
        assert r.phases.request_written is not None and r.first_byte is not None
        assert r.sent <= r.phases.request_written <= r.first_byte
    # Each answer's own stream id, in its chunks and its x-request-id header alike.
    ids = [r.response_id for r in results]
    assert all(r.server_request_id == r.response_id for r in results)
    assert len(set(ids)) == len(ids) and all(i and i.startswith("chatcmpl-sim-") for i in ids)
