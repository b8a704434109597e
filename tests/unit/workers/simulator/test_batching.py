"""The continuous-batching model's arithmetic against the roofline, on virtual time,
plus its real-time driver and how a spec picks the latency model."""

from __future__ import annotations

import asyncio
import statistics
import time
from itertools import pairwise

import pytest

from scenarios.providers.simulate import SimulateSpec
from scenarios.roofline import Assumptions, decode_step, memory_fit, prefill
from workers.simulator.batching import BatchingLatency, Lateness, latency_for
from workers.simulator.latency import FixedLatency
from workers.simulator.scheduler import BatchScheduler, replay, spec_deployment

H100_FP8 = SimulateSpec(model="llama-3.1-405b", quant="fp8", hardware="h100", gpus=8)
H200_FP8 = H100_FP8.model_copy(update={"hardware": "h200"})


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in pairwise(times)]


def test_single_stream_itl_is_the_roofline_step_over_efficiency() -> None:
    dep, knobs = spec_deployment(H100_FP8)
    times = replay(BatchScheduler.from_spec(H100_FP8), [(0.0, 128, 16)])[0]
    assert len(times) == 16
    for n, gap in enumerate(gaps(times), start=2):
        # the n-th token's step reads the prompt and the n - 1 tokens before it
        assert gap == pytest.approx(decode_step(dep, 1, 128 + n - 1, knobs).step_s, rel=1e-12)
    ceiling = decode_step(dep, 1, 128, Assumptions(efficiency=1.0)).step_s
    assert gaps(times)[0] == pytest.approx(ceiling / 0.6, rel=1e-3)
    # docs/roofline.md: 405B FP8 on 8×H100 ≈ 66 tok/s at the ceiling → ≈ 40 tok/s at 0.6
    assert 1 / statistics.median(gaps(times)) == pytest.approx(66.0 * 0.6, rel=0.01)


def test_ttft_on_an_idle_server_is_prefill_plus_one_decode_step() -> None:
    spec = H100_FP8.model_copy(update={"step_overhead_ms": 2.0})
    dep, knobs = spec_deployment(spec)
    for prompt in (16, 128, 4000):
        first = replay(BatchScheduler.from_spec(spec), [(10.0, prompt, 4)])[0][0]
        expected = (
            prefill(dep, prompt, knobs).prefill_s
            + 0.002
            + decode_step(dep, 1, prompt, knobs).step_s
        )
        assert first - 10.0 == pytest.approx(expected, rel=1e-9)
    # a long prompt is compute-bound: its prefill dominates TTFT
    long = replay(BatchScheduler.from_spec(spec), [(0.0, 4000, 1)])[0][0]
    assert long > 5 * replay(BatchScheduler.from_spec(spec), [(0.0, 16, 1)])[0][0]


def test_itl_grows_with_batch_as_the_roofline_says() -> None:
    dep, knobs = spec_deployment(H100_FP8)
    medians = []
    for batch in (1, 8, 32, 46):
        traces = replay(BatchScheduler.from_spec(H100_FP8), [(0.0, 6000, 64)] * batch)
        itl = statistics.median(g for t in traces for g in gaps(t))
        # all sequences in lockstep, each holding ~6000 + 32 tokens at the median
        assert itl == pytest.approx(decode_step(dep, batch, 6032, knobs).step_s, rel=1e-3)
        medians.append(itl)
    assert medians == sorted(medians)
    assert medians[-1] > 1.3 * medians[0]  # 46 × 6k tokens of KV: +35 % bytes per step


def test_requests_queue_when_the_kv_cache_is_full() -> None:
    dep, knobs = spec_deployment(H100_FP8)
    capacity = memory_fit(dep, 8192, knobs).max_sequences
    assert capacity == 46  # 405B FP8 weights leave ~195 GB of KV on 8×H100
    scheduler = BatchScheduler.from_spec(H100_FP8)
    traces = replay(scheduler, [(0.0, 16, 24)] * 64)
    assert scheduler.max_running == capacity
    first_wave_end = max(t[-1] for t in traces[:capacity])
    assert all(t[0] > first_wave_end for t in traces[capacity:])  # waited for a free slot
    # the same load fits 8×H200 at once: nobody waits
    h200 = BatchScheduler.from_spec(H200_FP8)
    h200_traces = replay(h200, [(0.0, 16, 24)] * 64)
    assert h200.max_running == 64
    assert max(t[0] for t in h200_traces) < first_wave_end


def test_per_stream_speed_falls_and_aggregate_saturates_with_concurrency() -> None:
    spec = H100_FP8.model_copy(update={"context": 4096})  # capacity 92
    capacity = BatchScheduler.from_spec(spec).capacity
    per_stream, aggregate = [], []
    for streams in (1, 16, 64, capacity, 2 * capacity):
        traces = replay(BatchScheduler.from_spec(spec), [(0.0, 3000, 200)] * streams)
        running = traces[: min(streams, capacity)]  # the first wave, decoding together
        start, end = max(t[0] for t in running), min(t[-1] for t in running)
        tokens = sum(1 for t in running for x in t if start < x <= end)
        per_stream.append(1 / statistics.median(g for t in running for g in gaps(t)))
        aggregate.append(tokens / (end - start))
    assert per_stream == sorted(per_stream, reverse=True)
    assert aggregate[:4] == sorted(aggregate[:4])
    assert aggregate[4] == pytest.approx(aggregate[3], rel=1e-6)  # beyond capacity: queueing


