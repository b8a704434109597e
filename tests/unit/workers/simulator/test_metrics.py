"""The simulator's /metrics text (workers/simulator/metrics.py): vLLM's names, the batching
scheduler's own running/waiting/KV figures, in-flight counts for the fixed model, and
token counters that count what was served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

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


def _gpu(labels: object) -> str:
    assert isinstance(labels, list)
    return str(dict(labels).get("gpu", ""))


def _samples(text: bytes) -> dict[tuple[str, str], float]:
    """Every known sample as (name, its gpu label or "") → value."""
    parsed = parse_known(text.decode(), KNOWN_NAMES)
    assert parsed.dropped == 0
    return {(str(s["metric"]), _gpu(s["labels"])): float(str(s["value"])) for s in parsed.samples}


def test_optional_figures_are_served_only_when_asked_for() -> None:
    counters = ServedCounters.for_spec(SimulateSpec())
    plain = _samples(metrics_text("m", FixedLatency(0.1, 0.01), counters))
    assert {name for name, _ in plain} == {
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
    }


def test_prefix_cache_lookups_are_vllms_counters_in_tokens() -> None:
    counters = ServedCounters.for_spec(SimulateSpec(prefix_cache=True))
    counters.looked_up(100, 0)
    counters.looked_up(120, 96)
    figures = _samples(metrics_text("m", FixedLatency(0.1, 0.01), counters))
    assert figures[("vllm:prefix_cache_queries_total", "")] == 220
    assert figures[("vllm:prefix_cache_hits_total", "")] == 96


def test_speculative_decoding_counts_every_token_but_each_requests_first() -> None:
    spec = SimulateSpec(spec_decode_acceptance=1.0, spec_decode_tokens=3)
    counters = ServedCounters.for_spec(spec)

    async def tokens() -> AsyncIterator[int]:
        for count in (1, 4, 4):
            yield count

    async def main() -> None:
        async for _ in counters.counted(10, tokens()):
            pass

    asyncio.run(main())
    figures = _samples(metrics_text("m", FixedLatency(0.1, 0.01), counters))
    # 8 decoded tokens, every draft of 3 accepted: each covers 4 tokens, two drafts.
    assert figures[("vllm:spec_decode_num_drafts_total", "")] == 2
    assert figures[("vllm:spec_decode_num_draft_tokens_total", "")] == 6
    assert figures[("vllm:spec_decode_num_accepted_tokens_total", "")] == 6


def test_gpu_power_follows_the_share_of_the_batch_in_use() -> None:
    spec = SimulateSpec(
        model="llama-3.1-8b", max_batch=4, gpus=2, gpu_power=True, gpu_idle_watts=100,
        gpu_max_watts=500,
    )  # fmt: skip
    latency = BatchingLatency.from_spec(spec)
    counters = ServedCounters.for_spec(spec)
    idle = _samples(metrics_text("m", latency, counters))
    assert idle[("DCGM_FI_DEV_POWER_USAGE", "0")] == idle[("DCGM_FI_DEV_POWER_USAGE", "1")] == 100
    scheduler = latency.scheduler
    for _ in range(3):
        scheduler.submit(100, 10, 0.0)
    step = scheduler.next_step(0.0)
    assert step is not None
    scheduler.complete(step)
    busy = _samples(metrics_text("m", latency, counters))
    share = len(scheduler.running) / scheduler.capacity
    assert busy[("DCGM_FI_DEV_POWER_USAGE", "1")] == pytest.approx(100 + 400 * share)
    assert busy[("DCGM_FI_DEV_POWER_USAGE", "1")] > 100
    # The fixed model: one GPU, at full draw while anything runs.
    fixed = ServedCounters.for_spec(SimulateSpec(gpu_power=True))
    fixed.in_flight = 1
    one = _samples(metrics_text("m", FixedLatency(0.1, 0.01), fixed))
    power = [gpu for name, gpu in one if name == "DCGM_FI_DEV_POWER_USAGE"]
    assert power == ["0"]
    assert one[("DCGM_FI_DEV_POWER_USAGE", "0")] == 700


def test_max_power_below_idle_is_refused() -> None:
    with pytest.raises(ValueError, match="gpu_max_watts"):
        SimulateSpec(gpu_power=True, gpu_idle_watts=300, gpu_max_watts=200)
