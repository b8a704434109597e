"""The batching simulator measured through the real client, against its own model.

A real simulator process (``python -m workers.simulator``) serves a 405B deployment;
the real measurement client (the chat adapter on ``make_client``) drives it closed-loop.
The expectation for each run is the same discrete-event model replayed on virtual time
with the client's own send times as arrivals (``perf_counter`` is CLOCK_MONOTONIC on
Linux, shared by both processes, and replay only uses the gaps between arrivals).
Tolerances leave room for a loaded 2-core machine: the server may emit late (never
early) and the client may stamp late, by milliseconds, not by whole 25 ms steps.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from scenarios.providers.simulate import SimulateSpec
from workers.client.adapters.openai_chat import chat_adapter
from workers.client.http import make_client
from workers.client.result import RequestResult
from workers.client.streaming import Limits, json_headers
from workers.prompts.plan import PlannedRequest
from workers.runtime.event_loop import new_loop
from workers.simulator.process import READY_PREFIX
from workers.simulator.scheduler import BatchScheduler, replay

# serial: it measures timing (or memory); nothing may run beside it (tests/support/tiers.py).
pytestmark = [pytest.mark.integration, pytest.mark.serial]

REPO = Path(__file__).resolve().parents[2]
H100 = SimulateSpec(model="llama-3.1-405b", quant="fp8", hardware="h100", gpus=8, efficiency=0.6)
H200 = H100.model_copy(update={"hardware": "h200"})


@contextmanager
def simulator(spec: SimulateSpec) -> Iterator[str]:
    """A simulator process on a free port; its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "workers.simulator", "--spec-json", spec.model_dump_json()],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()  # the child prints it when bound
        assert line.startswith(READY_PREFIX), line
        yield f"http://127.0.0.1:{int(line.removeprefix(READY_PREFIX))}/v1"
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def closed_loop(
    base_url: str, users: int, per_user: int, prompt_words: int, max_tokens: int
) -> list[RequestResult]:
    """``users`` virtual users, each sending ``per_user`` requests back to back."""

    async def main() -> list[RequestResult]:
        client = make_client()
        adapter = chat_adapter(
            url=f"{base_url}/chat/completions",
            model="simulated",
            headers=json_headers(),
            limits=Limits(timeout_s=120, stall_timeout_s=60, connect_timeout_s=10),
            retry=None,
        )
        prompt = " ".join(["word"] * prompt_words)  # the simulator counts words
        request = PlannedRequest(0, prompt_words, max_tokens, prompt)

        async def user() -> list[RequestResult]:
            return [
                await adapter.measure(client, request, time.perf_counter_ns())
                for _ in range(per_user)
            ]

        try:
            done = await asyncio.gather(*(user() for _ in range(users)))
        finally:
            await client.aclose()
        return [result for results in done for result in results]

    with asyncio.Runner(loop_factory=new_loop) as runner:
        results = runner.run(main())
    assert all(r.ok and r.completion_tokens == max_tokens for r in results), [
        r.failure for r in results if not r.ok
    ]
    return results


def expected(
    spec: SimulateSpec, results: list[RequestResult], prompt: int, max_tokens: int
) -> list[list[float]]:
    """The model's token times for these requests, arriving when the client sent them."""
    arrivals = [(r.sent / 1e9, prompt, max_tokens) for r in results]
    return replay(BatchScheduler.from_spec(spec), arrivals)


def ttfts(results: list[RequestResult]) -> list[float]:
    return [(r.first_token or 0) / 1e9 - r.sent / 1e9 for r in results]


def itls(results: list[RequestResult]) -> list[float]:
    return [gap / 1e9 for r in results for gap in r.itl_gaps()]


def model_ttfts(results: list[RequestResult], times: list[list[float]]) -> list[float]:
    return [t[0] - r.sent / 1e9 for r, t in zip(results, times, strict=True)]


def model_itls(times: list[list[float]]) -> list[float]:
    return [b - a for t in times for a, b in pairwise(t)]


def test_single_stream_matches_the_model() -> None:
    with simulator(H100) as url:
        results = closed_loop(url, users=1, per_user=3, prompt_words=128, max_tokens=48)
    times = expected(H100, results, 128, 48)
    for result, model in zip(results, times, strict=True):
        measured_speed = 47 / ((result.last_token or 0) - (result.first_token or 0)) * 1e9
        model_speed = 47 / (model[-1] - model[0])
        assert measured_speed == pytest.approx(model_speed, rel=0.05)  # the 5 %
    measured, model = (
        statistics.median(ttfts(results)),
        statistics.median(model_ttfts(results, times)),
    )
    assert model * 0.99 <= measured <= model * 1.1 + 0.015  # ≈ 50 ms: prefill + one step