def test_classic_prefill_stalls_decodes_and_chunked_prefill_does_not() -> None:
    dep, knobs = spec_deployment(H100_FP8)
    load = [(0.0, 16, 40), (0.3, 4000, 4)]  # a long prompt arrives mid-stream
    classic = gaps(replay(BatchScheduler.from_spec(H100_FP8), load)[0])
    stall = max(classic)
    assert stall > prefill(dep, 4000, knobs).prefill_s  # the whole prompt, in one step

    chunked_spec = H100_FP8.model_copy(update={"chunked_prefill_tokens": 512})
    chunked = gaps(replay(BatchScheduler.from_spec(chunked_spec), load)[0])
    cost = BatchScheduler.from_spec(chunked_spec).cost
    assert max(chunked) == pytest.approx(cost.seconds(1, 16 + 39, 511), rel=0.01)
    assert max(chunked) < stall / 3


def test_long_requests_are_cut_to_the_context() -> None:
    spec = H100_FP8.model_copy(update={"context": 64})
    traces = replay(BatchScheduler.from_spec(spec), [(0.0, 60, 100), (0.0, 500, 10)])
    assert [len(t) for t in traces] == [4, 1]


def test_replay_is_deterministic_and_ordered_by_arrival() -> None:
    load = [(0.05, 128, 8), (0.0, 64, 8), (0.01, 256, 8)]
    first = replay(BatchScheduler.from_spec(H100_FP8), load)
    assert first == replay(BatchScheduler.from_spec(H100_FP8), load)
    # prefill comes first: the earliest request's first token waits for the later prompts
    assert first[1][0] == first[0][0] == first[2][0]


def test_scheduler_rejects_a_chunk_budget_below_the_batch() -> None:
    cost = BatchScheduler.from_spec(H100_FP8).cost
    with pytest.raises(ValueError, match="chunk_tokens"):
        BatchScheduler(cost, capacity=8, context=1024, chunk_tokens=4)


def test_lateness_summary() -> None:
    lateness = Lateness()
    for us in range(1, 1001):
        lateness.record(us / 1e6)
    lateness.record(-1e-3)  # never early: clamped
    summary = lateness.summary()
    assert summary["count"] == 1001
    assert summary["p50_ms"] == pytest.approx(0.5, abs=0.002)
    assert summary["p99_ms"] == pytest.approx(0.99, abs=0.002)
    assert summary["max_ms"] == 1.0
    assert Lateness().summary() == {"count": 0}


# ---------------------------------------------------------------- real-time driver

FAST = SimulateSpec(model="llama-3.1-8b", quant="fp16", hardware="h100", gpus=1, efficiency=1.0)


def test_driver_emits_at_the_model_times_never_early() -> None:
    async def main() -> tuple[list[list[float]], list[float], BatchingLatency]:
        latency = BatchingLatency.from_spec(FAST)
        starts: list[float] = []

        async def stream(prompt: int, tokens: int) -> list[float]:
            starts.append(time.perf_counter())
            stamps = []
            async for count in latency.emissions(prompt, tokens):
                assert count == 1
                stamps.append(time.perf_counter())
            return stamps

        stamps = await asyncio.gather(stream(32, 12), stream(64, 12), stream(16, 12))
        return list(stamps), starts, latency

    stamps, starts, latency = asyncio.run(main())
    model = replay(
        BatchScheduler.from_spec(FAST),
        [(s, p, 12) for s, p in zip(starts, (32, 64, 16), strict=True)],
    )
    for measured, expected in zip(stamps, model, strict=True):
        assert len(measured) == len(expected) == 12
        # Never early. How late is the machine's scheduling, not the driver's logic, so it
        # is measured by benchmarks/simulator_drift.py and not bounded here.
        assert all(e <= m for m, e in zip(measured, expected, strict=True))
        assert measured == sorted(measured)
    stats = latency.stats()
    assert stats["emit_lateness"]["count"] == 36
    assert stats["max_running"] == 3
    assert stats["running"] == stats["waiting"] == 0


def test_driver_frees_the_slot_of_an_abandoned_stream() -> None:
    spec = FAST.model_copy(update={"max_batch": 1})

    async def main() -> BatchingLatency:
        latency = BatchingLatency.from_spec(spec)
        gen = latency.emissions(16, 1000)
        await anext(gen)
        await gen.aclose()  # the client went away after one token
        async for _ in latency.emissions(16, 3):  # gets the only slot
            pass
        return latency

    latency = asyncio.run(main())
    assert latency.stats()["running"] == 0


def test_tokens_per_chunk_groups_tokens_into_events() -> None:
    spec = FAST.model_copy(update={"tokens_per_chunk": 4})

    async def main() -> list[int]:
        return [count async for count in latency_for(spec).emissions(16, 10)]

    assert asyncio.run(main()) == [4, 4, 2]


def test_latency_for_picks_the_model_from_the_spec() -> None:
    assert isinstance(latency_for(SimulateSpec()), FixedLatency)
    assert isinstance(latency_for(H100_FP8), BatchingLatency)
