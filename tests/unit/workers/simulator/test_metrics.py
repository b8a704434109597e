"""The simulator's /metrics text (workers/simulator/metrics.py): vLLM's names, the batching
scheduler's own running/waiting/KV figures, in-flight counts for the fixed model, and
token counters that count what was served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from scenarios.providers.simulate import SimulateSpec
from scenarios.wire.server_metrics import KNOWN_NAMES
from workers.shard.prometheus_text import parse_known
from workers.simulator.batching import BatchingLatency
from workers.simulator.latency import FixedLatency
from workers.simulator.metrics import ServedCounters, metrics_text


def _figures(text: bytes) -> dict[str, float]:
    parsed = parse_known(text.decode(), KNOWN_NAMES)
    assert parsed.dropped == 0
    assert all(s["labels"] == [("model_name", 'sim "x"')] for s in parsed.samples)
    return {str(s["metric"]): float(str(s["value"])) for s in parsed.samples}


def test_the_fixed_model_reports_in_flight_requests_and_no_kv() -> None:
    counters = ServedCounters(in_flight=3, prompt_tokens=40, generation_tokens=12)
    figures = _figures(metrics_text('sim "x"', FixedLatency(0.1, 0.01), counters))
    assert figures == {
        "vllm:num_requests_running": 3.0,
        "vllm:num_requests_waiting": 0.0,
        "vllm:prompt_tokens_total": 40.0,
        "vllm:generation_tokens_total": 12.0,
    }


def test_the_batching_model_reports_its_scheduler() -> None:
    latency = BatchingLatency.from_spec(SimulateSpec(model="llama-3.1-8b", max_batch=2))
    scheduler = latency.scheduler
    for _ in range(5):
        scheduler.submit(100, 10, 0.0)
    step = scheduler.next_step(0.0)
    assert step is not None
    scheduler.complete(step)
    figures = _figures(metrics_text('sim "x"', latency, ServedCounters()))
    assert figures["vllm:num_requests_running"] == 2.0
    assert figures["vllm:num_requests_waiting"] == 3.0
    resident = sum(s.kv_tokens for s in scheduler.running)
    assert resident == 200  # two prompts prefilled
    assert figures["vllm:kv_cache_usage_perc"] == resident / scheduler.kv_tokens_capacity
    assert 0 < figures["vllm:kv_cache_usage_perc"] < 1


def test_counters_count_what_passes_and_in_flight_returns_to_zero() -> None:
    counters = ServedCounters()

    async def tokens() -> AsyncIterator[int]:
        for count in (2, 2, 1):
            yield count

    async def main() -> list[int]:
        seen = []
        async for count in counters.counted(7, tokens()):
            assert counters.in_flight == 1
            seen.append(count)
        return seen

    assert asyncio.run(main()) == [2, 2, 1]
    assert (counters.in_flight, counters.prompt_tokens, counters.generation_tokens) == (0, 7, 5)


def test_a_stream_closed_early_is_closed_inside_too() -> None:
    counters = ServedCounters()
    closed: list[bool] = []

    async def tokens() -> AsyncIterator[int]:
        try:
            for _ in range(10):
                yield 1
        finally:
            closed.append(True)

    async def main() -> None:
        stream = counters.counted(3, tokens())
        async for _ in stream:
            break
        await stream.aclose()  # type: ignore[attr-defined]

    asyncio.run(main())
    assert closed == [True] and counters.in_flight == 0 and counters.generation_tokens == 1