def test_thirty_two_streams_match_the_model() -> None:
    with simulator(H100) as url:
        results = closed_loop(url, users=32, per_user=3, prompt_words=128, max_tokens=32)
        stats = httpx.get(f"{url}/simulator/stats").json()
    times = expected(H100, results, 128, 32)
    itl, model_itl = statistics.median(itls(results)), statistics.median(model_itls(times))
    assert itl == pytest.approx(model_itl, rel=0.05, abs=0.002)
    single = BatchScheduler.from_spec(H100).cost.seconds(1, 128, 0)
    assert model_itl > single  # 32 sequences' KV and FLOPs make every step longer
    ttft, model_ttft = (
        statistics.median(ttfts(results)),
        statistics.median(model_ttfts(results, times)),
    )
    # 31 prompts prefilled in one ≈ 0.4 s step: TTFT is far above the idle 50 ms
    assert model_ttft > 0.3
    assert ttft == pytest.approx(model_ttft, rel=0.15, abs=0.02)
    assert stats["latency_model"] == "batching"
    assert stats["max_running"] == 32
    assert stats["emit_lateness"]["count"] == 32 * 3 * 32


def max_decoding(results: list[RequestResult]) -> int:
    """Most streams between their first and last token at once, from client stamps."""
    events = sorted(
        [(r.first_token or 0, 1) for r in results] + [(r.last_token or 0, -1) for r in results]
    )
    most = current = 0
    for _, change in events:
        current += change
        most = max(most, current)
    return most


def test_h200_sustains_more_concurrent_sequences_than_h100() -> None:
    measured = {}
    for name, spec in (("h100", H100), ("h200", H200)):
        with simulator(spec) as url:
            measured[name] = max_decoding(closed_loop(url, 64, 1, prompt_words=16, max_tokens=24))
    capacity_h100 = BatchScheduler.from_spec(H100).capacity
    assert capacity_h100 == 46 < 64  # the FP8 weights leave room for 46 × 8k sequences
    assert measured["h100"] == capacity_h100  # the other 18 queued for a slot
    assert measured["h200"] == 64


def load_point(results: list[RequestResult]) -> tuple[float, float, float]:
    """TTFT mean (s), per-stream decode speed median (tok/s) and aggregate output tok/s
    of one closed-loop level, all from the client's own stamps."""
    speeds = [
        ((r.completion_tokens or 0) - 1) / (((r.last_token or 0) - (r.first_token or 0)) / 1e9)
        for r in results
        if (r.last_token or 0) > (r.first_token or 0)
    ]
    span = (max(r.end or 0 for r in results) - min(r.sent for r in results)) / 1e9
    aggregate = sum(r.completion_tokens or 0 for r in results) / span
    # Mean, not median: the requests that queued for a slot are a minority of the level.
    return statistics.fmean(ttfts(results)), statistics.median(speeds), aggregate


def test_latency_rises_and_throughput_saturates_with_concurrency() -> None:
    capacity = BatchScheduler.from_spec(H100).capacity  # 46 sequences of 8k tokens
    points = {}
    with simulator(H100) as url:
        for users in (1, 16, capacity, 64):
            # Long prompts: each sequence's KV is read every step, so bigger batches slow
            # every stream down, and prefill competes with decoding.
            results = closed_loop(url, users, 2, prompt_words=400, max_tokens=48)
            points[users] = load_point(results)
    ttft = {users: p[0] for users, p in points.items()}
    speed = {users: p[1] for users, p in points.items()}
    aggregate = {users: p[2] for users, p in points.items()}
    assert ttft[1] < ttft[16] < ttft[64]  # prefill contention, then queueing for a slot
    # Bigger batches read more KV per step: every stream slows down.
    assert speed[1] > speed[capacity]
    assert speed[16] > speed[capacity]
    assert aggregate[16] > 5 * aggregate[1]  # batching multiplies throughput...
    assert aggregate[capacity] > aggregate[16]
    assert aggregate[64] < 1.25 * aggregate[capacity]  # ...until every slot is taken
